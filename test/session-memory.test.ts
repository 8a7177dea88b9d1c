// One process, one connection to its daemon: a run that logged a million rows (its whole backlog queued on its
// stream while the daemon catches up) must not make the connection refuse the process's next calls. Before the
// fix, Node's per-session memory bound (64 MB) was crossed, every new call got ENHANCE_YOUR_CALM, the big run's
// finish timed out as "finishing", and the next 20 runs all went deferred.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeEnv, script, runScript, type TestEnv } from './helpers.js';

let t: TestEnv;
beforeAll(() => {
  t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
});
afterAll(async () => t?.cleanup());

describe('a big run, then more runs in the same process', () => {
  it('1 M rows x 10 metrics, then 20 runs: every run finishes, none deferred, no ENHANCE_YOUR_CALM', async () => {
    const file = script(t, 'big-then.mjs', `
      const run = await logd.init({ project: 'big', name: 'big' });
      for (let s = 0; s < 1_000_000; s++) run.log({ a: s, b: 1, c: 2, d: 3, e: 4, f: 5, g: 6, h: 7, i: 8, j: 9 }, { step: s });
      const big = await run.finish({ timeoutMs: 60000 });
      const states = [];
      for (let i = 0; i < 20; i++) {
        const r = await logd.init({ project: 'big', name: 'after' + i });
        r.log({ x: i });
        states.push((await r.finish()).state);
      }
      console.log(JSON.stringify({ big: big.state, states }));
    `);
    const r = await runScript(t, file, [], {}, 110_000);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stderr).not.toMatch(/ENHANCE_YOUR_CALM|deferred/);
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(out).toEqual({ big: 'finished', states: Array(20).fill('finished') });
  }, 120_000);
});
