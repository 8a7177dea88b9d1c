// Reaching the daemon (issue 9, cases 2, 9, 10 and 11): init() and the CLI
// find a working daemon through a kill -9, a zombie, a stale inherited
// LOGD_SERVICE and a daemon that does not answer in time; when they give up,
// the caller gets an error it can catch, and no run is left behind that its
// caller does not know about.
import { spawn } from 'node:child_process';
import path from 'node:path';
import fs from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, script, runScript, spawnScript, startDaemon, serviceFile, waitUntil, alive, cli, cliJson, exportJsonl, throughMuteListener, CLI, type TestEnv } from './helpers.js';

let t: TestEnv;
afterEach(async () => t && (await t.cleanup()));

/**
 * A worker that waits for GO, then init()s, logs 10 rows and finishes; prints
 * `ok ID` or `caught NAME: MESSAGE`. With WARM=1 it first makes (and prints)
 * a run of its own, so its connection to the daemon is open before GO.
 */
function initWorker(env: TestEnv): string {
  return script(env, 'init-worker.mjs', `
    import fs from 'node:fs';
    if (process.env.WARM) { const w = await logd.init({ project: 'warm' }); await w.finish(); console.log('warm ' + w.id); }
    const go = process.argv[2];
    console.log('ready');
    if (go) while (!fs.existsSync(go)) await new Promise((r) => setTimeout(r, 5));
    const t0 = Date.now();
    try {
      const run = await logd.init({ project: 'reach' });
      for (let s = 0; s < 10; s++) run.log({ v: s }, { step: s });
      const res = await run.finish();
      console.log('ok ' + run.id + ' ' + res.state + ' ' + (Date.now() - t0));
    } catch (e) {
      console.log('caught ' + e.name + ': ' + e.message.split('\\n')[0] + ' after ' + (Date.now() - t0) + ' ms');
    }
  `);
}

const outcome = (lines: string[]) => lines.find((l) => l.startsWith('ok ') || l.startsWith('caught '));

