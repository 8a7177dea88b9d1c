// Issue 21: the health of a job is seen from every node. Two daemons stand
// for two nodes and upload to one real PostgreSQL; two TypeScript trainers of
// one group on node b log with explicit steps, then stop stepping while alive.
// Node b's daemon judges `job stalled` (with each Node process's stack, from
// its diagnostic report), and `logd health --store` on node a reads it from
// the shared store while the job is still stalled (no new rows to carry it).
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { execa } from 'execa';
import { pgUnavailable, startPg, type PgCluster } from '../pg/cluster.js';
import { CLI, killDaemon, script, spawnScript, startDaemon, waitUntil, type TestEnv } from '../helpers.js';
import { nodeEnv, reading } from '../upload/helpers.js';
import type { GroupHealth } from '../../daemon/cli/health.js';

const why = pgUnavailable();
let pgc: PgCluster;
const envs: TestEnv[] = [];

describe.skipIf(why !== null)(`rank health across nodes through PostgreSQL${why ? ` (skipped: ${why})` : ''}`, () => {
  beforeAll(async () => {
    pgc = await startPg();
  });
  afterAll(() => pgc?.destroy());
  afterEach(async () => {
    for (const t of envs.splice(0)) {
      await killDaemon(t.dir);
      await t.cleanup();
    }
  });

  it('a stall on node b is visible from `logd health --store` on node a, with both ranks\' stacks', async () => {
    const a = nodeEnv('node-a', pgc.socketUrl, { LOGD_IDLE_TIMEOUT_MS: '120000' });
    const b = nodeEnv('node-b', pgc.socketUrl, { LOGD_IDLE_TIMEOUT_MS: '120000' });
    envs.push(a, b);
    await startDaemon(a);
    await startDaemon(b);
    const file = script(b, 'rank.mjs', `
      const run = await logd.init({ project: 'h2', group: 'cross', name: 'r' + process.argv[2] });
      for (let s = 0; s < 40; s++) {
        run.log({ loss: 1 / (s + 1) }, { step: s });
        await new Promise((r) => setTimeout(r, 50));
      }
      console.log('paused ' + run.id);
      await new Promise((r) => setTimeout(r, 60_000));
    `);
    const ranks = [spawnScript(b, file, ['0']), spawnScript(b, file, ['1'])];
    try {
      await waitUntil(() => ranks.every((p) => p.lines.some((l) => l.startsWith('paused'))), 60_000, 'both ranks to log');
      const ids = ranks.map((p) => p.lines.find((l) => l.startsWith('paused'))!.slice(7)).sort();
      let g: GroupHealth | undefined;
      await waitUntil(async () => {
        const r = await execa(process.execPath, [CLI, 'health', 'cross', '--json'], { env: reading(a, pgc.url).env, reject: false, timeout: 30_000 });
        if (r.exitCode !== 0) return false;
        g = (JSON.parse(r.stdout) as GroupHealth[])[0];
        return !!g?.events.some((e) => e.kind === 'job stalled');
      }, 40_000, 'node a to read the stall of node b from the shared store');
      const e = g!.events.find((x) => x.kind === 'job stalled')!;
      expect(e.runIds.slice().sort()).toEqual(ids);
      expect(g!.stalled).toBe(true);
      expect(g!.ranks.map((r) => r.state)).toEqual(['stalled', 'stalled']);
      // Both processes answered SIGUSR2 with their diagnostic report, and are alive.
      expect((e.stacks ?? []).map((s) => s.runId).sort()).toEqual(ids);
      for (const p of ranks) expect(p.exitCode).toBeNull();
      // The human form says it too.
      const text = await execa(process.execPath, [CLI, 'health', 'cross'], { env: reading(a, pgc.url).env, timeout: 30_000 });
      expect(text.stdout).toMatch(/group cross \(project h2\): STALLED/);
      expect(text.stdout).toMatch(/job stalled/);
    } finally {
      for (const p of ranks) p.kill('SIGKILL');
    }
  }, 120_000);
});
