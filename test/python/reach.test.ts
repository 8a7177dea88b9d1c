// The Python client reaching its daemon (issue 9 cases 2, 9 and 11, as
// client/reach.ts does for TypeScript): init() through a kill -9 and a
// restart, a create retried after a timeout that never makes a second run, a
// clear error the caller catches when no daemon comes back, and a stale
// inherited LOGD_SERVICE passed over and reported once. Real daemons, real
// Python processes.
import fs from 'node:fs';
import path from 'node:path';
import { describe, it, expect, afterEach } from 'vitest';
import { spawn } from 'node:child_process';
import { makeEnv, startDaemon, serviceFile, waitUntil, alive, cliJson, exportJsonl, throughMuteListener, restartUnderFinish, CLI, type TestEnv } from '../helpers.js';
import { FIXTURES, pythonMissing, runPython, spawnPython, killSpawnedPython } from './py-helpers.js';

const WORKER = path.join(FIXTURES, 'init_worker.py');
const outcome = (lines: string[]) => lines.find((l) => l.startsWith('ok ') || l.startsWith('caught '));
let t: TestEnv;
afterEach(async () => {
  killSpawnedPython();
  if (t) await t.cleanup();
});

/**
 * A daemon, and a Python writer (a fixture of FIXTURES) that has logged and flushed (it printed `run ID`) and waits
 * for the file `go` to finish; `finished()` waits for its `finished JSON` line and parses it.
 */
async function finisherOnDaemon(fixture: string) {
  t = makeEnv({ LOGD_RECOVERY_GRACE_MS: '30000' });
  const d = await startDaemon(t);
  const go = path.join(t.dir, 'go');
  const p = spawnPython(t, [path.join(FIXTURES, fixture), go], { LOGD_NO_AUTOSTART: '1' });
  await waitUntil(() => p.lines.some((l) => l.startsWith('run ')), 60_000, 'the writer to flush');
  const id = p.lines.find((l) => l.startsWith('run '))!.slice(4);
  const finished = async () => {
    await waitUntil(() => p.lines.some((l) => l.startsWith('finished ')), 40_000, 'the writer to finish');
    return JSON.parse(p.lines.find((l) => l.startsWith('finished '))!.slice(9));
  };
  return { d, go, p, id, finished };
}

