// Issue 21: the daemon keeps each rank's step rate over time. Two real
// TypeScript ranks of one group step at about 20 steps/s, slow down to about
// 5, pause while alive, then finish. The daemon samples each rank's step
// every 5 s (daemon/health/history.ts); `logd health --json` shows the series
// per rank, the text output draws it as one character per sample, and it is
// stored with the run (metadata.health.rate), so it reads the same after the
// job ended. Nothing is added to log(): the ranks only log.
import { afterEach, describe, expect, it } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import { cli, cliJson, killDaemon, makeEnv, script, spawnScript, startDaemon, waitUntil, type TestEnv } from '../helpers.js';
import type { GroupHealth } from '../../daemon/cli/health.js';

let t: TestEnv;
const workers: ChildProcess[] = [];
afterEach(async () => {
  for (const w of workers.splice(0)) if (w.exitCode === null) w.kill('SIGKILL');
  if (t) {
    await killDaemon(t.dir);
    await t.cleanup();
  }
});

describe('step rate over time', () => {
  it('fast, then slow, then paused: each rank\'s series shows about 20, then about 5, then 0 steps/s, live and after the job ended', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000' });
    await startDaemon(t);
    const rank = script(t, 'rank.mjs', `
      const run = await logd.init({ project: 'rate', name: 'r' + process.env.RANK, group: 'pace' });
      console.log('run ' + run.id);
      const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
      let step = 0;
      for (const [seconds, stepMs] of [[12, 50], [12, 200]]) {
        const end = Date.now() + seconds * 1000;
        while (Date.now() < end) {
          run.log({ loss: 1 / (step + 1) }, { step: step++ });
          await sleep(stepMs);
        }
      }
      await run.flush();
      console.log('paused');
      await sleep(12_000); // alive, no step
      await run.finish();
      console.log('done');
    `);
    for (const r of [0, 1]) workers.push(spawnScript(t, rank, [], { RANK: String(r), WORLD_SIZE: '2', LOCAL_RANK: String(r) }));
    const lines = (i: number) => (workers[i] as unknown as { lines: string[] }).lines;

    // Live, during the pause: the newest sample of each rank reads 0.
    await waitUntil(() => [0, 1].every((i) => lines(i).includes('paused')), 40_000, 'both ranks to step fast, then slow');
    let live!: GroupHealth;
    await waitUntil(async () => {
      live = (await cliJson<GroupHealth[]>(t, ['health', 'pace']))[0];
      return live.ranks.length === 2 && live.ranks.every((r) => r.rate.length > 0 && r.rate.at(-1)!.stepsPerS === 0);
    }, 15_000, 'a sample of 0 steps/s for both ranks');
    expect(live.ranks.every((r) => r.runState === 'running')).toBe(true);

    await waitUntil(() => [0, 1].every((i) => lines(i).includes('done')), 30_000, 'both ranks to finish');
    const g = (await cliJson<GroupHealth[]>(t, ['health', 'pace']))[0];
    expect(g.ranks.map((r) => r.runState)).toEqual(['finished', 'finished']);
    for (const r of g.ranks) {
      const rates = r.rate.map((p) => p.stepsPerS);
      const fast = rates.findIndex((x) => x >= 12 && x <= 25);
      const slow = rates.findIndex((x, i) => i > fast && x >= 3 && x <= 6.5);
      const stopped = rates.findIndex((x, i) => i > slow && x === 0);
      expect(fast, `rank ${r.rank}: ${rates.map((x) => x.toFixed(1)).join(' ')}`).toBeGreaterThanOrEqual(0);
      expect(slow, `rank ${r.rank}: ${rates.map((x) => x.toFixed(1)).join(' ')}`).toBeGreaterThan(fast);
      expect(stopped, `rank ${r.rank}: ${rates.map((x) => x.toFixed(1)).join(' ')}`).toBeGreaterThan(slow);
      // Samples about 5 s apart (ticks of 1 s), steps never going back, ending at the rank's last step.
      for (let i = 1; i < r.rate.length; i++) {
        expect(r.rate[i].at - r.rate[i - 1].at).toBeGreaterThanOrEqual(5);
        expect(r.rate[i].at - r.rate[i - 1].at).toBeLessThan(7.5);
        expect(r.rate[i].step).toBeGreaterThanOrEqual(r.rate[i - 1].step);
      }
      expect(r.rate.at(-1)!.step).toBe(r.step);
      // Stored with the run: the same series in its metadata.
      const shown = await cliJson<{ metadata: { health: { rate: { everyS: number; dt: number[] } } } }>(t, ['show', r.runId]);
      expect(shown.metadata.health.rate.everyS).toBe(5);
      expect(shown.metadata.health.rate.dt).toHaveLength(r.rate.length);
    }

    // The text output: one character per sample, scaled to the group's fastest; `·` for none.
    const text = (await cli(t, ['health', 'pace'])).stdout;
    expect(text).toMatch(/steps\/s over time \(5 s each, max \d+\.\d\d\)/);
    const sparks = text.split('\n').filter((l) => /^[01] /.test(l)).map((l) => l.trim().split(/\s+/).at(-1)!);
    expect(sparks).toHaveLength(2);
    for (const s of sparks) expect(s).toMatch(/^[▁-█]*[▆▇█][▁-█]*[▁▂▃][▁-█]*·+$/u);
  }, 90_000);
});
