// The Python client (python/, issue 12) against a real daemon it auto-starts
// as a sidecar: every kind of value, the errors, the ways a process ends,
// forked children, a daemon killed and restarted mid-run, and the check that
// the committed wire code is what protoc makes of proto/. Python runs as real
// processes; what was stored is read back through the logd CLI.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { describe, it, expect, beforeEach, afterEach } from 'vitest';
import { ROOT, makeEnv, cliJson, exportJsonl, startDaemon, serviceFile, waitUntil, type TestEnv } from '../helpers.js';
import { FIXTURES, pythonMissing, runPython, readJson, PYTHON, pyEnv } from './py-helpers.js';

interface RunJson { id: string; name: string; group: string; jobType: string; tags: string[]; notes: string; state: string; exitCode: number; historyRows: number; config: Record<string, unknown>; summary: Record<string, unknown>; metadata: { writers: Array<{ writerId: string; pid: number }> } }

describe.skipIf(pythonMissing !== null)(`Python client${pythonMissing ? ` (skipped: ${pythonMissing})` : ''}`, () => {
  let t: TestEnv;
  beforeEach(() => {
    // A sidecar that outlives the checks: a CLI call racing its idle shutdown can fail with "Call cancelled".
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000' });
  });
  afterEach(async () => {
    await t.cleanup();
  });

  it('dir(logd) is the public API (issue 38 item 14): no os, re, socket or private modules', async () => {
    const r = await runPython(t, ['-c', 'import json, logd; print(json.dumps(dir(logd)))']);
    expect(r.exitCode, r.all).toBe(0);
    const names = JSON.parse(r.stdout.trim().split('\n').at(-1)!) as string[];
    expect(names).toEqual(expect.arrayContaining(['init', 'attach', 'setup', 'finish_all', 'Run', 'Histogram', 'Image', 'Text', '__version__', 'integrations']));
    for (const hidden of ['os', 're', 'json', 'socket', 'pb', 'writer', 'journal', 'sys']) expect(names).not.toContain(hidden);
    expect(names.length).toBeLessThan(20);
  });

  it('`import logd` loads no grpc, protobuf, json, hashlib or subprocess (issue 39); they load when a run needs them, and a run works', async () => {
    const code = [
      'import sys', "heavy = ('grpc', 'google.protobuf', 'json', 'hashlib', 'subprocess', 'secrets', 'uuid', 'dataclasses')",
      // The interpreter's own start may load some of them (site): only what logd added counts.
      'before = {m for m in heavy if m in sys.modules}', 'import logd',
      'print("after-import", sorted(m for m in heavy if m in sys.modules and m not in before))',
      "run = logd.init(project='lazy', name='lazy')", "run.log({'x': 1})", 'res = run.finish()',
      'print("after-run", res.state, "grpc" in sys.modules, "google.protobuf" in sys.modules)',
    ].join('\n');
    const r = await runPython(t, ['-c', code]);
    expect(r.exitCode, r.all).toBe(0);
    expect(r.stdout).toContain('after-import []');
    expect(r.stdout).toContain('after-run finished True True');
  });

  it('stores numbers, bools, nested dicts, numpy and torch scalars; refuses the rest with a TypeError', async () => {
    const out = path.join(t.dir, 'basic.json');
    const r = await runPython(t, [path.join(FIXTURES, 'basic.py'), out]);
    expect(r.exitCode, r.all).toBe(0);
    const res = readJson(out);
    expect(res.state).toBe('finished');
    expect(res.service).toMatch(/^unix:.*#.+/); // auto-started, and exported for children
    expect(res.errors).toHaveLength(6);
    expect(res.errors[0]).toMatch(/'text' is a string; log\(\) takes numbers.*logd.Text/);
    expect(res.errors[1]).toMatch(/'list' is a list/);
    expect(res.errors[2]).toMatch(/'nested\/deep' is a object/);
    expect(res.errors[3]).toMatch(/metric name is empty/);
    expect(res.errors[4]).toMatch(/'c' is a complex/);
    expect(res.errors[5]).toMatch(/log\(\) takes a dict of metrics, not list/);
    const run = await cliJson<RunJson>(t, ['show', res.id]);
    expect(run).toMatchObject({ name: 'basic', group: 'g', jobType: 'train', tags: ['a', 'b'], notes: 'n', state: 'finished', exitCode: 0, historyRows: 300 });
    expect(run.config).toEqual({ lr: 0.1, layers: [1, 2], batch: 32 });
    expect(run.summary).toMatchObject({ best: 0.25, nan: 'NaN' });
    const rows = await exportJsonl(t, res.id);
    expect(rows).toHaveLength(300);
    for (const [i, row] of rows.entries()) {
      expect(row).toMatchObject({ _step: i * 2, loss: 1 / (i + 1), 'acc/top1': i / 300, 'acc/top5/x': i, ok: i % 2 === 0 ? 1 : 0, np32: i, np64: i, t: 2.5 });
      expect(row).not.toHaveProperty('skip'); // None is skipped, like an absent value
      expect(row.big).toBe('Infinity'); // an int beyond float range
    }
  });

  it('ends the run at exit without finish(): atexit, an uncaught exception, sys.exit, SIGTERM, kill -9, `with`', async () => {
    const cases: Array<[string, number, string, number]> = [
      ['atexit', 0, 'finished', 0],
      ['exception', 1, 'crashed', 1],
      ['sys-exit', 3, 'crashed', 3],
      ['sigterm', 143, 'crashed', 143],
      ['with', 1, 'crashed', 1],
    ];
    for (const [how, code] of cases) {
      const r = await runPython(t, [path.join(FIXTURES, 'exits.py'), how]);
      if (how === 'sigterm') expect(r.signal, r.all).toBe('SIGTERM'); // it dies of the signal, as without logd
      else expect(r.exitCode, `${how}: ${r.all}`).toBe(code);
    }
    // kill -9 of a process that logged: its acknowledged rows stay, the run becomes crashed.
    const killed = runPython(t, ['-c', 'import logd, os, signal\nr = logd.init(project="exits", name="kill9")\nfor i in range(1000): r.log({"x": i})\nr.flush()\nos.kill(os.getpid(), signal.SIGKILL)']);
    expect((await killed).signal).toBe('SIGKILL');
    const byName = async () => new Map((await cliJson<RunJson[]>(t, ['runs', '--project', 'exits'])).map((r) => [r.name, r]));
    await waitUntil(async () => (await byName()).get('kill9')?.state === 'crashed', 10_000, 'the killed run to be crashed');
    const runs = await byName();
    for (const [how, , state, exitCode] of cases) {
      expect(runs.get(how), how).toMatchObject({ state, exitCode, historyRows: 1000 });
    }
    expect(runs.get('with-inner')).toMatchObject({ state: 'crashed', exitCode: 1, historyRows: 1 });
    expect(runs.get('kill9')).toMatchObject({ state: 'crashed', historyRows: 1000 });
  });

  it('forked children log into the inherited run through their own relay; init() in a forked child makes its own run (test/python/fork-init.test.ts)', async () => {
    const out = path.join(t.dir, 'fork.json');
    const r = await runPython(t, [path.join(FIXTURES, 'fork.py'), out], { timeout: 90_000 });
    expect(r.exitCode, r.all).toBe(0);
    const res = readJson(out);
    expect(res).toMatchObject({ state: 'finished', codes: [0, 0], init_in_child: 0 });
    const run = await cliJson<RunJson>(t, ['show', res.id]);
    expect(run.historyRows).toBe(res.expected);
    const rows = await exportJsonl(t, res.id);
    const count = (k: string) => rows.filter((row) => k in row).length;
    expect(count('parent')).toBe(200);
    for (const n of [0, 1, 10, 11, 12, 13]) expect(count(`child/${n}`), `child/${n}`).toBe(25);
  });

  it('re-sends what was not acknowledged after the daemon is killed and a new one starts; past the memory bound batches wait on disk', async () => {
    const d = await startDaemon(t);
    const out = path.join(t.dir, 'restart.json');
    const go = path.join(t.dir, 'go');
    const env = { LOGD_NO_AUTOSTART: '1', LOGD_MAX_BUFFER_MB: '0.02' }; // 20 kB: the outage's rows overflow to disk
    const proc = runPython(t, [path.join(FIXTURES, 'restart.py'), out, go], { env, timeout: 120_000 });
    let stdout = '';
    proc.stdout!.on('data', (b: Buffer) => (stdout += b.toString()));
    await waitUntil(() => stdout.includes('phase1'), 60_000, 'the first 500 rows to be acknowledged');
    process.kill(d.pid, 'SIGKILL');
    await waitUntil(() => { try { process.kill(d.pid, 0); return false; } catch { return true; } }, 10_000, 'the daemon to die');
    fs.writeFileSync(go, '');
    await new Promise((r) => setTimeout(r, 500)); // rows pile up while no daemon answers
    await startDaemon(t);
    const r = await proc;
    expect(r.exitCode, r.all).toBe(0);
    const res = readJson(out);
    expect(res.state, res.message).toBe('finished');
    expect(res.overflowed).toBe(true);
    const rows = await exportJsonl(t, res.id);
    expect(rows.map((row) => row.x)).toEqual(Array.from({ length: 1000 }, (_, i) => i));
    expect(rows[999]['pad/m8']).toBe(999 * 8);
    expect(fs.readdirSync(path.join(t.dataDir, 'spool')).filter((n) => n.endsWith('.overflow'))).toEqual([]);
  });

  it('says what to install when no daemon runs and no `logd` program can be found', async () => {
    // LOGD_ON_ERROR=raise: init() raises instead of going on deferred (test/python/deferred.test.ts).
    const env = pyEnv(t, { LOGD_ON_ERROR: 'raise' });
    delete env.LOGD_BIN;
    env.PATH = path.dirname(PYTHON);
    const r = await execa(PYTHON, ['-c', 'import logd; logd.init()'], { env, extendEnv: false, reject: false, all: true, timeout: 60_000 });
    expect(r.exitCode).toBe(1);
    expect(r.all).toMatch(/DaemonStartError: no logd daemon is running and the `logd` program was not found.*install logd's wheel.*LOGD_BIN/s);
    expect(serviceFile(t.runtimeDir)).toBeNull();
  });
});

describe('Python wire code', () => {
  const protoc = ['/usr/bin/protoc', '/usr/local/bin/protoc'].find((p) => fs.existsSync(p));
  it.skipIf(!protoc)(`python/logd/_pb/logd_pb2.py is what protoc makes of proto/logd/v1/logd.proto${protoc ? '' : ' (skipped: protoc not installed; scripts/install-system-deps.sh installs protobuf-compiler)'}`, async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ldt-protoc-'));
    try {
      await execa(protoc!, ['-I', path.join(ROOT, 'proto'), `--python_out=${dir}`, 'logd/v1/logd.proto']);
      const fresh = fs.readFileSync(path.join(dir, 'logd', 'v1', 'logd_pb2.py'), 'utf8');
      const committed = fs.readFileSync(path.join(ROOT, 'python', 'logd', '_pb', 'logd_pb2.py'), 'utf8');
      expect(committed, 'regenerate it: see python/README.md, "Regenerating the wire code"').toBe(fresh);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
