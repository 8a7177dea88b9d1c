// One run shared by a parent and a forked child through handle()/attach().
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, script, runScript, cliJson, exportJsonl, type TestEnv } from './helpers.js';

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
});
