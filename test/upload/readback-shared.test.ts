// Issue 33: logd.Api(store=URL) reads the shared store, every node's runs, into DataFrames. Real processes: a
// throwaway PostgreSQL, two nodes (two daemons with their own data dirs and node names) whose Python trainers
// upload to it, and a reader that is neither node: its Api starts `logd reads-server` (daemon/shared-reads) and
// reads through it. The node's own daemon is never asked. What each node's daemon reads back from its own store
// is the reference: the shared store's DataFrames must be the same, row for row.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { pgUnavailable, startPg, type PgCluster } from '../pg/cluster.js';
import { alive, killDaemon, makeEnv, runScript, script, startDaemon, waitUntil, type TestEnv } from '../helpers.js';
import { pandasMissing, runPython, spawnPython, killSpawnedPython } from '../python/py-helpers.js';
import { nodeEnv, waitUploaded } from './helpers.js';

const why = pgUnavailable() ?? pandasMissing();

let pgc: PgCluster;
const envs: TestEnv[] = [];

const TRAINER = `
import sys, logd
node, n = sys.argv[1], int(sys.argv[2])
for g in range(2):
    run = logd.init(project="shared-read", group="sweep", name="%s-%d" % (node, g), config={"lr": 0.01 * (g + 1), "node": node})
    for s in range(n):
        row = {"loss": 1.0 / (s + 1) + g, "acc": s / n}
        if s % 7 == 0:
            row["rare"] = float("nan") if s % 14 == 0 else -float("inf")
        run.log(row, step=s)
    print("%s says %d" % (node, g))
    run.finish()
    print("RUN", run.id, flush=True)
`;

/** Every run of the project, its history and its console lines, as JSON: from the node's store or the shared one. */
const READER = `
import json, sys, logd, numpy as np
store = sys.argv[1] if len(sys.argv) > 1 else None
api = logd.Api(store=store) if store else logd.Api()
out = {"where": api.where, "runs": {}}
for r in api.runs(project="shared-read"):
    h = r.history()
    out["runs"][r.id] = {
        "name": r.name, "config": r.config,
        "columns": list(h.columns),
        "values": {c: [None if np.isnan(v) else (str(v) if np.isinf(v) else float(v)) for v in h[c].to_numpy(dtype=float)] for c in h.columns if c != "_time"},
        "logs": list(r.logs()["line"]),
    }
if store:
    out["filtered"] = sorted(r.name for r in api.runs(filter="lr > 0.015"))
    out["table"] = list(api.runs(project="shared-read").to_pandas()["name"])
    try:
        api.run("nosuchrun")
    except LookupError as e:
        out["missing"] = str(e)
    # The group's runs read together (ReadHistories: a few statements for the lot), the same table as run by run.
    import pandas as pd
    grp = api.group("sweep")
    used = []
    stream = api._stream
    api._stream = lambda method, *a: (used.append(method), stream(method, *a))[1]
    together = grp.history()
    api._stream = stream
    frames = []
    for r in grp:
        h = r.history()
        h.insert(0, "run_id", r.id)
        h.insert(1, "rank", r.rank)
        frames.append(h)
    alone = pd.concat(frames, ignore_index=True)
    out["group"] = {"calls": sorted(set(used)), "rows": len(together), "same": bool(together.equals(alone)), "columns": list(together.columns)}
    out["child"] = api._shared.proc.pid
    api.close()
    out["child_code"] = api._shared.proc.returncode
print(json.dumps(out))
`;

