// Issue 24, case 4, in the Python client: init() and attach() in a forked
// child work whatever the parent did before the fork. The child never touches
// gRPC (the parent's channel, or one of its own: grpcio is not fork-safe); the
// call goes through the child's relay process (python/logd/forks/forked.py). Real
// processes: a multiprocessing 'fork' pool under a parent that holds a run,
// a fork of a fork, a child killed with SIGKILL, DataLoader workers, and a
// child with no usable daemon (deferred, or raising when asked).
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { makeEnv, cliJson, exportJsonl, startDaemon, waitUntil, type TestEnv } from '../helpers.js';
import { FIXTURES, pythonMissing, torchMissing, readJson, runPython } from './py-helpers.js';

interface RunJson { id: string; name: string; state: string; exitCode: number; historyRows: number; config: Record<string, unknown> }

async function steps(t: TestEnv, id: string): Promise<unknown[]> {
  return (await exportJsonl(t, id, ['--raw', '--keys', 'x'])).map((r) => r._step);
}

describe.skipIf(pythonMissing !== null)(`Python init()/attach() in forked children${pythonMissing ? ` (skipped: ${pythonMissing})` : ''}`, () => {
  let t: TestEnv;
  beforeEach(() => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000' });
  });
  afterEach(async () => {
    await t.cleanup();
  });

  it('a fork pool under a parent that holds a run: each worker creates, logs into and finishes its own run; attach, a fork of a fork, kill -9; the parent run is unaffected', async () => {
    const out = path.join(t.dir, 'fork-init.json');
    // 6 s here alone; it once ran past 120 s in CI beside other suites: the fixture dumps every thread's stack at
    // 100 s (faulthandler), so a hang shows where, and the test waits long enough to see it.
    const started = Date.now();
    const r = await runPython(t, [path.join(FIXTURES, 'fork_init.py'), out], { timeout: 200_000 });
    expect(r.exitCode, `after ${Date.now() - started} ms:\n${r.all}`).toBe(0);
    expect(r.all).not.toMatch(/Traceback|forked after logd connected|Bad file descriptor|Fork support/);
    const res = readJson(out);
    const n = res.rows as number;
    expect(res.state).toBe('finished');
    expect(res.codes).toEqual([0]);
    // The parent's own rows, the attached workers' and the forked child's: each once.
    const rows = await exportJsonl(t, res.parent);
    const count = (k: string) => rows.filter((row) => k in row).length;
    expect(count('parent')).toBe(300);
    expect(count('attached/0')).toBe(n);
    expect(count('attached/1')).toBe(n);
    expect(count('child')).toBe(n);
    expect((await cliJson<RunJson>(t, ['show', res.parent])).historyRows).toBe(300 + 3 * n);
    const byName = new Map((await cliJson<RunJson[]>(t, ['runs', '--project', 'fork-init'])).map((x) => [x.name, x]));
    for (const [k, [id, state]] of (res.finished as Array<[string, string]>).entries()) {
      expect(state).toBe('finished');
      expect(byName.get(`worker-${k}`)).toMatchObject({ id, state: 'finished', exitCode: 0, historyRows: n });
      expect((await cliJson<RunJson>(t, ['show', id])).config.k).toBe(k);
      expect(await steps(t, id)).toEqual(Array.from({ length: n }, (_, i) => i));
    }
    // Workers that never called finish(): their relays finish the runs once the workers end.
    for (const id of res.unfinished as string[]) {
      await waitUntil(async () => (await cliJson<RunJson>(t, ['show', id])).state !== 'running', 30_000, `run ${id} to be finished by its relay`);
      expect(await cliJson<RunJson>(t, ['show', id])).toMatchObject({ state: 'finished', historyRows: n });
    }
    const [gid, gstate] = res.grandchild as [string, string];
    expect(gstate).toBe('finished');
    expect(byName.get('grandchild')).toMatchObject({ id: gid, historyRows: n });
    expect(await steps(t, gid)).toEqual(Array.from({ length: n }, (_, i) => i));
    // A forked child killed after its rows were acknowledged: crashed, every row kept.
    const killed = byName.get('killed')!;
    await waitUntil(async () => (await cliJson<RunJson>(t, ['show', killed.id])).state === 'crashed', 30_000, 'the killed child\'s run to be crashed');
    expect((await cliJson<RunJson>(t, ['show', killed.id])).historyRows).toBe(n);
    if (torchMissing === null) {
      expect(res.loader).toEqual([0, 1, 2, 3]);
      for (let i = 0; i < 4; i++) expect(byName.get(`loader-${i}`), `loader-${i}`).toMatchObject({ state: 'finished', historyRows: n });
    } else {
      console.log(`DataLoader workers left out: ${torchMissing}`);
    }
    // Every run of the project: the parent's, and one per init() above; none twice.
    expect(byName.size).toBe(1 + 6 + 2 + 1 + 1 + (torchMissing === null ? 4 : 0));
  }, 240_000);

  it('SIGTERM in workers: a fork pool\'s and a spawn pool\'s workers keep it at its default (a Python handler can miss a SIGTERM that lands as the main thread blocks, and the pool then waits forever); a worker terminated mid-run keeps every row', async () => {
    const out = path.join(t.dir, 'fork-sigterm.json');
    const r = await runPython(t, [path.join(FIXTURES, 'fork_sigterm.py'), out], { timeout: 150_000 });
    expect(r.exitCode, r.all).toBe(0);
    expect(r.all).not.toMatch(/Traceback/);
    const res = readJson(out);
    expect(res.parent).toBe('logd.exit_hooks');
    expect(res.fork).toEqual(['default', 'default']);
    expect(res.spawn).toEqual(['default']);
    for (const id of res.terminated as string[]) {
      await waitUntil(async () => (await cliJson<RunJson>(t, ['show', id])).state !== 'running', 30_000, `the terminated worker's run ${id} to end`);
      expect(await cliJson<RunJson>(t, ['show', id])).toMatchObject({ state: 'crashed', historyRows: res.rows });
      expect(await steps(t, id)).toEqual(Array.from({ length: res.rows }, (_, i) => i));
    }
  }, 180_000);

  it('a forked child with no usable daemon: on_error="raise" raises a clear error; by default its run goes on deferred and a daemon later holds every row', async () => {
    const other = path.join(t.dir, 'other');
    const rt = path.join(t.dir, 'rt-other');
    fs.mkdirSync(rt, { mode: 0o700 });
    const broken = path.join(t.dir, 'logd-broken');
    fs.writeFileSync(broken, '#!/bin/sh\nexit 1\n', { mode: 0o755 });
    const r = await runPython(t, [path.join(FIXTURES, 'fork_no_daemon.py'), other, rt, broken], { timeout: 120_000 });
    expect(r.exitCode, r.all).toBe(0);
    expect(r.stdout).toMatch(/^caught DaemonStartError: the logd daemon exited with code 1 while starting/m);
    expect(r.stdout).toMatch(/^problem deferred: /m);
    expect(r.stderr.match(/^logd: run \w+: deferred: /gm), r.stderr).toHaveLength(1);
    expect(r.stdout).toMatch(/^parent \w+ finished 0$/m);
    const id = r.stdout.split('\n').find((l) => l.startsWith('run '))!.split(' ')[1];
    // The cause removed: a daemon of that data dir stores the child's run.
    const t2: TestEnv = { ...t, dataDir: other, runtimeDir: rt, env: { ...t.env, LOGD_DIR: other, LOGD_RUNTIME_DIR: rt } };
    await startDaemon(t2);
    await waitUntil(async () => {
      try {
        return (await cliJson<RunJson>(t2, ['show', id])).state === 'finished';
      } catch {
        return false;
      }
    }, 30_000, `the deferred run ${id} to be stored`);
    expect((await cliJson<RunJson>(t2, ['show', id])).historyRows).toBe(500);
    expect(await steps(t2, id)).toEqual(Array.from({ length: 500 }, (_, i) => i));
  });
});