describe('issue 9 case 9: init() while the daemon is killed', () => {
  it('10 processes calling init() during a kill -9 all get their run once the daemon is restarted', async () => {
    t = makeEnv({ LOGD_RECOVERY_GRACE_MS: '30000' });
    const d = await startDaemon(t);
    const go = path.join(t.dir, 'go');
    const worker = initWorker(t); // written once: a worker must never read it half rewritten
    const workers = Array.from({ length: 10 }, () => spawnScript(t, worker, [go], { LOGD_NO_AUTOSTART: '1' }));
    await waitUntil(() => workers.every((w) => w.lines.includes('ready')), 30_000, 'every worker to load logd and wait for GO');
    process.kill(d.pid, 'SIGKILL');
    await waitUntil(() => !alive(d.pid), 10_000, 'the daemon to die');
    fs.writeFileSync(go, ''); // every init() meets a dead daemon...
    await new Promise((r) => setTimeout(r, 1000));
    await startDaemon(t); // ...and a restarted one a second later
    await waitUntil(() => workers.every((w) => outcome(w.lines)), 60_000, 'every worker to report');
    const outcomes = workers.map((w) => outcome(w.lines)!);
    expect(outcomes.filter((o) => !o.startsWith('ok ')), outcomes.join('\n')).toEqual([]);
    for (const o of outcomes) expect(o.split(' ')[2]).toBe('finished');
    expect(new Set(outcomes.map((o) => o.split(' ')[1])).size).toBe(10);
  });

  it('10 processes calling init() during a kill -9 of their sidecar all get their run from the sidecar one of them starts', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '30000' });
    const setupScript = script(t, 'setup.mjs', `await logd.setup(); console.log(process.env.LOGD_SERVICE);`);
    const service = (await runScript(t, setupScript)).stdout.trim();
    const first = serviceFile(t.runtimeDir)!.pid;
    const go = path.join(t.dir, 'go');
    const worker = initWorker(t);
    const workers = Array.from({ length: 10 }, () => spawnScript(t, worker, [go], { LOGD_SERVICE: service }));
    await waitUntil(() => workers.every((w) => w.lines.includes('ready')), 30_000, 'every worker to load logd and wait for GO');
    process.kill(first, 'SIGKILL');
    await waitUntil(() => !alive(first), 10_000, 'the sidecar to die');
    fs.writeFileSync(go, '');
    await waitUntil(() => workers.every((w) => outcome(w.lines)), 60_000, 'every worker to report');
    const outcomes = workers.map((w) => outcome(w.lines)!);
    expect(outcomes.filter((o) => !o.startsWith('ok ')), outcomes.join('\n')).toEqual([]);
    const ids = outcomes.map((o) => o.split(' ')[1]);
    expect(new Set(ids).size).toBe(10);
    // The new sidecar may have left already (idle); a query starts one again and reads the store.
    const listed = (await cliJson(t, ['runs'])).map((r: { id: string; state: string }) => `${r.id} ${r.state}`).sort();
    expect(listed).toEqual(ids.map((id) => `${id} finished`).sort());
  });

  it('with no daemon coming back, init() rejects within its deadline with an error the caller catches (LOGD_ON_ERROR=raise; by default the run goes on deferred: test/deferred.test.ts)', async () => {
    t = makeEnv({ LOGD_NO_AUTOSTART: '1', LOGD_CALL_TIMEOUT_MS: '1000', LOGD_START_TIMEOUT_MS: '1000', LOGD_ON_ERROR: 'raise' });
    const d = await startDaemon(t);
    process.kill(d.pid, 'SIGKILL');
    await waitUntil(() => !alive(d.pid), 10_000, 'the daemon to die');
    const r = await runScript(t, initWorker(t));
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^caught DaemonUnavailableError: init: no logd daemon answered within 2000 ms/m);
    const ms = Number(/after (\d+) ms/.exec(r.stdout)![1]);
    expect(ms).toBeLessThan(2000 + 2000); // the deadline, and one last look for a daemon on a loaded box
  });
});

describe('issue 9 case 10: a dead daemon that nobody reaped (a zombie)', () => {
  it('counts as dead: init() and `logd runs` start a new daemon', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '30000' }); // the new sidecar stays while the test looks at it
    // The daemon's parent execs into `sleep`, which never waits for it: once killed, it stays a zombie.
    const parent = spawn('bash', ['-c', `"${process.execPath}" "${CLI}" serve 2>/dev/null & exec sleep 120`], { env: t.env, stdio: 'ignore' });
    try {
      await waitUntil(() => !!serviceFile(t.runtimeDir), 15_000, 'the daemon to start');
      const pid = serviceFile(t.runtimeDir)!.pid;
      process.kill(pid, 'SIGKILL');
      await waitUntil(() => fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1][0] === 'Z', 10_000, 'the daemon to be a zombie');
      const r = await runScript(t, initWorker(t), [], {}, 60_000);
      expect(r.stdout, r.stderr).toMatch(/^ok \S+ finished/m);
      const runs = await cliJson(t, ['runs']);
      expect(runs).toHaveLength(1);
      expect(serviceFile(t.runtimeDir)!.pid).not.toBe(pid);
    } finally {
      parent.kill('SIGKILL');
    }
  });
});

describe('a dead daemon whose pid another process took (pid reuse)', () => {
  it('counts as dead: the service file\'s start time no longer matches, and init() starts a new daemon', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '30000' });
    const d = await startDaemon(t);
    const file = path.join(t.runtimeDir, 'service.json');
    const service = JSON.parse(fs.readFileSync(file, 'utf8'));
    expect(typeof service.procStart).toBe('number');
    process.kill(d.pid, 'SIGKILL');
    await waitUntil(() => !alive(d.pid), 10_000, 'the daemon to die');
    // pid_max is often 32768, and a busy node comes round to a dead daemon's pid: here a sleeping process has it.
    const other = spawn('sleep', ['120'], { stdio: 'ignore' });
    try {
      fs.writeFileSync(file, JSON.stringify({ ...service, pid: other.pid }));
      const r = await runScript(t, initWorker(t), [], {}, 60_000);
      expect(r.stdout, r.stderr).toMatch(/^ok \S+ finished/m);
      expect(serviceFile(t.runtimeDir)!.pid).not.toBe(other.pid);
    } finally {
      other.kill('SIGKILL');
    }
  });
});

