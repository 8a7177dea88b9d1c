// Issue 34 across nodes: a real torchrun job over two "nodes" (two daemons,
// one real PostgreSQL they upload to; two torchrun agents with --nnodes 2,
// 2 ranks each, gloo). Rank 2, on node b, kills itself with SIGKILL. From
// node a, `logd health GROUP --store` tells the job's story once: rank 2,
// SIGKILL, on node b; the other three ranks are consequences.
import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { execa } from 'execa';
import { pgUnavailable, startPg, type PgCluster } from '../pg/cluster.js';
import { CLI, killDaemon, startDaemon, waitUntil, type TestEnv } from '../helpers.js';
import { nodeEnv, reading } from '../upload/helpers.js';
import { FIXTURES, PYTHON, torchMissing, pyEnv, freePort } from '../python/py-helpers.js';
import type { GroupHealth } from '../../daemon/cli/health.js';

const why = pgUnavailable() ?? torchMissing;
let pgc: PgCluster;
const envs: TestEnv[] = [];
const closers: Array<() => Promise<void>> = [];

describe.skipIf(why !== null)(`a failed job's story across nodes${why ? ` (skipped: ${why})` : ''}`, () => {
  beforeAll(async () => {
    pgc = await startPg();
  });
  afterAll(() => pgc?.destroy());
  afterEach(async () => {
    for (const c of closers.splice(0)) await c();
    for (const t of envs.splice(0)) {
      await killDaemon(t.dir);
      await t.cleanup();
    }
  });

  it('rank 2 dies on node b: node a names it, once for the job; one alert in all, from either node, with the whole story', async () => {
    // One webhook receiver for both nodes' daemons (issue 35): a job-level event is claimed in the shared store.
    const got: any[] = [];
    const rx = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        got.push(JSON.parse(body));
        res.writeHead(200).end('ok');
      });
    });
    await new Promise<void>((r) => rx.listen(0, '127.0.0.1', () => r()));
    closers.push(() => new Promise<void>((r) => rx.close(() => r())));
    const hook = `http://127.0.0.1:${(rx.address() as AddressInfo).port}/hook`;
    const a = nodeEnv('node-a', pgc.socketUrl, { LOGD_IDLE_TIMEOUT_MS: '120000', LOGD_ALERT_WEBHOOK: hook });
    const b = nodeEnv('node-b', pgc.socketUrl, { LOGD_IDLE_TIMEOUT_MS: '120000', LOGD_ALERT_WEBHOOK: hook });
    envs.push(a, b);
    await startDaemon(a);
    await startDaemon(b);
    const port = String(await freePort());
    const agent = (t: TestEnv, node: number) => execa(PYTHON, ['-m', 'torch.distributed.run', '--nnodes', '2', '--node_rank', String(node), '--nproc_per_node', '2',
      '--master_addr', '127.0.0.1', '--master_port', port, '--redirects', '1', '--tee', '1', '--log_dir', path.join(t.dir, 'torchrun'),
      path.join(FIXTURES, 'story_train.py'), 'story-x', 'kill', '2', String(20 + Math.floor(Math.random() * 30))],
    { env: pyEnv(t, { OMP_NUM_THREADS: '1' }), extendEnv: false, reject: false, all: true, timeout: 180_000 });
    const [ra, rb] = await Promise.all([agent(a, 0), agent(b, 1)]);
    expect(ra.exitCode, ra.all).not.toBe(0);
    expect(rb.exitCode, rb.all).not.toBe(0);
    let g: GroupHealth[] = [];
    await waitUntil(async () => {
      const r = await execa(process.execPath, [CLI, 'health', 'story-x', '--json'], { env: reading(a, pgc.url).env, reject: false, timeout: 30_000 });
      if (r.exitCode !== 0) return false;
      g = JSON.parse(r.stdout) as GroupHealth[];
      return g.length === 1 && g[0].ranks.length === 4 && g[0].ranks.every((x) => x.runState === 'crashed');
    }, 60_000, 'node a to read all four ranks, ended, from the shared store');
    const s = g[0].story!;
    expect(s.verdict, s.line).toBe('failed');
    expect(s.first.map((f) => [f.rank, f.cause]), s.line).toEqual([[2, 'killed']]);
    expect(s.after.map((f) => f.rank).sort(), s.line).toEqual([0, 1, 3]);
    for (const f of s.after) expect(f.consequence, `${s.line}\n${f.how}`).toBe(true);
    const text = await execa(process.execPath, [CLI, 'health', 'story-x'], { env: reading(a, pgc.url).env, timeout: 30_000 });
    expect(text.stdout.match(/^group story-x /gm)).toHaveLength(1);
    expect(text.stdout).toMatch(/failed: rank 2 \(pid \d+, node-b\) was killed by SIGKILL at step \d+/);
    await waitUntil(() => got.some((g) => g.kind === 'job failed'), 60_000, 'the job failed alert');
    await new Promise((r) => setTimeout(r, 5000)); // the other node: no second one
    const failed = got.filter((g) => g.kind === 'job failed');
    expect(failed, JSON.stringify(got.map((g) => [g.node, g.title]))).toHaveLength(1);
    expect(failed[0].title).toBe('job story-x failed: rank 2 was killed by SIGKILL');
    expect(failed[0].event.story.first).toEqual([expect.objectContaining({ rank: 2, cause: 'killed' })]);
    expect(failed[0].event.story.after.map((f: { rank: number }) => f.rank).sort()).toEqual([0, 1, 3]); // both nodes' ranks
  }, 240_000);
});
