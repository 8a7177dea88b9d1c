// Chaos (issue 9, case 4): the daemon is stopped gracefully (SIGTERM, `logd
// stop`) while a trainer logs. The run is not over: the client takes what the
// stopped daemon had not acknowledged to the next daemon (a sidecar it starts
// itself, or the one an operator restarts), the run goes on, and it ends in
// the state its owner gives it, every row stored once.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, spawnScript, startDaemon, serviceFile, waitUntil, alive, cli, cliJson, script, type TestEnv } from './helpers.js';
import { chaosWorker, runIdOf, expectExactlyOnce } from './chaos-helpers.js';

let t: TestEnv;
afterEach(async () => t && (await t.cleanup()));

const STEPS = 20_000;

function storedRows(dataDir: string): number {
  try {
    return fs.readdirSync(path.join(dataDir, 'runs')).reduce((n, id) => n + fs.statSync(path.join(dataDir, 'runs', id, 'records.log')).size, 0);
  } catch {
    return 0;
  }
}

describe('issue 9 case 4: the daemon is stopped while a trainer logs', () => {
  it('SIGTERM to the sidecar: the client starts a new one, the run goes on and ends finished with every row once', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '30000' }); // the new sidecar stays while the test looks at it
    const go = path.join(t.dir, 'go');
    const w = spawnScript(t, chaosWorker(t, { chunk: 100, pauseMs: 25 }), ['0', String(STEPS), go]);
    await waitUntil(() => !!runIdOf(w.lines), 30_000, 'the trainer to create its run');
    const first = serviceFile(t.runtimeDir)!.pid;
    fs.writeFileSync(go, '');
    await waitUntil(() => storedRows(t.dataDir) > 100_000, 30_000, 'some rows to be stored'); // a trainer at 100 rows per 25 ms: about 5 s of logging
    process.kill(first, 'SIGTERM');
    expect(w.lines.some((l) => l.startsWith('logged '))).toBe(false); // stopped while the trainer logs
    await waitUntil(() => !alive(first), 15_000, 'the sidecar to stop');
    await waitUntil(() => w.lines.some((l) => l.startsWith('finished')), 60_000, 'the trainer to finish');
    expect(w.lines.find((l) => l.startsWith('finished'))).toMatch(/^finished finished/);
    expect(serviceFile(t.runtimeDir)!.pid).not.toBe(first);
    const id = runIdOf(w.lines)!;
    expect(await cliJson(t, ['show', id])).toMatchObject({ state: 'finished', exitCode: 0 });
    await expectExactlyOnce(t, id, 0, STEPS);
    console.log(`chaos: SIGTERM of the sidecar under a trainer logging ${STEPS} rows: ${STEPS} stored, run finished`);
  });

  it('`logd stop` of a standalone daemon, restarted 1 s later: the trainer waits for it and the run ends finished with every row once', async () => {
    t = makeEnv();
    await startDaemon(t);
    const go = path.join(t.dir, 'go');
    const w = spawnScript(t, chaosWorker(t, { chunk: 100, pauseMs: 25 }), ['1', String(STEPS), go], { LOGD_NO_AUTOSTART: '1' });
    await waitUntil(() => !!runIdOf(w.lines), 30_000, 'the trainer to create its run');
    fs.writeFileSync(go, '');
    await waitUntil(() => storedRows(t.dataDir) > 100_000, 30_000, 'some rows to be stored'); // a trainer at 100 rows per 25 ms: about 5 s of logging
    await cli(t, ['stop']);
    expect(w.lines.some((l) => l.startsWith('logged '))).toBe(false);
    await waitUntil(() => serviceFile(t.runtimeDir) === null, 15_000, 'the daemon to stop');
    await new Promise((r) => setTimeout(r, 1000)); // the trainer logs on with no daemon at all
    await startDaemon(t);
    await waitUntil(() => w.lines.some((l) => l.startsWith('finished')), 60_000, 'the trainer to finish');
    expect(w.lines.find((l) => l.startsWith('finished'))).toMatch(/^finished finished/);
    const id = runIdOf(w.lines)!;
    expect(await cliJson(t, ['show', id])).toMatchObject({ state: 'finished', exitCode: 0 });
    await expectExactlyOnce(t, id, 1, STEPS);
    console.log(`chaos: logd stop + restart under a trainer logging ${STEPS} rows: ${STEPS} stored, run finished`);
  });

  it('a stop in the middle of the owner\'s finish: the finish is sent again to the restarted daemon and the run ends finished', async () => {
    t = makeEnv();
    await startDaemon(t);
    const child = script(t, 'holder.mjs', `
      const run = await logd.attach(process.argv[2]);
      run.log({ child: 1 }, { step: 0 });
      await run.flush();
      console.log('attached');
      setInterval(() => {}, 1000); // holds the run until killed
    `);
    const owner = script(t, 'finisher.mjs', `
      import { spawn } from 'node:child_process';
      const run = await logd.init({ project: 'stop-finish' });
      for (let s = 0; s < 1000; s++) run.log({ v: s }, { step: s });
      await run.flush();
      const c = spawn(process.execPath, [${JSON.stringify(child)}, run.handle()], { stdio: ['ignore', 'pipe', 'inherit'] });
      await new Promise((r) => c.stdout.on('data', (d) => String(d).includes('attached') && r()));
      console.log('run ' + run.id + ' ' + c.pid);
      const t0 = Date.now();
      const res = await run.finish({ timeoutMs: 30000 }); // waits for the child
      console.log('finished ' + JSON.stringify({ ...res, ms: Date.now() - t0 }));
    `);
    const o = spawnScript(t, owner, [], { LOGD_NO_AUTOSTART: '1' });
    await waitUntil(() => o.lines.some((l) => l.startsWith('run ')), 30_000, 'the owner to start its child');
    const [, id, childPid] = o.lines.find((l) => l.startsWith('run '))!.split(' ');
    await new Promise((r) => setTimeout(r, 500)); // the finish is waiting for the child
    await cli(t, ['stop']);
    await waitUntil(() => serviceFile(t.runtimeDir) === null, 15_000, 'the daemon to stop');
    await new Promise((r) => setTimeout(r, 1000));
    await startDaemon(t);
    process.kill(Number(childPid), 'SIGKILL'); // now the finish can end
    await waitUntil(() => o.lines.some((l) => l.startsWith('finished ')), 40_000, 'the owner to finish');
    const res = JSON.parse(o.lines.find((l) => l.startsWith('finished '))!.slice(9));
    expect(res).toMatchObject({ state: 'finished', timedOut: false });
    expect(await cliJson(t, ['show', id])).toMatchObject({ state: 'finished', exitCode: 0, historyRows: 1001 });
  });
});

