// Daemon restart: acknowledged records survive, a torn tail is cut, and the
// writer reconnects to the new daemon and carries on.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, script, spawnScript, cliJson, exportJsonl, waitUntil, startDaemon, type TestEnv } from './helpers.js';

let t: TestEnv;
afterEach(async () => t && (await t.cleanup()));

describe('daemon restart', () => {
  it('keeps every acknowledged record, cuts a torn tail, and the writer resumes on the new daemon', async () => {
    t = makeEnv({ LOGD_RECOVERY_GRACE_MS: '15000' });
    const first = await startDaemon(t);
    const w = script(t, 'w.mjs', `
      import fs from 'node:fs';
      const run = await logd.init({ project: 'restart' });
      console.log('run ' + run.id);
      for (let s = 0; s < 3000; s++) run.log({ v: s }, { step: s });
      await run.flush();
      console.log('acked 3000');
      // Wait for the test to restart the daemon, then log more.
      while (!fs.existsSync(process.argv[2])) await new Promise((r) => setTimeout(r, 20));
      for (let s = 3000; s < 6000; s++) run.log({ v: s }, { step: s });
      const res = await run.finish({ timeoutMs: 20000 });
      console.log('finished ' + res.state + ' ' + res.message);
    `);
    const go = path.join(t.dir, 'go');
    const worker = spawnScript(t, w, [go]);
    await waitUntil(() => worker.lines.includes('acked 3000'), 15_000, 'the first 3000 rows to be acknowledged');
    const id = worker.lines.find((l) => l.startsWith('run '))!.slice(4);
    first.proc.kill('SIGKILL');
    await new Promise((r) => first.proc.once('exit', r));
    // A crash in the middle of a write leaves half a frame behind.
    const log = path.join(t.dataDir, 'runs', id, 'records.log');
    const good = fs.statSync(log).size;
    fs.appendFileSync(log, Buffer.from([0x40, 0, 0, 0, 1, 2, 3, 4, 4, 9, 9]));
    await startDaemon(t);
    expect(fs.statSync(log).size).toBe(good);
    fs.writeFileSync(go, '');
    await waitUntil(() => worker.lines.some((l) => l.startsWith('finished')), 30_000, 'the worker to finish');
    expect(worker.lines.find((l) => l.startsWith('finished'))).toMatch(/^finished finished/);
    const info = await cliJson(t, ['show', id]);
    expect(info.state).toBe('finished');
    const rows = await exportJsonl(t, id);
    expect(rows).toHaveLength(6000);
    rows.forEach((r, i) => expect(r).toMatchObject({ _step: i, v: i }));
  });

  it("a batch of summary and config updates alone, stored and acknowledged before a kill -9: the restarted daemon knows it (a SEQ frame), and the finish, the daemon's token changed under the idle writer, does not wait", async () => {
    t = makeEnv({ LOGD_RECOVERY_GRACE_MS: '15000' });
    const first = await startDaemon(t);
    const w = script(t, 'w.mjs', `
      import fs from 'node:fs';
      const run = await logd.init({ project: 'restart' });
      console.log('run ' + run.id);
      for (let s = 0; s < 10; s++) run.log({ v: s }, { step: s });
      await run.flush();
      run.summary.update({ best: 1 });
      run.config.update({ lr: 0.5 });
      await run.flush();
      console.log('acked');
      while (!fs.existsSync(process.argv[2])) await new Promise((r) => setTimeout(r, 20));
      const t0 = Date.now();
      const res = await run.finish({ timeoutMs: 20000 });
      console.log('finished ' + res.state + ' in ' + (Date.now() - t0) + ' ms ' + res.message);
    `);
    const go = path.join(t.dir, 'go');
    const worker = spawnScript(t, w, [go]);
    await waitUntil(() => worker.lines.includes('acked'), 15_000, 'the updates to be acknowledged');
    const id = worker.lines.find((l) => l.startsWith('run '))!.slice(4);
    first.proc.kill('SIGKILL');
    await new Promise((r) => first.proc.once('exit', r));
    await startDaemon(t);
    fs.writeFileSync(go, '');
    await waitUntil(() => worker.lines.some((l) => l.startsWith('finished')), 30_000, 'the worker to finish');
    const line = worker.lines.find((l) => l.startsWith('finished'))!;
    expect(line).toMatch(/^finished finished in \d+ ms/);
    expect(Number(/in (\d+) ms/.exec(line)![1]), line).toBeLessThan(5000);
    const info = await cliJson(t, ['show', id]);
    expect(info.state).toBe('finished');
    expect(info.summary.best).toBe(1);
    expect(info.config.lr).toBe(0.5);
    expect(await exportJsonl(t, id)).toHaveLength(10);
  });
});
