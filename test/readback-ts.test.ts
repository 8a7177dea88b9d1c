// Issue 33 from TypeScript: api.runs(), api.run() and api.history() read a
// real daemon's runs back: every stored row as columns, NaN where a row has no
// value, NaN and ±Infinity logged kept, config and summary parsed.
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, startDaemon, killDaemon, script, runScript, type TestEnv } from './helpers.js';

let t: TestEnv;
afterEach(async () => {
  if (t) {
    await killDaemon(t.dir);
    await t.cleanup();
  }
});

describe('reading runs back from TypeScript', () => {
  it('api.history gives every stored row as columns; api.runs lists the runs with their config and summary', async () => {
    t = makeEnv();
    await startDaemon(t);
    const file = script(t, 'rb.mjs', `
      const run = await logd.init({ project: 'rb', name: 'a', config: { lr: 0.01 } });
      for (let s = 0; s < 100; s++) {
        const row = { loss: s === 10 ? NaN : s === 11 ? Infinity : s === 12 ? -Infinity : 1 / (s + 1) };
        if (s % 10 === 0) row.acc = s / 100;
        run.log(row, { step: s });
      }
      await run.finish();
      const h = await logd.api.history(run.id);
      const only = await logd.api.history(run.id, { keys: ['acc', 'nothing'] });
      const runs = await logd.api.runs({ project: 'rb' });
      const one = await logd.api.run(run.id);
      let missing = '';
      try { await logd.api.run('no-such-run'); } catch (e) { missing = e.message; }
      const kept = (await logd.api.runs({ filter: 'lr < 0.05; summary.acc.max >= 0.9' })).map((r) => r.name);
      const dropped = (await logd.api.runs({ filter: 'lr >= 0.05' })).length;
      const table = await logd.api.historyArrow(run.id);
      const arrowCols = table.schema.fields.map((f) => f.name);
      const arrowLoss = Array.from(table.getChild('loss').toArray()).map(String);
      let badFilter = '';
      try { await logd.api.runs({ filter: 'lr <' }); } catch (e) { badFilter = e.message; }
      console.log(JSON.stringify({
        rows: h.rows, keys: h.keys, steps: Array.from(h.step), loss: Array.from(h.columns.loss).map(String), acc: Array.from(h.columns.acc).map(String),
        onlyKeys: only.keys, nothing: Array.from(only.columns.nothing).every(Number.isNaN), accRows: only.rows,
        runs: runs.map((r) => [r.name, r.state, r.config.lr, r.rows]), one: [one.id === run.id, one.summary.acc], missing, kept, dropped, badFilter, arrowRows: table.numRows, arrowCols, arrowLoss,
      }));
    `);
    const r = await runScript(t, file);
    expect(r.exitCode, r.stderr).toBe(0);
    const got = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(got.rows).toBe(100);
    expect(got.keys).toEqual(['loss', 'acc']);
    expect(got.steps).toEqual(Array.from({ length: 100 }, (_, i) => i));
    expect(got.loss).toEqual(Array.from({ length: 100 }, (_, s) => String(s === 10 ? NaN : s === 11 ? Infinity : s === 12 ? -Infinity : 1 / (s + 1))));
    expect(got.acc).toEqual(Array.from({ length: 100 }, (_, s) => String(s % 10 === 0 ? s / 100 : NaN)));
    expect(got.onlyKeys).toEqual(['acc', 'nothing']);
    expect(got.nothing).toBe(true);
    expect(got.runs).toEqual([['a', 'finished', 0.01, 100]]);
    expect(got.one).toEqual([true, 0.9]);
    expect(got.kept).toEqual(['a']);
    expect(got.dropped).toBe(0);
    expect(got.badFilter).toMatch(/^listRuns: filter: /);
    // An Apache Arrow table of the same columns (the test's own apache-arrow, a devDependency).
    expect(got.arrowRows).toBe(100);
    expect(got.arrowCols).toEqual(['_step', '_time', 'loss', 'acc']);
    expect(got.arrowLoss).toEqual(got.loss);
    expect(got.missing).toMatch(/no-such-run/);
  }, 60_000);
});
