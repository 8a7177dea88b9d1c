// Issue 24 in the Python client: init() never ends training unless asked to.
// Each start failure made real: the trainer exits 0, run.problem and one
// stderr line say why, its rows go to a deferred spill file in the TypeScript
// client's format, and once the cause is gone a real daemon holds every row
// exactly once (at its start, in its periodic scan, or `logd sync --ingest`).
// on_error="raise" (or LOGD_ON_ERROR=raise) raises a clear error at init().
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { ROOT, makeEnv, cli, cliJson, exportJsonl, startDaemon, waitUntil, type TestEnv } from '../helpers.js';
import { FIXTURES, PYTHON, killSpawnedPython, pythonMissing, runPython, spawnPython } from './py-helpers.js';

const TRAINER = path.join(FIXTURES, 'deferred_trainer.py');
const root = typeof process.getuid === 'function' && process.getuid() === 0;

/** A LOGD_BIN that fails as a broken install would: it exits 1 at once. */
function failingBin(t: TestEnv): string {
  const file = path.join(t.dir, 'logd-broken');
  fs.mkdirSync(t.dir, { recursive: true });
  fs.writeFileSync(file, '#!/bin/sh\necho "logd-broken: cannot start" >&2\nexit 1\n', { mode: 0o755 });
  return file;
}

function runIdOf(stdout: string): string {
  const line = stdout.split('\n').find((l) => l.startsWith('run '));
  expect(line, stdout).toBeDefined();
  return line!.split(' ')[1];
}

function spillFiles(dir: string): string[] {
  try {
    return (fs.readdirSync(dir, { recursive: true }) as string[]).filter((f) => f.endsWith('.deferred.spill')).map((f) => path.join(dir, f));
  } catch {
    return [];
  }
}

/** The run is stored and finished, with every one of the trainer's 1000 rows once, its config and summary. */
async function expectStored(t: TestEnv, id: string): Promise<void> {
  let info: any;
  await waitUntil(async () => {
    try {
      info = await cliJson(t, ['show', id]);
      return info.state === 'finished';
    } catch {
      return false;
    }
  }, 30_000, `the deferred run ${id} to be stored and finished`);
  expect(info).toMatchObject({ project: 'deferred', name: 'job', historyRows: 1000, exitCode: 0 });
  expect(info.config.lr).toBe(0.1);
  expect(info.summary.best).toBe(42);
  const rows = await exportJsonl(t, id, ['--raw', '--keys', 'loss']);
  expect(rows.map((r) => r._step)).toEqual(Array.from({ length: 1000 }, (_, i) => i));
}