describe('a daemon that takes the connection and never answers', () => {
  it('the writer gives the stream up within its deadline, finds the real daemon and delivers every row', async () => {
    // The restarted daemon waits longer for the run's owner than the 10 s the writer's stream gives the mute listener
    // (the default grace is also 10 s: the run was declared crashed when the writer came a moment late).
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000', LOGD_RECOVERY_GRACE_MS: '30000' });
    const d1 = await startDaemon(t);
    const w = script(t, 'mute.mjs', `
      import fs from 'node:fs';
      const run = await logd.init({ project: 'mute' });
      for (let s = 0; s < 100; s++) run.log({ v: s }, { step: s });
      console.log('acked ' + (await run.flush(10000)));
      while (!fs.existsSync(process.argv[2])) await new Promise((r) => setTimeout(r, 10));
      for (let s = 100; s < 200; s++) run.log({ v: s }, { step: s });
      const t0 = Date.now();
      const res = await run.finish({ timeoutMs: 45000 });
      console.log('finished ' + JSON.stringify({ state: res.state, message: res.message, ms: Date.now() - t0, id: run.id }));
    `);
    const go = path.join(t.dir, 'go');
    const writer = spawnScript(t, w, [go], { LOGD_NO_AUTOSTART: '1' });
    await waitUntil(() => writer.lines.includes('acked true'), 30_000, 'the writer\'s first rows to be acknowledged');
    // The daemon is killed, a listener that takes every connection and never answers takes its place, then the real one comes back.
    const res = await throughMuteListener(t, d1.pid, writer.lines, go, 15_000);
    expect(res.state, res.message).toBe('finished');
    expect(res.ms).toBeLessThan(40_000); // the stream's deadline is 10 s: far from finish's own 45 s
    const rows = await exportJsonl(t, res.id);
    expect(rows.map((r) => r.v)).toEqual(Array.from({ length: 200 }, (_, i) => i));
  });
});

describe('issue 9 case 2: a stale inherited LOGD_SERVICE', () => {
  it('a worker started after the sidecar died starts a new one, and the CLI passes over the stale token; each says so once', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '30000' }); // the new sidecar stays while the CLI is checked against it
    const launcher = script(t, 'launcher.mjs', `const s = await logd.setup(); console.log(s.service);`);
    const l = await runScript(t, launcher);
    const stale = l.stdout.trim();
    expect(stale).toMatch(/#/);
    const first = serviceFile(t.runtimeDir)!.pid;
    process.kill(first, 'SIGKILL');
    await waitUntil(() => !alive(first), 10_000, 'the sidecar to die');
    const r = await runScript(t, initWorker(t), [], { LOGD_SERVICE: stale });
    expect(r.stdout, r.stderr).toMatch(/^ok \S+ finished/m);
    expect(r.stderr.match(/LOGD_SERVICE .* is stale/g)).toHaveLength(1);
    const id = r.stdout.split(' ')[1];
    // A new sidecar is up now, with a new token: the inherited one is refused there.
    const second = serviceFile(t.runtimeDir)!.pid;
    expect(second).not.toBe(first);
    const withStale = { ...t, env: { ...t.env, LOGD_SERVICE: stale } };
    const status = await cli(withStale, ['status', '--json']);
    expect(JSON.parse(status.stdout).pid).toBe(second);
    expect(status.stderr.match(/LOGD_SERVICE .* is stale/g)).toHaveLength(1);
    const exp = await cli(withStale, ['export', id, '--format', 'jsonl']);
    expect(exp.stdout.trim().split('\n')).toHaveLength(10);
    expect(exp.stderr).toMatch(/LOGD_SERVICE .* is stale: the daemon there refuses its token/);
  });
});

