// Issue 21: `logd launch` prints one line naming the stalled ranks when the
// daemon judges its job's group stalled, and one when they step again. Real
// ranks (the TypeScript client), a real daemon, the real launcher.
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, cli, script, killDaemon, type TestEnv } from '../helpers.js';

let t: TestEnv;
afterEach(async () => {
  if (!t) return;
  await killDaemon(t.dir);
  await t.cleanup();
});

describe('logd launch and rank health', () => {
  it('both ranks stop stepping for 9 s: `launch: health: job stalled` names them, then `recovered`', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    const rank = script(t, 'train.mjs', `
      const run = await logd.init({ project: 'launched', name: 'rank' + process.env.RANK });
      const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
      for (let s = 0; s < 80; s++) {
        run.log({ loss: 1 / (s + 1) }, { step: s });
        await sleep(s === 40 ? 9000 : 50);
      }
      await run.finish();
    `);
    const r = await cli(t, ['launch', '--nproc-per-node', '2', '--master-port', '29733', '--group', 'lg', rank], { timeout: 90_000 });
    expect(r.exitCode, r.stderr).toBe(0);
    const lines = r.stderr.split('\n').filter((l) => l.startsWith('launch: health: '));
    expect(lines[0], r.stderr).toMatch(/^launch: health: job stalled: rank [01], rank [01]/);
    expect(lines.some((l) => /^launch: health: recovered: rank [01], rank [01]/.test(l)), r.stderr).toBe(true);
    expect(lines.filter((l) => /straggler/.test(l))).toEqual([]);
  }, 120_000);
});
