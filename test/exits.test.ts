// How processes end (issue 9, cases 1 and 5): a child that shares a run and
// leaves with process.exit(), and a trainer that handles SIGTERM itself and
// logs on. Nothing they logged is lost, and logd never ends a run while its
// process goes on.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, script, runScript, spawnScript, cliJson, exportJsonl, waitUntil, type TestEnv } from './helpers.js';

let t: TestEnv;
afterEach(async () => t && (await t.cleanup()));

describe('issue 9 case 1: children that share a run and call process.exit()', () => {
  it('every row the children logged is stored, and the owner finish accounts for every writer', async () => {
    t = makeEnv();
    const child = script(t, 'child.mjs', `
      const run = await logd.attach(process.argv[2]);
      const k = Number(process.argv[3]);
      for (let s = 0; s < 50; s++) run.log({ ['child' + k]: s }, { step: s });
      setTimeout(() => process.exit(0), 200);
    `);
    const owner = script(t, 'owner.mjs', `
      import { fork } from 'node:child_process';
      const run = await logd.init({ project: 'exits', name: 'owner' });
      for (let s = 0; s < 50; s++) run.log({ owner: s }, { step: s });
      const kids = [0, 1, 2].map((k) => fork(${JSON.stringify(child)}, [run.handle(), String(k)]));
      await Promise.all(kids.map((c) => new Promise((r) => c.once('exit', r))));
      const res = await run.finish({ timeoutMs: 10000 });
      console.log(JSON.stringify({ id: run.id, ...res }));
    `);
    const r = await runScript(t, owner);
    expect(r.exitCode, r.stderr).toBe(0);
    const res = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(res).toMatchObject({ state: 'finished', timedOut: false });
    const info = await cliJson(t, ['show', res.id]);
    expect(info.historyRows).toBe(200);
    expect(info.metadata.writers).toHaveLength(4);
    const raw = await exportJsonl(t, res.id, ['--raw']);
    for (const key of ['owner', 'child0', 'child1', 'child2']) {
      expect(raw.filter((x) => key in x).map((x) => x[key])).toEqual(Array.from({ length: 50 }, (_, i) => i));
    }
    const spool = path.join(t.dataDir, 'spool');
    expect(fs.existsSync(spool) ? fs.readdirSync(spool) : []).toEqual([]);
  });
});

describe('issue 9 case 5: a trainer with its own SIGTERM handler that logs on', () => {
  it('logd does not end the run at the signal; the rows logged after it are stored and no spill file is left', async () => {
    t = makeEnv();
    const trainer = script(t, 'trainer.mjs', `
      const run = await logd.init({ project: 'exits', name: 'preempted' });
      let stop = false;
      process.on('SIGTERM', () => { stop = true; });
      let step = 0;
      console.log('run ' + run.id);
      while (!stop) {
        run.log({ loss: step }, { step }); step++;
        if (step % 50 === 0) await new Promise((r) => setTimeout(r, 5));
      }
      // The checkpoint-on-preemption pattern: log some more, then finish.
      const before = step;
      try {
        for (let i = 0; i < 500; i++) { run.log({ loss: step }, { step }); step++; }
        console.log('after ' + (step - before));
      } catch (e) { console.log('threw ' + e.message); }
      const res = await run.finish();
      console.log('finished ' + res.state + ' ' + step);
    `);
    const p = spawnScript(t, trainer);
    await waitUntil(() => p.lines.some((l) => l.startsWith('run ')), 30_000, 'the trainer to start');
    await new Promise((r) => setTimeout(r, 300)); // it logs a while
    p.kill('SIGTERM');
    await waitUntil(() => p.lines.some((l) => l.startsWith('finished ')), 30_000, 'the trainer to finish');
    expect(p.lines.some((l) => l.startsWith('threw'))).toBe(false);
    expect(p.lines).toContain('after 500');
    const [, state, steps] = p.lines.find((l) => l.startsWith('finished '))!.split(' ');
    expect(state).toBe('finished');
    const id = p.lines.find((l) => l.startsWith('run '))!.slice(4);
    const rows = await exportJsonl(t, id);
    expect(rows.map((r) => r.loss)).toEqual(Array.from({ length: Number(steps) }, (_, i) => i));
    const spool = path.join(t.dataDir, 'spool');
    expect(fs.existsSync(spool) ? fs.readdirSync(spool) : []).toEqual([]);
  });
});
