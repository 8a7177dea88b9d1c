// Run lifecycles across real processes: killed workers, stuck children,
// processes that never call finish, a daemon stopped by SIGTERM.
import { afterEach, describe, expect, it } from 'vitest';
import {
  makeEnv, script, runScript, spawnScript, cliJson, exportJsonl, waitUntil, serviceFile, startDaemon, type TestEnv,
} from './helpers.js';

let t: TestEnv;
afterEach(async () => t && (await t.cleanup()));

describe('lifecycle', () => {
  it('kill -9 of a worker: its run is crashed within 5 s, every acknowledged record is kept, other runs untouched', async () => {
    t = makeEnv();
    const worker = script(t, 'worker.mjs', `
      const run = await logd.init({ project: 'kill', name: process.argv[2], group: 'k' });
      console.log('run ' + run.id);
      let step = 0;
      for (;;) {
        for (let i = 0; i < 200; i++) run.log({ loss: step, x: i }, { step: step++ });
        if (await run.flush(5000)) console.log('acked ' + step);
        if (process.argv[2] === 'survivor' && step >= 2000) break;
      }
      await run.finish();
      console.log('done');
    `);
    const victim = spawnScript(t, worker, ['victim']);
    const survivor = spawnScript(t, worker, ['survivor']);
    await waitUntil(() => victim.lines.filter((l) => l.startsWith('acked')).length >= 3, 20_000, 'victim to get acks');
    victim.kill('SIGKILL');
    const killedAt = Date.now();
    const lastAcked = Math.max(...victim.lines.filter((l) => l.startsWith('acked')).map((l) => Number(l.split(' ')[1])));
    const victimId = victim.lines.find((l) => l.startsWith('run '))!.slice(4);
    let state = '';
    await waitUntil(async () => {
      state = (await cliJson(t, ['show', victimId])).state;
      return state === 'crashed';
    }, 5000, 'the victim run to be crashed');
    expect(Date.now() - killedAt).toBeLessThan(5000);
    const rows = await exportJsonl(t, victimId);
    expect(rows.length).toBeGreaterThanOrEqual(lastAcked);
    rows.slice(0, lastAcked).forEach((r, i) => expect(r).toMatchObject({ _step: i, loss: i }));
    await waitUntil(() => survivor.lines.includes('done'), 30_000, 'the survivor to finish');
    const survivorId = survivor.lines.find((l) => l.startsWith('run '))!.slice(4);
    const s = await cliJson(t, ['show', survivorId]);
    expect(s.state).toBe('finished');
    expect(s.historyRows).toBe(2000);
  });

  it('finish returns within its deadline, with a clear message, while a child still holds the run', async () => {
    t = makeEnv();
    const child = script(t, 'stuck.mjs', `
      const run = await logd.attach(process.argv[2]);
      run.log({ child: 1 }, { step: 0 });
      await run.flush();
      process.send('ready');
      setInterval(() => {}, 1000); // never finishes
    `);
    const parent = script(t, 'owner.mjs', `
      import { fork } from 'node:child_process';
      const run = await logd.init({ project: 'stuck' });
      run.log({ parent: 1 }, { step: 0 });
      const c = fork(${JSON.stringify(child)}, [run.handle()]);
      await new Promise((r) => c.once('message', r));
      const t0 = Date.now();
      const res = await run.finish({ timeoutMs: 1500 });
      console.log(JSON.stringify({ id: run.id, ms: Date.now() - t0, ...res }));
      c.kill('SIGKILL');
    `);
    const r = await runScript(t, parent);
    expect(r.exitCode, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(out.ms).toBeLessThan(1500 + 1000);
    expect(out.timedOut).toBe(true);
    expect(out.state).toBe('finished');
    expect(out.message).toMatch(/still attached: pid \d+/);
    const rows = await exportJsonl(t, out.id);
    expect(rows).toEqual([expect.objectContaining({ _step: 0, parent: 1, child: 1 })]);
  });

  it('a process that never calls finish: its records are all stored and the run is finalised', async () => {
    t = makeEnv();
    const natural = script(t, 'natural.mjs', `
      const run = await logd.init({ project: 'nofinish', name: 'natural' });
      for (let s = 0; s < 5000; s++) run.log({ v: s }, { step: s });
      console.log(run.id);
    `);
    const exiting = script(t, 'exiting.mjs', `
      const run = await logd.init({ project: 'nofinish', name: 'exit' });
      for (let s = 0; s < 5000; s++) run.log({ v: s }, { step: s });
      console.log(run.id);
      process.exit(0);
    `);
    const failing = script(t, 'failing.mjs', `
      const run = await logd.init({ project: 'nofinish', name: 'failing' });
      for (let s = 0; s < 3000; s++) run.log({ v: s }, { step: s });
      console.log(run.id);
      process.exit(7);
    `);
    for (const [file, state, code] of [[natural, 'finished', 0], [exiting, 'finished', 0], [failing, 'crashed', 7]] as const) {
      const r = await runScript(t, file);
      expect(r.exitCode, r.stderr).toBe(code);
      const id = r.stdout.trim();
      await waitUntil(async () => (await cliJson(t, ['show', id])).state !== 'running', 15_000, `run ${id} to be final`);
      const info = await cliJson(t, ['show', id]);
      expect(info.state).toBe(state);
      expect(info.exitCode).toBe(code);
      const rows = await exportJsonl(t, id);
      expect(rows.length).toBe(code === 7 ? 3000 : 5000);
      expect(rows.at(-1)).toMatchObject({ v: rows.length - 1 });
    }
  });

  it('SIGTERM to the daemon: open runs become killed, acknowledged data is durable, exit 0', async () => {
    t = makeEnv();
    const d = await startDaemon(t);
    const w = script(t, 'w.mjs', `
      const run = await logd.init({ project: 'term' });
      for (let s = 0; s < 1000; s++) run.log({ v: s }, { step: s });
      await run.flush();
      console.log('run ' + run.id);
      setInterval(() => {}, 1000);
    `);
    const worker = spawnScript(t, w, [], { LOGD_NO_AUTOSTART: '1' });
    await waitUntil(() => worker.lines.some((l) => l.startsWith('run ')), 15_000, 'the worker to flush');
    const id = worker.lines.find((l) => l.startsWith('run '))!.slice(4);
    const exit = new Promise<number | null>((r) => d.proc.on('exit', (c) => r(c)));
    d.proc.kill('SIGTERM');
    expect(await exit).toBe(0);
    expect(serviceFile(t.runtimeDir)).toBeNull();
    worker.kill('SIGKILL');
    // A new daemon (auto-started by the CLI) reads the store back.
    const info = await cliJson(t, ['show', id]);
    expect(info.state).toBe('killed');
    expect(info.historyRows).toBe(1000);
  });
});

describe('a stopped daemon', () => {
  it('writers never block: past the memory bound batches wait on disk, and after SIGCONT everything arrives', async () => {
    t = makeEnv({ LOGD_MAX_BUFFER_MB: '2' });
    const d = await startDaemon(t);
    const w = script(t, 'w.mjs', `
      import fs from 'node:fs';
      const run = await logd.init({ project: 'stopped' });
      run.log({ v: -1 }, { step: 0 });
      await run.flush();
      console.log('run ' + run.id);
      while (!fs.existsSync(process.argv[2])) await new Promise((r) => setTimeout(r, 10));
      let worst = 0;
      for (let s = 1; s <= 200000; s++) {
        const t0 = performance.now();
        run.log({ v: s, a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8, i: 9 }, { step: s });
        worst = Math.max(worst, performance.now() - t0);
        if (s % 10000 === 0) await new Promise((r) => setTimeout(r, 5));
      }
      const spooled = fs.readdirSync(process.env.LOGD_DIR + '/spool').filter((f) => f.endsWith('.overflow'));
      console.log('logged ' + JSON.stringify({ worst, spooled: spooled.length, rssMb: process.memoryUsage().rss / 1048576 }));
      const res = await run.finish({ timeoutMs: 60000 });
      console.log('finished ' + res.state);
    `);
    const go = `${t.dir}/go`;
    const worker = spawnScript(t, w, [go], { LOGD_NO_AUTOSTART: '1' });
    await waitUntil(() => worker.lines.some((l) => l.startsWith('run ')), 15_000, 'the worker to start');
    const id = worker.lines.find((l) => l.startsWith('run '))!.slice(4);
    process.kill(d.pid, 'SIGSTOP');
    try {
      (await import('node:fs')).writeFileSync(go, '');
      await waitUntil(() => worker.lines.some((l) => l.startsWith('logged ')), 60_000, 'the worker to log while the daemon is stopped');
    } finally {
      process.kill(d.pid, 'SIGCONT');
    }
    const stats = JSON.parse(worker.lines.find((l) => l.startsWith('logged '))!.slice(7));
    expect(stats.spooled).toBe(1); // past 2 MB the batches went to disk
    expect(stats.worst).toBeLessThan(250); // no log() call waited on the stopped daemon
    await waitUntil(() => worker.lines.some((l) => l.startsWith('finished')), 60_000, 'the worker to finish after SIGCONT');
    expect(worker.lines.find((l) => l.startsWith('finished'))).toBe('finished finished');
    const info = await cliJson(t, ['show', id]);
    expect(info.historyRows).toBe(200_001);
    expect(info.summary.v).toBe(200_000);
  });
});