describe.skipIf(pythonMissing !== null)(`Python init() with no usable daemon goes on deferred${pythonMissing ? ` (skipped: ${pythonMissing})` : ''}`, () => {
  let t: TestEnv;
  let mounted: string | null = null;
  afterEach(async () => {
    killSpawnedPython();
    if (mounted) {
      try {
        execFileSync('umount', [mounted]);
      } catch {
        /* not mounted any more */
      }
      mounted = null;
    }
    await t.cleanup();
  });

  it('LOGD_BIN exits 1: the trainer exits 0, run.problem and one stderr line say why, and a daemon started later holds every row once', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000' });
    const r = await runPython(t, [TRAINER], { env: { LOGD_BIN: failingBin(t) } });
    expect(r.exitCode, r.all).toBe(0);
    expect(r.stdout).toMatch(/^problem deferred: the logd daemon exited with code 1 while starting: logd-broken: cannot start/m);
    expect(r.stderr.match(/^logd: run \w+: deferred: /gm), r.stderr).toHaveLength(1);
    expect(r.stderr).not.toMatch(/Traceback/);
    const id = runIdOf(r.stdout);
    // The data dir took files: the spill waits in its spool, in the TypeScript client's format.
    expect(spillFiles(path.join(t.dataDir, 'spool')).map((f) => path.basename(f))).toEqual([expect.stringMatching(new RegExp(`^${id}--w-[0-9a-f]+\\.deferred\\.spill$`))]);
    await startDaemon(t);
    await expectStored(t, id);
    expect(spillFiles(path.join(t.dataDir, 'spool'))).toEqual([]);
  });

  it('a file in place of LOGD_DIR: the spill goes to the private fallback dir; `logd sync --ingest` stores it once, even when given twice', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000' });
    fs.mkdirSync(t.dir, { recursive: true });
    fs.writeFileSync(t.dataDir, 'not a directory');
    t.env.XDG_STATE_HOME = path.join(t.dir, 'state');
    const r = await runPython(t, [TRAINER]);
    expect(r.exitCode, r.all).toBe(0);
    expect(r.stdout).toMatch(/^problem deferred: /m);
    expect(r.stderr.match(/^logd: run \w+: deferred: /gm), r.stderr).toHaveLength(1);
    const id = runIdOf(r.stdout);
    const files = spillFiles(path.join(t.dir, 'state', 'logd', 'deferred'));
    expect(files).toHaveLength(1);
    // src/deferred.ts's fallback dir, named after the data dir: the daemon of that data dir would read it at start.
    const fallback = execFileSync(process.execPath, ['--input-type=module', '-e',
      `import { deferredFallbackDir } from ${JSON.stringify(path.join(ROOT, 'dist', 'src', 'deferred.js'))}; console.log(deferredFallbackDir(${JSON.stringify(t.dataDir)}))`],
    { env: t.env }).toString().trim();
    expect(path.dirname(files[0])).toBe(fallback);
    const moved = path.join(t.dir, 'kept.spill');
    fs.renameSync(files[0], moved); // a copy the daemon would never find by itself
    fs.rmSync(t.dataDir);
    await startDaemon(t);
    const first = await cli(t, ['sync', '--ingest', moved]);
    expect(first.stdout).toMatch(new RegExp(`stored in run ${id}`));
    await expectStored(t, id);
    const again = await cli(t, ['sync', '--ingest', moved], { reject: false });
    expect(again.exitCode).toBe(0);
    expect((await cliJson(t, ['show', id])).historyRows).toBe(1000);
  });

  it.skipIf(!root)('an unwritable LOGD_DIR (a read-only tmpfs): the spill goes to the fallback dir, and the daemon stores it once the data dir is writable again', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000' });
    t.env.XDG_STATE_HOME = path.join(t.dir, 'state');
    fs.mkdirSync(t.dataDir, { recursive: true });
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'ro,size=4m', 'tmpfs', t.dataDir]);
    mounted = t.dataDir;
    const r = await runPython(t, [TRAINER]);
    expect(r.exitCode, r.all).toBe(0);
    expect(r.stdout).toMatch(/^problem deferred: /m);
    const id = runIdOf(r.stdout);
    expect(spillFiles(path.join(t.dir, 'state', 'logd', 'deferred'))).toHaveLength(1);
    execFileSync('umount', [t.dataDir]);
    mounted = null;
    await startDaemon(t);
    await expectStored(t, id);
  });

  it("a daemon that serves the data dir but that the trainer cannot reach (another runtime dir, one it cannot trust) stores the spill in its periodic scan", async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000' });
    await startDaemon(t);
    // The data dir's owner file leads every process of the user to the daemon's runtime dir (issue 41), unless
    // that dir is not private to the user: opened to others, the trainer will not use it.
    fs.chmodSync(t.runtimeDir, 0o755);
    const r = await runPython(t, [TRAINER], { env: { LOGD_BIN: failingBin(t), LOGD_RUNTIME_DIR: path.join(t.dir, 'rt-other') } });
    expect(r.exitCode, r.all).toBe(0);
    expect(r.stdout).toMatch(/^problem deferred: /m);
    await expectStored(t, runIdOf(r.stdout));
  });

  it('a daemon that becomes reachable during the run gets the run and every row; the run finishes as usual', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000' });
    fs.mkdirSync(t.dir, { recursive: true });
    fs.writeFileSync(t.dataDir, 'not a directory');
    t.env.XDG_STATE_HOME = path.join(t.dir, 'state');
    const p = spawnPython(t, [TRAINER], { SLOW: '1' });
    await waitUntil(() => p.lines.some((l) => l.startsWith('started ')), 30_000, 'the trainer to start');
    const [, id, how] = p.lines.find((l) => l.startsWith('started '))!.split(' ');
    expect(how).toBe('deferred');
    fs.rmSync(t.dataDir); // the cause goes away while it trains: its next try starts a sidecar
    await waitUntil(() => p.lines.some((l) => l.startsWith('done ')), 90_000, `the trainer to reach a daemon and finish: ${p.err()}`);
    const [, state, steps] = p.lines.find((l) => l.startsWith('done '))!.split(' ');
    expect(state).toBe('finished');
    expect(p.err()).toMatch(/a daemon answered; the deferred run is created/);
    const rows = await exportJsonl(t, id, ['--raw', '--keys', 'loss']);
    expect(rows.map((r) => r._step)).toEqual(Array.from({ length: Number(steps) }, (_, i) => i));
  });

  it('on_error="raise" and LOGD_ON_ERROR=raise raise a clear error at init(); a bad id raises whatever was asked', async () => {
    t = makeEnv();
    const bin = failingBin(t);
    const r1 = await runPython(t, [TRAINER, 'raise'], { env: { LOGD_BIN: bin } });
    expect(r1.exitCode, r1.all).toBe(0);
    expect(r1.stdout).toMatch(/^caught DaemonStartError: the logd daemon exited with code 1 while starting: logd-broken: cannot start/m);
    expect(r1.stdout).not.toMatch(/^run /m);
    const r2 = await runPython(t, [TRAINER], { env: { LOGD_BIN: bin, LOGD_ON_ERROR: 'raise' } });
    expect(r2.stdout).toMatch(/^caught DaemonStartError: /m);
    expect(spillFiles(t.dir)).toEqual([]);
    // Programming errors raise at once, deferred or not.
    const bad = await runPython(t, ['-c', `
import logd
for kw in ({"id": "../etc"}, {"on_error": "ignore"}, {"config": [1]}):
    try:
        logd.init(project="p", **kw)
        print("no raise")
    except Exception as e:
        print("raised %s: %s" % (type(e).__name__, e))
`], { env: { LOGD_BIN: bin } });
    expect(bad.stdout.trim().split('\n'), bad.all).toEqual([
      'raised TypeError: logd: run id "../etc" must be 1-64 characters of A-Z a-z 0-9 _ -',
      "raised ValueError: logd: on_error='ignore' must be 'defer' (the default) or 'raise'",
      'raised TypeError: logd: config must be a dict, not list',
    ]);
  });

  it("a Python spill frame is byte for byte the daemon's (src/frames.ts encodeFrame)", async () => {
    t = makeEnv();
    const payload = '{"runId":"r1","keys":["loss","acc/top1"],"create":{"reason":"é ✓"}}';
    const py = execFileSync(PYTHON, ['-c', `import sys; from logd.spool import spill; sys.stdout.write(spill.frame(1, sys.argv[1].encode()).hex() + spill.frame(2, bytes(range(256))).hex())`, payload]).toString();
    const ts = execFileSync(process.execPath, ['--input-type=module', '-e', `
      import { encodeFrame } from ${JSON.stringify(path.join(ROOT, 'dist', 'src', 'frames.js'))};
      const p = Buffer.from(process.argv[1]);
      process.stdout.write(encodeFrame(1, [p]).toString('hex') + encodeFrame(2, [Buffer.from(Array.from({ length: 256 }, (_, i) => i))]).toString('hex'));
    `, payload]).toString();
    expect(py).toBe(ts);
  });
});