describe.skipIf(why !== null)(`logd.Api(store=URL): the shared store read into DataFrames${why ? ` (skipped: ${why})` : ''}`, () => {
  beforeAll(async () => {
    pgc = await startPg();
  }, 120_000);
  afterAll(() => pgc?.destroy());
  afterEach(async () => {
    killSpawnedPython();
    for (const t of envs.splice(0)) {
      await killDaemon(t.dir);
      await t.cleanup();
    }
  });

  it('two nodes\' runs, each history row for row as its node has it, console lines, a filter, an unknown run named; the reader ends with close()', async () => {
    const ids: Record<string, string[]> = {};
    const local: Record<string, any> = {};
    for (const node of ['node-a', 'node-b']) {
      const t = nodeEnv(node, pgc.url, { LOGD_IDLE_TIMEOUT_MS: '120000' });
      envs.push(t);
      await startDaemon(t);
      const file = path.join(t.dir, 'train.py');
      fs.writeFileSync(file, TRAINER);
      const r = await runPython(t, [file, node, '1500']);
      expect(r.exitCode, r.all).toBe(0);
      ids[node] = r.stdout.split('\n').filter((l) => l.startsWith('RUN ')).map((l) => l.slice(4));
      expect(ids[node]).toHaveLength(2);
      for (const id of ids[node]) await waitUploaded(t, pgc.url, id, 1500);
      fs.writeFileSync(path.join(t.dir, 'read.py'), READER);
      const l = await runPython(t, [path.join(t.dir, 'read.py')]);
      expect(l.exitCode, l.all).toBe(0);
      local[node] = JSON.parse(l.stdout.trim().split('\n').pop()!);
    }
    // The reader: on neither node (its own data dir, no daemon; it must start none).
    const reader = makeEnv();
    envs.push(reader);
    fs.writeFileSync(path.join(reader.dir, 'read.py'), READER);
    const s = await runPython(reader, [path.join(reader.dir, 'read.py'), pgc.url]);
    expect(s.exitCode, s.all).toBe(0);
    const shared = JSON.parse(s.stdout.trim().split('\n').pop()!);
    expect(shared.where).toMatch(/^the shared store postgres:\/\/logd:\*\*\*@/); // the password is never shown
    expect(shared.group).toMatchObject({ calls: ['ReadHistories'], rows: 4 * 1500, same: true });
    expect(Object.keys(shared.runs).sort()).toEqual([...ids['node-a'], ...ids['node-b']].sort());
    for (const node of ['node-a', 'node-b']) {
      for (const id of ids[node]) {
        const want = local[node].runs[id];
        const got = shared.runs[id];
        expect(got.name).toBe(want.name);
        expect(got.config).toEqual(want.config);
        expect(got.columns).toEqual(want.columns);
        expect(got.values).toEqual(want.values); // NaN, -inf and every step, exactly
        expect(got.values._step).toHaveLength(1500);
        expect(got.logs).toEqual(want.logs);
        expect(got.logs.join('\n')).toMatch(new RegExp(`^${node} says \\d$`, 'm'));
      }
    }
    expect(shared.filtered).toEqual(['node-a-1', 'node-b-1']);
    expect([...shared.table].sort()).toEqual(['node-a-0', 'node-a-1', 'node-b-0', 'node-b-1']);
    expect(shared.missing).toMatch(/no run 'nosuchrun' in the shared store postgres:\/\/logd:\*\*\*@.*does not exist/);
    expect(shared.child_code).toBe(0);
    expect(alive(shared.child)).toBe(false);
    // The reader's node has no daemon: the shared store was read without one.
    expect(fs.existsSync(path.join(reader.runtimeDir, 'service.json'))).toBe(false);

    // TypeScript: api.shared(url), the same runs and the same columns.
    const ts = await runScript(reader, script(reader, 'read.mjs', `
      const store = await logd.api.shared(process.argv[2]);
      const out = { where: store.where, runs: {} };
      for (const r of await store.runs({ project: 'shared-read' })) {
        const h = await store.history(r.id);
        out.runs[r.id] = { name: r.name, step: Array.from(h.step), loss: Array.from(h.columns.loss), rare: Array.from(h.columns.rare, (v) => Number.isNaN(v) ? null : String(v)) };
      }
      out.filtered = (await store.runs({ filter: 'lr > 0.015' })).map((r) => r.name).sort();
      await store.close();
      console.log(JSON.stringify(out));
    `), [pgc.url]);
    expect(ts.exitCode, ts.stderr).toBe(0);
    const tsOut = JSON.parse(ts.stdout.trim().split('\n').pop()!);
    expect(tsOut.where).toBe(shared.where);
    expect(tsOut.filtered).toEqual(['node-a-1', 'node-b-1']);
    for (const node of ['node-a', 'node-b']) {
      for (const id of ids[node]) {
        const want = local[node].runs[id].values;
        expect(tsOut.runs[id].step).toEqual(want._step);
        expect(tsOut.runs[id].loss).toEqual(want.loss);
        // Python said -inf as "-inf", TypeScript as "-Infinity"; NaN (and no value) as null in both.
        expect(tsOut.runs[id].rare.map((v: string | null) => (v === '-Infinity' ? '-inf' : v))).toEqual(want.rare);
      }
    }
  }, 300_000);

  it('a run of 150 000 rows, read in many slices of one snapshot, is the node\'s own history exactly; one metric\'s rows alone', async () => {
    // 1 MB upload slices: the run is stored as several chunks of some 20 000 rows, so a read of it is several
    // pieces of the reads-server's 65 536 rows (checked below), not one.
    const t = nodeEnv('node-big', pgc.url, { LOGD_IDLE_TIMEOUT_MS: '120000', LOGD_UPLOAD_SLICE_MB: '1' });
    envs.push(t);
    await startDaemon(t);
    const N = 150_000;
    const r = await runPython(t, ['-c', `
import logd
run = logd.init(project="shared-big", name="big")
for s in range(${N}):
    row = {"loss": 1.0 / (s + 1), "acc": s * 1e-6}
    if s % 5 == 0:
        row["sparse"] = float("nan") if s % 10 == 0 else float(-s)
    run.log(row, step=s)
run.finish(timeout=300)
print("RUN", run.id, flush=True)
`]);
    expect(r.exitCode, r.all).toBe(0);
    const id = r.stdout.split('\n').find((l) => l.startsWith('RUN '))!.slice(4);
    await waitUploaded(t, pgc.url, id, N, 120_000);
    const sizes = pgc.psql(`SELECT nrows FROM logd_rows WHERE run_id = '${id}' AND stream = 0 ORDER BY ord, writer, seq_lo`, 'logd').trim().split('\n').map(Number);
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(N);
    // Chunks under 65 536 rows, 150 000 in all: a piece ends once it holds 65 536 rows or more, so it holds under
    // 131 072 and the read is two pieces or more.
    expect(Math.max(...sizes), sizes.join(' ')).toBeLessThan(65_536);
    const reader = makeEnv();
    envs.push(reader);
    fs.writeFileSync(path.join(reader.dir, 'big.py'), `
import sys, numpy as np, logd
id, data_env = sys.argv[1], sys.argv[2]
shared = logd.Api(store=sys.argv[3])
whole = shared.run(id).history()
one = shared.run(id).history(keys=["sparse"])
shared.close()
import os
os.environ.update(dict(kv.split("=", 1) for kv in data_env.split(";")))
local = logd.Api().run(id).history()
ok = list(whole.columns) == list(local.columns) and all(
    np.array_equal(whole[c].to_numpy(dtype=float), local[c].to_numpy(dtype=float), equal_nan=True) for c in whole.columns if c != "_time")
print("ROWS", len(whole), len(local), "EQUAL", ok)
print("ONE", len(one), list(one.columns), int(np.isnan(one["sparse"].to_numpy()).sum()), float(one["sparse"].to_numpy()[1]))
`);
    const envOf = ['LOGD_DIR', 'XDG_RUNTIME_DIR'].map((k) => `${k}=${t.env[k]}`).join(';');
    const b = await runPython(reader, [path.join(reader.dir, 'big.py'), id, envOf, pgc.url]);
    expect(b.exitCode, b.all).toBe(0);
    expect(b.stdout).toContain(`ROWS ${N} ${N} EQUAL True`);
    // The rows with that key only: every fifth, half of them NaN; the second is step 5's -5.
    expect(b.stdout).toContain(`ONE ${N / 5} ['_step', '_time', 'sparse'] ${N / 10} -5.0`);
  }, 300_000);

  it('a reader process killed with SIGKILL leaves no reads-server behind; the URL is not on its command line', async () => {
    const reader = makeEnv();
    envs.push(reader);
    const file = path.join(reader.dir, 'hold.py');
    fs.writeFileSync(file, `
import time, logd
api = logd.Api(store=${JSON.stringify(pgc.url)})
print("child", api._shared.proc.pid, flush=True)
time.sleep(600)
`);
    const p = spawnPython(reader, [file]);
    await waitUntil(() => p.lines.some((l) => l.startsWith('child ')), 60_000, 'the reader to open the shared store');
    const child = Number(p.lines.find((l) => l.startsWith('child '))!.split(' ')[1]);
    expect(alive(child)).toBe(true);
    const password = new URL(pgc.url).password;
    expect(fs.readFileSync(`/proc/${child}/cmdline`, 'utf8')).not.toContain(password);
    p.kill('SIGKILL');
    await waitUntil(() => !alive(child), 15_000, 'the reads-server to end with its parent');
  }, 120_000);

  it('a store that cannot be reached: a clear error within the deadline, no process left', async () => {
    const reader = makeEnv();
    envs.push(reader);
    const r = await runPython(reader, ['-c', `
import time, logd
t = time.time()
try:
    logd.Api(store="postgres://logd:secret@127.0.0.1:1/logd")
except Exception as e:
    print(type(e).__name__, "|", e, "|", round(time.time() - t, 1))
`]);
    expect(r.exitCode, r.all).toBe(0);
    const [kind, msg, secs] = r.stdout.trim().split('\n').pop()!.split(' | ');
    expect(kind).toBe('ConnectionError');
    expect(msg).toMatch(/could not open the shared store: .*127\.0\.0\.1:1/);
    expect(msg).not.toContain('secret');
    expect(Number(secs)).toBeLessThan(30);
  }, 120_000);
});
