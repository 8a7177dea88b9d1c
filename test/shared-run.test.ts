// One run shared by a parent and a forked child through handle()/attach().
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, script, runScript, cli, cliJson, exportJsonl, type TestEnv } from './helpers.js';

let t: TestEnv;
afterEach(async () => t && (await t.cleanup()));

describe('shared run', () => {
  it('a forked child attaches and logs; both writers rows are stored and a shared step keeps both', async () => {
    t = makeEnv();
    const child = script(t, 'child.mjs', `
      const run = await logd.attach(process.argv[2]);
      for (let s = 0; s < 50; s++) run.log({ 'child/loss': 2 * s }, { step: s });
      run.log({ shared: 2 }, { step: 1000 });
      const r = await run.finish();
      console.log('child', r.state);
    `);
    const parent = script(t, 'parent.mjs', `
      import { fork } from 'node:child_process';
      const run = await logd.init({ project: 'share', name: 'parent' });
      for (let s = 0; s < 50; s++) run.log({ 'parent/loss': s }, { step: s });
      run.log({ shared: 1 }, { step: 1000 });
      const c = fork(${JSON.stringify(child)}, [run.handle()]);
      const code = await new Promise((r) => c.on('exit', r));
      const res = await run.finish();
      console.log(JSON.stringify({ id: run.id, child: code, state: res.state }));
    `);
    const r = await runScript(t, parent);
    expect(r.exitCode, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(out).toMatchObject({ child: 0, state: 'finished' });
    const info = await cliJson(t, ['show', out.id]);
    expect(info.historyRows).toBe(102);
    expect(info.metadata.writers).toHaveLength(2);
    // Merged view: same steps from two writers with different keys become one row.
    const merged = await exportJsonl(t, out.id);
    const step7 = merged.filter((x) => x._step === 7);
    expect(step7).toEqual([expect.objectContaining({ 'parent/loss': 7, 'child/loss': 14 })]);
    // Same key at the same step from both writers: both values survive.
    const shared = merged.filter((x) => x._step === 1000).map((x) => x.shared).sort();
    expect(shared).toEqual([1, 2]);
    const raw = await exportJsonl(t, out.id, ['--raw']);
    expect(raw).toHaveLength(102);
    expect(new Set(raw.map((x) => x._writer))).toEqual(new Set([0, 1]));
  });

  it('writers that all log epoch and lr at each step: show and export --format csv give one full row per step; --raw keeps every row', async () => {
    t = makeEnv();
    // Each writer logs the keys every rank logs (epoch, lr: the same values) and its own loss, in two log() calls per step.
    const body = `
      for (let s = 0; s < 40; s++) {
        run.log({ epoch: Math.floor(s / 10), lr: 0.01 }, { step: s });
        run.log({ [who + '/loss']: s + who.length / 100 }, { step: s });
      }`;
    const child = script(t, 'child.mjs', `
      const run = await logd.attach(process.argv[2]);
      const who = 'child' + process.argv[3];
      ${body}
      await run.finish();
    `);
    const parent = script(t, 'parent.mjs', `
      import { fork } from 'node:child_process';
      const run = await logd.init({ project: 'share', name: 'epochs' });
      const who = 'parent';
      const kids = [0, 1].map((i) => fork(${JSON.stringify(child)}, [run.handle(), String(i)]));
      ${body}
      await Promise.all(kids.map((c) => new Promise((r) => c.on('exit', r))));
      await run.finish();
      console.log(run.id);
    `);
    const r = await runScript(t, parent);
    expect(r.exitCode, r.stderr).toBe(0);
    const id = r.stdout.trim().split('\n').pop()!;
    const csv = (await cli(t, ['export', id, '--format', 'csv'])).stdout.trim().split('\n');
    expect(csv[0]).toBe('_step,_time,child0/loss,child1/loss,epoch,lr,parent/loss');
    expect(csv).toHaveLength(41); // one row per step
    for (const line of csv.slice(1)) expect(line.split(',').every((c) => c !== ''), line).toBe(true);
    const rows = await exportJsonl(t, id);
    expect(rows.map((x) => x._step)).toEqual(Array.from({ length: 40 }, (_, s) => s));
    expect(rows[25]).toMatchObject({ epoch: 2, lr: 0.01, 'parent/loss': 25.06, 'child0/loss': 25.06, 'child1/loss': 25.06 });
    const shown = await cliJson(t, ['show', id, '--rows', '3']);
    expect(shown.lastRows.map((x: Record<string, unknown>) => Object.keys(x).length)).toEqual([7, 7, 7]);
    expect(shown.lastRows.map((x: Record<string, unknown>) => x._step)).toEqual([37, 38, 39]);
    expect(await exportJsonl(t, id, ['--raw'])).toHaveLength(240);
  });
});
