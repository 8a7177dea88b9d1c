// Issue 19, across nodes: a run started on node A and continued on node B
// (init({ id, resume })), whose daemon has no local copy and takes the run
// from the shared store; and two nodes racing to continue the same run, the
// store deciding which one wins. Two real daemons with their own data dirs
// and LOGD_NODE, one real PostgreSQL.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { pgUnavailable, startPg, type PgCluster } from '../pg/cluster.js';
import { runScript, script, startDaemon, killDaemon, waitUntil, type TestEnv } from '../helpers.js';
import { nodeEnv, rawRows, waitUploaded, storeJson } from './helpers.js';

const why = pgUnavailable();
let pgc: PgCluster;
let envs: TestEnv[] = [];
const daemonLogs = new Map<TestEnv, () => string>();

async function node(name: string, url: string | null): Promise<TestEnv> {
  const t = nodeEnv(name, url, { LOGD_IDLE_TIMEOUT_MS: '60000' });
  envs.push(t);
  daemonLogs.set(t, (await startDaemon(t)).stderr);
  return t;
}

const WORKER = `
  const [id, resume, n] = process.argv.slice(2);
  try {
    const run = await logd.init({ project: 'xn', id, resume, config: { node: process.env.LOGD_NODE } });
    for (let i = 0; i < Number(n); i++) run.log({ loss: i, node: process.env.LOGD_NODE === 'node-a' ? 1 : 2 });
    console.log('RESULT', (await run.finish()).state);
  } catch (e) {
    console.log('ERROR', e.message);
  }
`;

describe('resume=must with no shared store', () => {
  afterEach(async () => {
    for (const t of envs) await killDaemon(t.dir);
    for (const t of envs) await t.cleanup();
    envs = [];
  });

  it('says the run is not on this node and that no shared store is configured', async () => {
    const t = await node('node-b', null);
    const out = (await runScript(t, script(t, 'w.mjs', WORKER), ['nowhere1', 'must', '1'])).stdout;
    expect(out).toMatch(/ERROR .*not on this node.*no shared store is configured \(LOGD_UPLOAD_URL/);
  });
});

describe.skipIf(why !== null)(`a run continued on another node${why ? ` (skipped: ${why})` : ''}`, () => {
  beforeAll(async () => {
    pgc = await startPg();
  });
  afterAll(() => pgc?.destroy());
  afterEach(async () => {
    for (const t of envs) await killDaemon(t.dir);
    for (const t of envs) await t.cleanup();
    envs = [];
  });

  it('started on A, continued on B from the shared store: one run, both attempts, every row once', async () => {
    const a = await node('node-a', pgc.socketUrl);
    const b = await node('node-b', pgc.socketUrl);
    expect((await runScript(a, script(a, 'w.mjs', WORKER), ['xn1', 'allow', '5'])).stdout).toContain('RESULT finished');
    await waitUploaded(a, pgc.url, 'xn1', 5);
    const cont = (await runScript(b, script(b, 'w.mjs', WORKER), ['xn1', 'must', '3'])).stdout;
    expect(cont).toContain('RESULT finished');
    const shown = await waitUploaded(b, pgc.url, 'xn1', 8);
    expect(shown.metadata.attempts.map((x: any) => [x.n, x.fromStep, x.state])).toEqual([[1, 0, 'finished'], [2, 5, 'finished']]);
    expect(shown.metadata.fromStore.node).toBe('node-a');
    expect(shown.config).toEqual({ node: 'node-b' }); // A's config, merged with B's init
    const rows = await rawRows(b, 'xn1', pgc.url);
    expect(rows.map((r) => [r._step, r.loss, r.node])).toEqual([[0, 0, 1], [1, 1, 1], [2, 2, 1], [3, 3, 1], [4, 4, 1], [5, 0, 2], [6, 1, 2], [7, 2, 2]]);
    const listed = await storeJson<any[]>(b, pgc.url, ['runs']);
    expect(listed.filter((r) => r.id === 'xn1')).toHaveLength(1);
  }, 120_000);

  it('resume=must of an id neither node nor store has: NOT_FOUND naming both', async () => {
    const b = await node('node-b', pgc.socketUrl);
    const out = (await runScript(b, script(b, 'w.mjs', WORKER), ['nowhere2', 'must', '1'])).stdout;
    expect(out).toMatch(/ERROR .*neither in this node's store .* nor in the shared store/);
  });

  it('a run still running on A is refused on B, naming its holder', async () => {
    const a = await node('node-a', pgc.socketUrl);
    const b = await node('node-b', pgc.socketUrl);
    const hold = script(a, 'hold.mjs', `
      const run = await logd.init({ project: 'xn', id: 'xn2' });
      run.log({ loss: 1 });
      console.log('READY');
      await new Promise((r) => setTimeout(r, 60_000));
    `);
    const holder = runScript(a, hold);
    try {
      await new Promise<void>((resolve) => holder.stdout!.on('data', (d: Buffer) => d.toString().includes('READY') && resolve()));
      // The store sees the run once A uploaded its first slice.
      await waitUntil(async () => (await storeJson<any[]>(b, pgc.url, ['runs'])).some((r) => r.id === 'xn2'), 30_000, 'run xn2 in the store');
      const out = (await runScript(b, script(b, 'w.mjs', WORKER), ['xn2', 'allow', '1'])).stdout;
      const daemonLog = daemonLogs.get(b)!().split('\n').filter((l) => l.includes('xn2')).join('\n');
      expect(out, daemonLog).toMatch(new RegExp(`ERROR .*run xn2 is still running, held by pid ${holder.pid} on .*node "node-a"`));
    } finally {
      holder.kill('SIGKILL');
    }
  }, 120_000);

  it('two nodes continuing the same run at once: exactly one wins, the other is told who holds it', async () => {
    const a = await node('node-a', pgc.socketUrl);
    const b = await node('node-b', pgc.socketUrl);
    const c = await node('node-c', pgc.socketUrl);
    for (let round = 0; round < 3; round++) {
      const id = `race${round}`;
      expect((await runScript(a, script(a, 'w.mjs', WORKER), [id, 'allow', '4'])).stdout).toContain('RESULT finished');
      await waitUploaded(a, pgc.url, id, 4);
      // Both hold their run open for a moment, so the loser meets a live holder, not a finished attempt.
      const racer = (t: TestEnv) => runScript(t, script(t, 'r.mjs', `
        try {
          const run = await logd.init({ project: 'xn', id: process.argv[2], resume: 'must' });
          run.log({ loss: 9 });
          await new Promise((r) => setTimeout(r, 1500));
          console.log('RESULT', (await run.finish()).state);
        } catch (e) {
          console.log('ERROR', e.message);
        }
      `), [id]);
      const procs = [racer(b), racer(c)];
      const outs = (await Promise.all(procs)).map((r) => r.stdout);
      const won = outs.filter((o) => o.includes('RESULT finished'));
      const lost = outs.filter((o) => o.includes('ERROR'));
      expect(won, outs.join('\n')).toHaveLength(1);
      expect(lost, outs.join('\n')).toHaveLength(1);
      const winner = procs[outs.indexOf(won[0])].pid;
      expect(lost[0]).toMatch(new RegExp(`run ${id} is still running, held by pid ${winner} on .*node "node-[bc]"`));
      const shown = await waitUploaded(a, pgc.url, id, 5);
      expect(shown.metadata.attempts).toHaveLength(2);
      expect((await rawRows(a, id, pgc.url)).map((r) => r.loss)).toEqual([0, 1, 2, 3, 9]);
    }
  }, 240_000);
});