describe('issue 9 case 11: a CreateRun that times out leaves no phantom run', () => {
  /** init() gives up after LOGD_CALL_TIMEOUT_MS + LOGD_START_TIMEOUT_MS: 1.5 s + `startMs`. */
  async function pausedInit(pauseMs: number, startMs: number) {
    // LOGD_ON_ERROR=raise: these workers test the throwing init(); a deferred one (the default) would create its run later, known to it.
    t = makeEnv({ LOGD_NO_AUTOSTART: '1', LOGD_CALL_TIMEOUT_MS: '1500', LOGD_START_TIMEOUT_MS: String(startMs), LOGD_ON_ERROR: 'raise' });
    const d = await startDaemon(t);
    const go = path.join(t.dir, 'go');
    const worker = initWorker(t);
    const workers = Array.from({ length: 6 }, () => spawnScript(t, worker, [go], { WARM: '1' }));
    await waitUntil(() => workers.every((w) => w.lines.some((l) => l.startsWith('warm '))), 30_000, 'every worker to connect');
    process.kill(d.pid, 'SIGSTOP'); // every CreateRun reaches a daemon that cannot answer it
    await waitUntil(() => fs.readFileSync(`/proc/${d.pid}/stat`, 'utf8').split(') ')[1][0] === 'T', 5000, 'the daemon to stop');
    fs.writeFileSync(go, '');
    await new Promise((r) => setTimeout(r, pauseMs));
    process.kill(d.pid, 'SIGCONT');
    await waitUntil(() => workers.every((w) => outcome(w.lines)), 60_000, 'every worker to report');
    const warm = workers.map((w) => w.lines.find((l) => l.startsWith('warm '))!.slice(5));
    return { d, warm, outcomes: workers.map((w) => outcome(w.lines)!) };
  }

  it('paused for less than the deadline: the retried create gets its one run, never a second one', async () => {
    const { outcomes, warm } = await pausedInit(2500, 5000); // a deadline of 6.5 s
    expect(outcomes.filter((o) => !o.startsWith('ok ')), outcomes.join('\n')).toEqual([]);
    const ids = [...warm, ...outcomes.map((o) => o.split(' ')[1])].sort();
    const listed = (await cliJson(t, ['runs'])).map((r: { id: string }) => r.id).sort();
    expect(listed).toEqual(ids);
  });

  it('paused past the deadline: init() rejects, and no run is left that its caller does not know about', async () => {
    const { d, outcomes, warm } = await pausedInit(5000, 1500); // a deadline of 3 s
    const known = new Set([...warm, ...outcomes.filter((o) => o.startsWith('ok ')).map((o) => o.split(' ')[1])]);
    expect(outcomes.filter((o) => o.startsWith('caught ')).length).toBeGreaterThan(0);
    // The daemon handles the queued creates once it runs again; each must end up known or removed.
    await waitUntil(() => (d.stderr().match(/removed: its creator gave up/g)?.length ?? 0) + known.size >= 12, 10_000, 'the daemon to settle the cancelled creates')
      .catch(() => {}); // a create the daemon never saw leaves nothing behind either
    const removed = d.stderr().match(/removed: its creator gave up/g)?.length ?? 0;
    console.log(`phantoms: ${outcomes.filter((o) => o.startsWith('caught ')).length} of 6 init() calls gave up; the daemon removed ${removed} run(s) they had caused`);
    const listed = (await cliJson(t, ['runs'])).map((r: { id: string }) => r.id);
    expect(listed.filter((id: string) => !known.has(id))).toEqual([]);
    expect(fs.readdirSync(path.join(t.dataDir, 'runs')).filter((id) => !known.has(id))).toEqual([]);
  });
});