describe.skipIf(pythonMissing !== null)(`Python client: reaching the daemon${pythonMissing ? ` (skipped: ${pythonMissing})` : ''}`, () => {
  it('issue 9 case 9: 6 processes calling init() during a kill -9 all get their run once the daemon is restarted', async () => {
    t = makeEnv({ LOGD_RECOVERY_GRACE_MS: '30000', LOGD_IDLE_TIMEOUT_MS: '120000' });
    const d = await startDaemon(t);
    const go = path.join(t.dir, 'go');
    const workers = Array.from({ length: 6 }, () => spawnPython(t, [WORKER, go], { LOGD_NO_AUTOSTART: '1' }));
    await waitUntil(() => workers.every((w) => w.lines.includes('ready')), 60_000, 'every worker to import logd and wait for GO');
    process.kill(d.pid, 'SIGKILL');
    await waitUntil(() => !alive(d.pid), 10_000, 'the daemon to die');
    fs.writeFileSync(go, ''); // every init() meets a dead daemon...
    await new Promise((r) => setTimeout(r, 1000));
    await startDaemon(t); // ...and a restarted one a second later
    await waitUntil(() => workers.every((w) => outcome(w.lines)), 90_000, 'every worker to report');
    const outcomes = workers.map((w) => outcome(w.lines)!);
    expect(outcomes.filter((o) => !o.startsWith('ok ')), outcomes.join('\n') + workers.map((w) => w.err()).join('\n')).toEqual([]);
    const ids = outcomes.map((o) => o.split(' ')[1]);
    for (const o of outcomes) expect(o.split(' ')[2]).toBe('finished');
    for (const id of ids) expect(id).toMatch(/^[a-z0-9]{12}$/); // chosen by the client
    expect(new Set(ids).size).toBe(6);
    const listed = (await cliJson(t, ['runs'])).map((r: { id: string }) => r.id).sort();
    expect(listed).toEqual([...ids].sort()); // no run its caller does not know about
  });

  it('issue 9 case 11: a create that times out against a paused daemon is retried and gets its one run, never a second', async () => {
    // init() gives up after LOGD_CALL_TIMEOUT_MS + LOGD_START_TIMEOUT_MS = 6.5 s; the daemon is paused 2.5 s.
    t = makeEnv({ LOGD_NO_AUTOSTART: '1', LOGD_CALL_TIMEOUT_MS: '1500', LOGD_START_TIMEOUT_MS: '5000', LOGD_IDLE_TIMEOUT_MS: '120000' });
    const d = await startDaemon(t);
    const go = path.join(t.dir, 'go');
    const workers = Array.from({ length: 4 }, () => spawnPython(t, [WORKER, go], { WARM: '1' }));
    await waitUntil(() => workers.every((w) => w.lines.some((l) => l.startsWith('warm '))), 60_000, 'every worker to connect');
    process.kill(d.pid, 'SIGSTOP'); // every CreateRun reaches a daemon that cannot answer it in time
    try {
      await waitUntil(() => fs.readFileSync(`/proc/${d.pid}/stat`, 'utf8').split(') ')[1][0] === 'T', 5000, 'the daemon to stop');
      fs.writeFileSync(go, '');
      await new Promise((r) => setTimeout(r, 2500));
    } finally {
      process.kill(d.pid, 'SIGCONT');
    }
    await waitUntil(() => workers.every((w) => outcome(w.lines)), 60_000, 'every worker to report');
    const outcomes = workers.map((w) => outcome(w.lines)!);
    expect(outcomes.filter((o) => !o.startsWith('ok ')), outcomes.join('\n')).toEqual([]);
    const warm = workers.map((w) => w.lines.find((l) => l.startsWith('warm '))!.slice(5));
    const ids = [...warm, ...outcomes.map((o) => o.split(' ')[1])].sort();
    const listed = (await cliJson(t, ['runs'])).map((r: { id: string }) => r.id).sort();
    expect(listed).toEqual(ids);
  });

  it('issue 9 case 9: with no daemon coming back, init() raises DaemonUnavailableError within its deadline, and the caller catches it', async () => {
    // LOGD_ON_ERROR=raise: init() raises; by default the run goes on deferred (test/python/deferred.test.ts).
    t = makeEnv({ LOGD_NO_AUTOSTART: '1', LOGD_CALL_TIMEOUT_MS: '1000', LOGD_START_TIMEOUT_MS: '1000', LOGD_ON_ERROR: 'raise' });
    const d = await startDaemon(t);
    process.kill(d.pid, 'SIGKILL');
    await waitUntil(() => !alive(d.pid), 10_000, 'the daemon to die');
    const r = await runPython(t, [WORKER]);
    expect(r.exitCode, r.all).toBe(0);
    expect(r.all).toMatch(/^caught DaemonUnavailableError: init: no logd daemon answered within 2000 ms \(\d+ tries; last: .*\)\. Check `logd status`/m);
    const ms = Number(/after (\d+) ms/.exec(r.all!)![1]);
    expect(ms).toBeLessThan(2000 + 2000); // the deadline, and one last look on a loaded box
    expect(fs.existsSync(path.join(t.dataDir, 'runs')) ? fs.readdirSync(path.join(t.dataDir, 'runs')) : []).toEqual([]);
  });

  it('issue 9 case 2: a stale LOGD_SERVICE (a dead sidecar, then a token the new one refuses) is passed over and said once on stderr', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000' });
    const setup = await runPython(t, ['-c', 'import logd; print(logd.setup())']);
    expect(setup.exitCode, setup.all).toBe(0);
    const stale = setup.stdout.trim();
    expect(stale).toMatch(/^unix:.*#/);
    const first = serviceFile(t.runtimeDir)!.pid;
    process.kill(first, 'SIGKILL');
    await waitUntil(() => !alive(first), 10_000, 'the sidecar to die');
    // A worker started afterwards with the inherited address: a new sidecar, and one line saying why.
    const dead = await runPython(t, [WORKER], { env: { LOGD_SERVICE: stale } });
    expect(dead.stdout, dead.all).toMatch(/^ok \S+ finished/m);
    expect(dead.stderr.match(/LOGD_SERVICE .* is stale/g)).toHaveLength(1);
    expect(dead.stderr).toMatch(/is stale: no daemon answers there/);
    const second = serviceFile(t.runtimeDir)!.pid;
    expect(second).not.toBe(first);
    // The same address now reaches a daemon with another token: refused there, and passed over too.
    const refused = await runPython(t, [WORKER], { env: { LOGD_SERVICE: stale } });
    expect(refused.stdout, refused.all).toMatch(/^ok \S+ finished/m);
    expect(refused.stderr.match(/LOGD_SERVICE .* is stale/g)).toHaveLength(1);
    expect(refused.stderr).toMatch(/is stale: the daemon there refuses its token/);
    // setup() checks an inherited address too, and exports the good one.
    const again = await runPython(t, ['-c', 'import logd, os; logd.setup(); print(os.environ["LOGD_SERVICE"])'], { env: { LOGD_SERVICE: stale } });
    expect(again.stdout.trim()).toBe(`${serviceFile(t.runtimeDir)!.socket}#${serviceFile(t.runtimeDir)!.token}`);
    expect(serviceFile(t.runtimeDir)!.pid).toBe(second);
    expect((await cliJson(t, ['runs'])).map((r: { state: string }) => r.state)).toEqual(['finished', 'finished']);
  });

  it('issue 9 case 11: a create still paused past init()\'s deadline raises, and leaves no run its caller does not know about', async () => {
    // A deadline of 1.5 s + 1.5 s; the daemon is paused 5 s.
    // LOGD_ON_ERROR=raise: these workers test the raising init(); a deferred one (the default) would create its run later.
    t = makeEnv({ LOGD_NO_AUTOSTART: '1', LOGD_CALL_TIMEOUT_MS: '1500', LOGD_START_TIMEOUT_MS: '1500', LOGD_IDLE_TIMEOUT_MS: '120000', LOGD_ON_ERROR: 'raise' });
    const d = await startDaemon(t);
    const go = path.join(t.dir, 'go');
    const workers = Array.from({ length: 4 }, () => spawnPython(t, [WORKER, go], { WARM: '1' }));
    await waitUntil(() => workers.every((w) => w.lines.some((l) => l.startsWith('warm '))), 60_000, 'every worker to connect');
    process.kill(d.pid, 'SIGSTOP');
    try {
      await waitUntil(() => fs.readFileSync(`/proc/${d.pid}/stat`, 'utf8').split(') ')[1][0] === 'T', 5000, 'the daemon to stop');
      fs.writeFileSync(go, '');
      await waitUntil(() => workers.every((w) => outcome(w.lines)), 20_000, 'every init() to give up while the daemon is paused');
    } finally {
      process.kill(d.pid, 'SIGCONT');
    }
    const outcomes = workers.map((w) => outcome(w.lines)!);
    for (const o of outcomes) expect(o).toMatch(/^caught DaemonUnavailableError: init: no logd daemon answered within 3000 ms/);
    const known = new Set(workers.map((w) => w.lines.find((l) => l.startsWith('warm '))!.slice(5)));
    // The daemon handles the queued creates once it runs again: each caller gave up, so each run is removed.
    await waitUntil(async () => (await cliJson(t, ['runs'])).length === known.size, 30_000, 'the daemon to remove the runs whose creators gave up')
      .catch(() => {});
    const listed = (await cliJson(t, ['runs'])).map((r: { id: string }) => r.id);
    expect(listed.filter((id: string) => !known.has(id)), d.stderr().slice(-2000)).toEqual([]);
    expect(fs.readdirSync(path.join(t.dataDir, 'runs')).filter((id) => !known.has(id))).toEqual([]);
  });

  it('issue 9 case 10: a dead daemon nobody reaped (a zombie) counts as dead: init() starts a new one', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000' });
    // The daemon's parent execs into `sleep`, which never waits for it: once killed, it stays a zombie.
    const parent = spawn('bash', ['-c', `"${process.execPath}" "${CLI}" serve 2>/dev/null & exec sleep 120`], { env: t.env, stdio: 'ignore' });
    try {
      await waitUntil(() => !!serviceFile(t.runtimeDir), 20_000, 'the daemon to start');
      const pid = serviceFile(t.runtimeDir)!.pid;
      process.kill(pid, 'SIGKILL');
      await waitUntil(() => fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1][0] === 'Z', 10_000, 'the daemon to be a zombie');
      const r = await runPython(t, [WORKER]);
      expect(r.stdout, r.all).toMatch(/^ok \S+ finished/m);
      expect(serviceFile(t.runtimeDir)!.pid).not.toBe(pid);
    } finally {
      parent.kill('SIGKILL');
    }
  });

  it('a daemon that takes the connection and never answers: the writer gives the stream up, finds the real daemon and delivers every row', async () => {
    // The restarted daemon waits longer for the run's owner than the 10 s the writer's stream gives the mute listener
    // (the default grace is also 10 s: the run was declared crashed when the writer came a moment late).
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000', LOGD_RECOVERY_GRACE_MS: '30000' });
    const d1 = await startDaemon(t);
    const go = path.join(t.dir, 'go');
    const p = spawnPython(t, [path.join(FIXTURES, 'mute_writer.py'), go], { LOGD_NO_AUTOSTART: '1' });
    await waitUntil(() => p.lines.includes('acked True'), 60_000, 'the writer\'s first rows to be acknowledged');
    // The daemon is killed, a listener that takes every connection and never answers takes its place, then the real one comes back.
    const res = await throughMuteListener(t, d1.pid, p.lines, go, 30_000);
    expect(res.state, `${res.message}\n${p.err()}`).toBe('finished');
    const rows = await exportJsonl(t, res.id);
    expect(rows.map((r) => r.v)).toEqual(Array.from({ length: 200 }, (_, i) => i));
  });

  it('a finish whose retry reaches the restarted daemon before its service file names it (the old token) looks again and ends finished', async () => {
    const { d, go, p, id, finished } = await finisherOnDaemon('finish_restart.py');
    await restartUnderFinish(t, d.pid, go);
    const res = await finished();
    expect(res, `${res.message}\n${p.err()}`).toMatchObject({ state: 'finished', timed_out: false });
    expect(await cliJson(t, ['show', id])).toMatchObject({ state: 'finished', historyRows: 500 });
  });

  it('the daemon killed and restarted while the writer is idle, its last batch summary and config updates alone: the finish finds the new daemon at once and ends finished', async () => {
    const { d, go, p, id, finished } = await finisherOnDaemon('finish_idle_restart.py');
    process.kill(d.pid, 'SIGKILL');
    await waitUntil(() => !alive(d.pid), 10_000, 'the daemon to die');
    await startDaemon(t);
    fs.writeFileSync(go, '');
    const res = await finished();
    expect(res, `${res.message}\n${p.err()}`).toMatchObject({ state: 'finished', timed_out: false });
    expect(res.ms, res.message).toBeLessThan(5000);
    expect(await cliJson(t, ['show', id])).toMatchObject({ state: 'finished', historyRows: 10, summary: { best: 1 }, config: { lr: 0.5 } });
  });

  it('a cold init() spawns its sidecar before it imports protobuf and grpc (their import overlaps the daemon\'s start) and starts exactly one', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    const r = await runPython(t, ['-c', `
import sys
import logd
from logd.transport import discovery
seen = []
spawn = discovery._spawn
def watched(paths):
    seen.append(("grpc" in sys.modules, "logd._pb.logd_pb2" in sys.modules))
    return spawn(paths)
discovery._spawn = watched
run = logd.init(project="cold", quiet=True)
run.log({"a": 1.0}, step=0)
print("spawned", seen, run.finish().state)
`]);
    expect(r.stdout, r.all).toMatch(/^spawned \[\(False, False\)\] finished$/m);
    const log = fs.readFileSync(path.join(t.runtimeDir, 'daemon.log'), 'utf8');
    expect(log.match(/ serving .* \(sidecar\)/g), log).toHaveLength(1);
    expect(log).not.toMatch(/already/i);
  });

  it('a dead daemon whose pid another process took (pid reuse) counts as dead: init() starts a new one', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000' });
    const d = await startDaemon(t);
    const file = path.join(t.runtimeDir, 'service.json');
    const service = JSON.parse(fs.readFileSync(file, 'utf8'));
    process.kill(d.pid, 'SIGKILL');
    await waitUntil(() => !alive(d.pid), 10_000, 'the daemon to die');
    const other = spawn('sleep', ['120'], { stdio: 'ignore' }); // has the dead daemon's pid, as far as the file says
    try {
      fs.writeFileSync(file, JSON.stringify({ ...service, pid: other.pid }));
      const r = await runPython(t, [WORKER]);
      expect(r.stdout, r.all).toMatch(/^ok \S+ finished/m);
      expect(serviceFile(t.runtimeDir)!.pid).not.toBe(other.pid);
    } finally {
      other.kill('SIGKILL');
    }
  });
});
