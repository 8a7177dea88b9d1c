// Issue 22 for the Python client: every row whose log() returned survives
// the trainer's death (SIGKILL, os._exit, abort(), a segfault, a forked child
// killed before its rows reached its relay). The rows not yet acknowledged
// live in the writer's crash journal (python/logd/spool/journal.py, the format in
// docs/journal.md); these tests decode the files the Python writer leaves
// with a reader of their own (below, straight from the spec) and, when it is
// built, with the daemon's (dist/daemon/runs/journal.js), and check that the
// daemon stores every row exactly once after the kill.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { describe, it, expect, afterEach } from 'vitest';
import { ROOT, makeEnv, cliJson, exportJsonl, startDaemon, waitUntil, alive, type TestEnv } from '../helpers.js';
import { FIXTURES, pythonMissing, runPython, spawnPython, killSpawnedPython, readJson } from './py-helpers.js';

const DIST_READER = path.join(ROOT, 'dist', 'daemon', 'runs', 'journal.js');
/** The daemon's journal reader is built (`make build`): the end-to-end checks need it. */
const haveReader = () => fs.existsSync(DIST_READER);

let t: TestEnv;
afterEach(async () => {
  killSpawnedPython();
  if (t) await t.cleanup();
});

// ---- a reader of the format, from docs/journal.md alone ----

type Value = number | string; // non-finite values as "Infinity" / "-Infinity", as the fixtures write them
interface Row { step: number; time: number; values: Record<string, Value> }
interface Batch { seq: number; rows: Row[]; updates: Array<[string, string]> }
interface Decoded {
  identity: Record<string, unknown>;
  checkKind: number;
  head: number;
  ackedSeq: number;
  notJournaled: number;
  keys: string[];
  batches: Batch[];
  /** Why the ring's read stopped before a terminator; null when it ended cleanly. */
  damaged: string | null;
  regions: { keysOffset: number; keysBytes: number; ringOffset: number; ringBytes: number };
}

const json = (v: number): Value => (Number.isFinite(v) ? v : v > 0 ? 'Infinity' : '-Infinity');

function decode(file: string): Decoded {
  const b = fs.readFileSync(file);
  expect(b.toString('latin1', 0, 8)).toBe('LOGDJRN1');
  expect(b.readUInt32LE(8)).toBe(1);
  const checkKind = b.readUInt32LE(12);
  const [keysOffset, keysBytes, ringOffset, ringBytes] = [32, 36, 40, 44].map((o) => b.readUInt32LE(o));
  const idLen = b.readUInt32LE(48);
  const idBytes = b.subarray(56, 56 + idLen);
  expect(zlib.crc32(idBytes) >>> 0, 'the identity checksum').toBe(b.readUInt32LE(52));
  const check = (rec: Buffer) => (checkKind === 2 ? zlib.crc32(rec.subarray(8)) >>> 0 : NaN);
  const out: Decoded = {
    identity: JSON.parse(idBytes.toString('utf8')), checkKind, head: b.readDoubleLE(16), ackedSeq: b.readDoubleLE(24),
    notJournaled: b.readDoubleLE(3584), keys: [], batches: [], damaged: null, regions: { keysOffset, keysBytes, ringOffset, ringBytes },
  };
  for (let pos = keysOffset; pos + 16 <= keysOffset + keysBytes;) {
    const len = b.readUInt32LE(pos);
    if (len === 0) break;
    const rec = b.subarray(pos, pos + len);
    expect(check(rec), `key record at ${pos}`).toBe(rec.readUInt32LE(4));
    expect([rec.readUInt16LE(8), rec.readUInt32LE(12)]).toEqual([2, out.keys.length]);
    out.keys.push(rec.toString('utf8', 24, 24 + rec.readUInt32LE(16)));
    pos += len;
  }
  let open: Batch = { seq: 0, rows: [], updates: [] };
  let lastSeal = 0;
  for (let pos = out.head, consumed = 0; consumed < ringBytes;) {
    const rel = pos % ringBytes;
    const at = ringOffset + rel;
    const len = b.readUInt32LE(at);
    if (len === 0) break;
    const type = b.readUInt16LE(at + 8);
    if (len % 8 || len < 16 || rel + len > ringBytes || (type === 5 && rel + len !== ringBytes)) {
      out.damaged = `bad length ${len} at position ${pos}`;
      break;
    }
    const rec = b.subarray(at, at + len);
    if (type !== 5 && check(rec) !== rec.readUInt32LE(4)) {
      out.damaged = `checksum at position ${pos}`;
      break;
    }
    const n = rec.readUInt32LE(12);
    if (type === 1) {
      const idBytes = (n * 4 + 7) & ~7;
      expect(len, `row of ${n} values at ${pos}`).toBe(32 + idBytes + 8 * n);
      const values: Record<string, Value> = {};
      for (let i = 0; i < n; i++) values[out.keys[rec.readUInt32LE(32 + 4 * i)]] = json(rec.readDoubleLE(32 + idBytes + 8 * i));
      open.rows.push({ step: rec.readDoubleLE(16), time: rec.readDoubleLE(24), values });
    } else if (type === 3) {
      open.updates.push([n === 1 ? 'summary' : 'config', rec.toString('utf8', 24, 24 + rec.readUInt32LE(16))]);
    } else if (type === 4) {
      if ((rec.readUInt16LE(10) & 1) === 0 && (open.rows.length || open.updates.length)) out.batches.push({ ...open, seq: n });
      lastSeal = n;
      open = { seq: 0, rows: [], updates: [] };
    } else if (type !== 5) {
      out.damaged = `type ${type} at position ${pos}`;
      break;
    }
    pos += len;
    consumed += len;
  }
  if (open.rows.length || open.updates.length) out.batches.push({ ...open, seq: Math.max(lastSeal, out.ackedSeq) + 1 });
  return out;
}

/** The batches the daemon's reader finds, in the decoder's shape (its keys are the journal's dictionary). */
async function daemonRead(file: string): Promise<{ batches: Batch[]; damaged: string | null; notJournaled: number }> {
  const { readJournal } = await import(DIST_READER);
  const c = readJournal(file);
  expect(typeof c, String(c)).toBe('object');
  const f64 = (u: Uint8Array) => new Float64Array(u.buffer.slice(u.byteOffset, u.byteOffset + u.byteLength));
  const u32 = (u: Uint8Array) => new Uint32Array(u.buffer.slice(u.byteOffset, u.byteOffset + u.byteLength));
  const batches = c.batches.map((m: any) => {
    const [steps, times, vals, counts, ids] = [f64(m.steps), f64(m.times), f64(m.values), u32(m.counts), u32(m.keyIds)];
    const rows: Row[] = [];
    for (let r = 0, p = 0; r < m.rows; r++) {
      const values: Record<string, Value> = {};
      for (let i = 0; i < counts[r]; i++, p++) values[c.keys[ids[p]]] = json(vals[p]);
      rows.push({ step: steps[r], time: times[r], values });
    }
    const updates = [...m.summaryJson.map((s: string) => ['summary', s]), ...m.configJson.map((s: string) => ['config', s])];
    return { seq: m.seq, rows, updates };
  });
  return { batches, damaged: c.damaged, notJournaled: c.notJournaled };
}

const journals = (dataDir: string) => {
  const spool = path.join(dataDir, 'spool');
  return fs.existsSync(spool) ? fs.readdirSync(spool).filter((n) => n.endsWith('.journal')).map((n) => path.join(spool, n)) : [];
};

/** The run's rows with `key`: steps exactly 0..n-1, each once, and key's value as `value(step)`. */
async function expectSteps(runId: string, key: string, n: number, value: (step: number) => number): Promise<void> {
  const rows = await exportJsonl(t, runId, ['--raw', '--keys', key]);
  const steps = rows.map((r) => Number(r._step)).sort((a, b) => a - b);
  expect(new Set(steps).size, `run ${runId}: a step stored twice`).toBe(steps.length);
  expect(steps, `run ${runId}: rows missing`).toEqual(Array.from({ length: n }, (_, i) => i));
  for (const r of rows) expect(r[key], `step ${r._step}`).toBe(value(Number(r._step)));
}

async function waitFinal(runId: string): Promise<any> {
  let info: any;
  await waitUntil(async () => {
    info = await cliJson(t, ['show', runId]);
    return ['crashed', 'finished', 'killed'].includes(info.state);
  }, 60_000, `run ${runId} to be final`);
  return info;
}

describe.skipIf(pythonMissing !== null)(`Python client: the crash journal${pythonMissing ? ` (skipped: ${pythonMissing})` : ''}`, () => {
  it('writes the format of docs/journal.md: keys, rows, updates, SEALs, PADs round a wrapped ring, freeing, a full ring counted', async () => {
    t = makeEnv();
    const dir = path.join(t.dir, 'j');
    const r = await runPython(t, [path.join(FIXTURES, 'journal_unit.py'), dir]);
    expect(r.exitCode, r.all).toBe(0);
    const want = JSON.parse(r.stdout);
    for (const [name, w] of Object.entries<any>(want)) {
      const got = decode(w.file);
      expect(got.checkKind, name).toBe(2); // CRC-32
      expect(got.identity, name).toMatchObject({ runId: `run-${name}`, runToken: `tok-${name}`, writerId: `w-${name}`, pid: w.pid, host: os.hostname(), client: 'py' });
      expect(got.identity.startTime, name).toBeGreaterThan(0);
      const size = fs.statSync(w.file).size;
      const k = Math.floor(size / 8 / 8) * 8;
      expect(got.regions, name).toEqual({ keysOffset: 4096, keysBytes: k, ringOffset: 4096 + k, ringBytes: size - 4096 - k });
      expect(fs.statSync(w.file).mode & 0o777, name).toBe(0o600);
      expect([got.head, got.ackedSeq, got.notJournaled], name).toEqual([w.head, w.ackedSeq, w.notJournaled]);
      expect(got.keys, name).toEqual(w.keys);
      expect(got.damaged, name).toBeNull();
      const asWritten = (bs: any[]) => bs.map(([seq, rows, updates]) => ({ seq, rows: rows.map(([step, time, values]: any) => ({ step, time, values })), updates }));
      expect(got.batches, name).toEqual(asWritten(w.batches));
      if (haveReader()) {
        const d = await daemonRead(w.file);
        expect(d.damaged, name).toBeNull();
        expect(d.notJournaled, name).toBe(w.notJournaled);
        expect(d.batches, `${name}, as the daemon reads it`).toEqual(asWritten(w.batches).map((b) => ({ ...b, updates: [...b.updates.filter((u: any) => u[0] === 'summary'), ...b.updates.filter((u: any) => u[0] === 'config')] })));
      }
    }
    expect(want.wrap.head, 'the ring went round more than once').toBeGreaterThan(3 * decode(want.wrap.file).regions.ringBytes);
    expect(want.full.notJournaled).toBe(10);
  });

  it('rows come back from the journal exactly once, in order, under seqs 1, 2, 3… through wraps, a full ring and memory fallback (60 random runs)', async () => {
    t = makeEnv();
    const r = await runPython(t, [path.join(FIXTURES, 'journal_segments.py'), '60']);
    expect(r.exitCode, r.all).toBe(0);
    const [, runs, rows, notJournaled] = r.stdout.trim().split(' ');
    expect(Number(runs)).toBe(60);
    expect(Number(rows)).toBeGreaterThan(10_000);
    expect(Number(notJournaled), 'some runs filled their ring').toBeGreaterThan(0);
  });

  it('a trainer SIGKILLed with 3000 rows unsent: its journal holds all of them; a daemon started afterwards stores each once', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000' });
    const d = await startDaemon(t);
    const go = path.join(t.dir, 'go');
    // Nothing is sealed or sent for 10 minutes: every row is only in memory and in the journal when the kill comes.
    const p = spawnPython(t, [path.join(FIXTURES, 'journal_kill.py'), 'wait', '3000', go], { LOGD_NO_AUTOSTART: '1', LOGD_FLUSH_INTERVAL_MS: '600000' });
    await waitUntil(() => p.lines.includes('logged 2999') || p.exitCode !== null, 60_000, 'the trainer to log 3000 rows');
    expect(p.lines, p.err()).toContain('logged 2999');
    const id = p.lines.find((l) => l.startsWith('run '))!.slice(4);
    process.kill(d.pid, 'SIGKILL'); // no daemon to read the journal before this test does
    await waitUntil(() => !alive(d.pid), 10_000, 'the daemon to die');
    fs.writeFileSync(go, '');
    await new Promise((r) => (p.exitCode !== null || p.signalCode !== null ? r(null) : p.once('exit', r)));
    expect(p.signalCode).toBe('SIGKILL');
    const files = journals(t.dataDir);
    expect(files).toHaveLength(1);
    expect(path.basename(files[0])).toMatch(new RegExp(`^${id}--w-[0-9a-z]+\\.journal$`));
    const j = decode(files[0]);
    expect(j.identity).toMatchObject({ runId: id, writerId: path.basename(files[0]).split('--')[1].replace('.journal', ''), pid: p.pid, client: 'py' });
    expect([j.head, j.ackedSeq, j.notJournaled, j.damaged]).toEqual([0, 0, 0, null]);
    expect(j.keys).toEqual(['loss', 'half', 'grp/a', 'grp/b']);
    expect(j.batches).toHaveLength(1);
    expect(j.batches[0].seq).toBe(1); // no SEAL yet: the rows after the last one are batch max(last SEAL, ackedSeq) + 1
    expect(j.batches[0].rows.map((r) => r.step)).toEqual(Array.from({ length: 3000 }, (_, i) => i));
    for (const r of j.batches[0].rows) expect(r.values).toEqual({ loss: r.step, half: r.step * 0.5, 'grp/a': r.step % 7, 'grp/b': r.step ? -r.step : 0 });
    if (!haveReader()) return; // the daemon's side (dist/daemon/runs/journal.js) is not built
    const seen = await daemonRead(files[0]);
    expect(seen.batches.map((b) => [b.seq, b.rows.length])).toEqual([[1, 3000]]);
    await startDaemon(t); // reads the journals of writers that died with the last daemon
    await waitUntil(async () => (await exportJsonl(t, id, ['--raw', '--keys', 'loss'])).length >= 3000, 30_000, 'the journal to be ingested');
    await expectSteps(id, 'loss', 3000, (s) => s);
    await expectSteps(id, 'grp/b', 3000, (s) => (s ? -s : 0));
    expect((await cliJson(t, ['show', id])).metadata.journal?.recoveredRows).toBe(3000);
    await waitUntil(() => journals(t.dataDir).length === 0, 20_000, 'the journal to be removed once ingested');
  });

  it.skipIf(!haveReader())('a trainer that dies by SIGKILL, os._exit, abort() or a segfault right after log() returned: the daemon stores every row once', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000' });
    await startDaemon(t);
    const N = 3000;
    for (const how of ['kill', 'exit', 'abort', 'segv']) {
      const r = await runPython(t, [path.join(FIXTURES, 'journal_kill.py'), how, String(N)], { env: { LOGD_NO_AUTOSTART: '1' } });
      expect(r.stdout, `${how}: ${r.all}`).toContain(`logged ${N - 1}`);
      if (how === 'exit') expect(r.exitCode).toBe(3);
      else expect(r.signal, how).toBe({ kill: 'SIGKILL', abort: 'SIGABRT', segv: 'SIGSEGV' }[how]);
      const id = r.stdout.split('\n').find((l) => l.startsWith('run '))!.slice(4);
      const info = await waitFinal(id);
      expect(info.state, how).toBe('crashed');
      await waitUntil(async () => (await exportJsonl(t, id, ['--raw', '--keys', 'loss'])).length >= N, 20_000, `${how}: every row`);
      await expectSteps(id, 'loss', N, (s) => s);
      await expectSteps(id, 'half', N, (s) => s * 0.5);
      // The last 1000 rows came without a pause: the writer had not sent them all, the journal had them.
      expect((await cliJson(t, ['show', id])).metadata.journal?.recoveredRows, how).toBeGreaterThan(0);
    }
    await waitUntil(() => journals(t.dataDir).length === 0, 20_000, 'every journal to be removed once ingested');
  });

  it.skipIf(!haveReader())('a forked child SIGKILLed right after its last log(): its rows, mostly only in its own journal, are stored once; the parent finishes', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000' });
    await startDaemon(t);
    const out = path.join(t.dir, 'fork.json');
    const M = 4000;
    const r = await runPython(t, [path.join(FIXTURES, 'journal_fork.py'), out, String(M)], { env: { LOGD_NO_AUTOSTART: '1' }, timeout: 120_000 });
    expect(r.exitCode, r.all).toBe(0);
    const res = readJson(out);
    expect(res, r.all).toMatchObject({ state: 'finished', child_signal: 9 });
    await expectSteps(res.id, 'child', M, (s) => s);
    await expectSteps(res.id, 'c2', M, (s) => 2 * s);
    await expectSteps(res.id, 'parent', 200, (s) => s);
    expect((await cliJson(t, ['show', res.id])).metadata.journal?.recoveredRows, 'rows the relay never got').toBeGreaterThan(0);
    await waitUntil(() => journals(t.dataDir).length === 0, 20_000, 'the journals to be removed');
  });

  it('finish() removes the journal; LOGD_JOURNAL_MB=0 makes none; a journal that cannot be made is said once and training goes on', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000' });
    await startDaemon(t);
    const code = (setup: string) => [
      'import glob, json, os, resource, sys', setup, 'import logd',
      'run = logd.init(project="journal-py", name="clean")',
      'for i in range(500): run.log({"x": i}, step=i)',
      'during = sorted(os.path.basename(f) for f in glob.glob(os.path.join(run._writer.spool_dir, "*.journal")))',
      'res = run.finish()',
      'after = sorted(os.path.basename(f) for f in glob.glob(os.path.join(run._writer.spool_dir, "*.journal")))',
      'print(json.dumps({"id": run.id, "state": res.state, "during": during, "after": after, "problem": run._writer.journal_problem}))',
    ].join('\n');
    const env = { LOGD_NO_AUTOSTART: '1' };
    const cases: Array<[string, string, Record<string, string>, number]> = [
      ['default', '', env, 1],
      ['off', '', { ...env, LOGD_JOURNAL_MB: '0' }, 0],
      // A file-size limit below the journal's size: ftruncate fails (EFBIG) and the run goes on without one.
      ['efbig', 'resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, resource.RLIM_INFINITY))', env, 0],
    ];
    for (const [name, setup, e, made] of cases) {
      const r = await runPython(t, ['-c', code(setup)], { env: e });
      expect(r.exitCode, `${name}: ${r.all}`).toBe(0);
      const res = JSON.parse(r.stdout.trim().split('\n').pop()!);
      expect(res.state, name).toBe('finished');
      expect(res.during, name).toHaveLength(made);
      expect(res.after, name).toEqual([]);
      if (name === 'efbig') {
        expect(res.problem).toMatch(/no crash journal .*\.journal: File too large.*LOGD_JOURNAL_MB=0/);
        expect(r.stderr.match(/no crash journal/g), 'said once').toHaveLength(1);
      } else {
        expect(res.problem, name).toBeNull();
        expect(r.stderr, name).not.toMatch(/journal/);
      }
      await expectSteps(res.id, 'x', 500, (s) => s);
    }
  });
});
