// Issue 19, across nodes: a run started on node A and continued on node B
// (init({ id, resume })), whose daemon has no local copy and takes the run
// from the shared store, and on to a third node; and two nodes racing to
// continue the same run, the store deciding which one wins. Real daemons
// with their own data dirs and LOGD_NODE, one real PostgreSQL.
//
// Under load nothing here may hang on a fixed sleep: a process that must
// hold a run open holds it until the test lets it go (or kills it), and the
// claim's and the client's deadlines are generous (GENEROUS), because what
// is tested is who wins and what the store ends up with, not latency; the
// refusals of a claim that runs out of time are tested in takeover.test.ts.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { pgUnavailable, startPg, type PgCluster } from '../pg/cluster.js';
import { execa } from 'execa';
import { CLI, runScript, script, spawnScript, startDaemon, killDaemon, waitUntil, type TestEnv } from '../helpers.js';
import { GENEROUS, exited, nodeEnv, rawRows, reading, waitUploaded, storeJson, storeListed } from './helpers.js';

const why = pgUnavailable();
let pgc: PgCluster;
let envs: TestEnv[] = [];
const daemonLogs = new Map<TestEnv, () => string>();

async function node(name: string, url: string | null): Promise<TestEnv> {
  const t = nodeEnv(name, url, { LOGD_IDLE_TIMEOUT_MS: '600000', ...GENEROUS });
  envs.push(t);
  daemonLogs.set(t, (await startDaemon(t)).stderr);
  return t;
}

/** A worker, with room for a loaded machine (the default 60 s kills it). */
const work = (t: TestEnv, file: string, args: string[]) => runScript(t, file, args, {}, 180_000);
const UPLOADED_MS = 180_000;

const WORKER = `
  const [id, resume, n] = process.argv.slice(2);
  try {
    const run = await logd.init({ project: 'xn', id, resume, config: { node: process.env.LOGD_NODE } });
    const node = { 'node-a': 1, 'node-b': 2, 'node-c': 3 }[process.env.LOGD_NODE];
    for (let i = 0; i < Number(n); i++) run.log({ loss: i, node });
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
    const out = (await work(t, script(t, 'w.mjs', WORKER), ['nowhere1', 'must', '1'])).stdout;
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
    expect((await work(a, script(a, 'w.mjs', WORKER), ['xn1', 'allow', '5'])).stdout).toContain('RESULT finished');
    await waitUploaded(a, pgc.url, 'xn1', 5, UPLOADED_MS);
    const cont = (await work(b, script(b, 'w.mjs', WORKER), ['xn1', 'must', '3'])).stdout;
    expect(cont).toContain('RESULT finished');
    const shown = await waitUploaded(b, pgc.url, 'xn1', 8, UPLOADED_MS);
    expect(shown.metadata.attempts.map((x: any) => [x.n, x.fromStep, x.state])).toEqual([[1, 0, 'finished'], [2, 5, 'finished']]);
    expect(shown.metadata.fromStore.node).toBe('node-a');
    expect(shown.config).toEqual({ node: 'node-b' }); // A's config, merged with B's init
    const rows = await rawRows(b, 'xn1', pgc.url);
    expect(rows.map((r) => [r._step, r.loss, r.node])).toEqual([[0, 0, 1], [1, 1, 1], [2, 2, 1], [3, 3, 1], [4, 4, 1], [5, 0, 2], [6, 1, 2], [7, 2, 2]]);
    const listed = await storeJson<any[]>(b, pgc.url, ['runs']);
    expect(listed.filter((r) => r.id === 'xn1')).toHaveLength(1);
  }, 300_000);

  it('started on A, continued on B, then on C: one run, three attempts, steps continuous, every row and line once, in order', async () => {
    const a = await node('node-a', pgc.socketUrl);
    const b = await node('node-b', pgc.socketUrl);
    const c = await node('node-c', pgc.socketUrl);
    // Each node prints a line to its console too: each continuation's output is stored after the one before.
    const chain = (t: TestEnv) => script(t, 'chain.mjs', `
      const [id, resume, n] = process.argv.slice(2);
      const run = await logd.init({ project: 'xn', id, resume, console: true });
      const node = { 'node-a': 1, 'node-b': 2, 'node-c': 3 }[process.env.LOGD_NODE];
      console.log('on', process.env.LOGD_NODE);
      for (let i = 0; i < Number(n); i++) run.log({ loss: i, node });
      console.log('RESULT', (await run.finish()).state);
    `);
    const steps: Array<[TestEnv, string, number]> = [[a, 'allow', 5], [b, 'must', 3], [c, 'must', 4]];
    let total = 0;
    for (const [t, resume, n] of steps) {
      const out = await work(t, chain(t), ['xn3', resume, String(n)]);
      expect(out.stdout, out.stderr).toContain('RESULT finished');
      total += n;
      await waitUploaded(t, pgc.url, 'xn3', total, UPLOADED_MS);
    }
    const shown = await storeJson<any>(c, pgc.url, ['show', 'xn3', '--rows', '0']);
    expect(shown.state).toBe('finished');
    expect(shown.historyRows).toBe(12);
    expect(shown.metadata.attempts.map((x: any) => [x.n, x.fromStep, x.state])).toEqual([[1, 0, 'finished'], [2, 5, 'finished'], [3, 8, 'finished']]);
    expect(shown.metadata.fromStore.node).toBe('node-b'); // the node C took it from
    const rows = await rawRows(c, 'xn3', pgc.url);
    expect(rows.map((r) => r._step)).toEqual([...Array(12).keys()]);
    expect(rows.map((r) => [r.loss, r.node])).toEqual([
      [0, 1], [1, 1], [2, 1], [3, 1], [4, 1], [0, 2], [1, 2], [2, 2], [0, 3], [1, 3], [2, 3], [3, 3],
    ]);
    // Counted in PostgreSQL: every row once, one cursor (C's, done), one listing.
    const q = (sql: string) => pgc.psql(sql, 'logd').trim();
    expect(q("SELECT count(*), count(DISTINCT s) FROM logd_rows, unnest(steps) s WHERE run_id = 'xn3' AND stream = 0")).toBe('12|12');
    await waitUntil(() => q("SELECT node, done FROM logd_cursors WHERE run_id = 'xn3'") === 'node-c|t', 120_000, "C's cursor of xn3 done");
    expect((await storeJson<any[]>(c, pgc.url, ['runs'])).filter((r) => r.id === 'xn3')).toHaveLength(1);
    const logs = await execa(process.execPath, [CLI, 'logs', 'xn3', '--json'], { env: reading(c, pgc.url).env, timeout: 60_000 });
    const lines = logs.stdout.trim().split('\n').map((l) => (JSON.parse(l) as { line: string }).line.trim());
    expect(lines.filter((l) => l.startsWith('on '))).toEqual(['on node-a', 'on node-b', 'on node-c']);
  }, 600_000);

  it('resume=must of an id neither node nor store has: NOT_FOUND naming both', async () => {
    const b = await node('node-b', pgc.socketUrl);
    const out = (await work(b, script(b, 'w.mjs', WORKER), ['nowhere2', 'must', '1'])).stdout;
    expect(out).toMatch(/ERROR .*neither in this node's store .* nor in the shared store/);
  });

  it('a run still running on A is refused on B, naming its holder', async () => {
    const a = await node('node-a', pgc.socketUrl);
    const b = await node('node-b', pgc.socketUrl);
    // The holder keeps its run open until the test kills it, so B meets a live holder however slow the steps
    // below are under load (a fixed 60 s sleep here assumed they took less: past it, B continued the run).
    const hold = script(a, 'hold.mjs', `
      const run = await logd.init({ project: 'xn', id: 'xn2' });
      run.log({ loss: 1 });
      console.log('READY');
      setInterval(() => {}, 1000);
    `);
    const holder = spawnScript(a, hold);
    try {
      await waitUntil(() => holder.lines.includes('READY') || holder.exitCode !== null, 120_000, 'the holder to open run xn2');
      expect(holder.lines).toContain('READY');
      // The store sees the run once A uploaded its first slice.
      await waitUntil(() => storeListed(b, pgc.url, 'xn2'), 120_000, 'run xn2 in the store');
      const out = (await work(b, script(b, 'w.mjs', WORKER), ['xn2', 'allow', '1'])).stdout;
      const daemonLog = daemonLogs.get(b)!().split('\n').filter((l) => l.includes('xn2')).join('\n');
      expect(out, daemonLog).toMatch(new RegExp(`ERROR .*run xn2 is still running, held by pid ${holder.pid} on .*node "node-a"`));
      expect(holder.exitCode, 'the holder still holds the run').toBeNull();
    } finally {
      holder.kill('SIGKILL');
    }
  }, 300_000);

  it('two nodes continuing the same run at once: exactly one wins, the other is told who holds it', async () => {
    const a = await node('node-a', pgc.socketUrl);
    const b = await node('node-b', pgc.socketUrl);
    const c = await node('node-c', pgc.socketUrl);
    for (let round = 0; round < 3; round++) {
      const id = `race${round}`;
      expect((await work(a, script(a, 'w.mjs', WORKER), [id, 'allow', '4'])).stdout).toContain('RESULT finished');
      await waitUploaded(a, pgc.url, id, 4, UPLOADED_MS);
      // The winner holds its run open until both have their answer, so the loser meets a live holder, not a
      // finished attempt, however long the loser takes.
      const release = path.join(a.dir, `release-${id}`);
      const racer = (t: TestEnv) => spawnScript(t, script(t, 'r.mjs', `
        import fs from 'node:fs';
        try {
          const run = await logd.init({ project: 'xn', id: process.argv[2], resume: 'must' });
          run.log({ loss: 9 });
          console.log('WON');
          while (!fs.existsSync(process.argv[3])) await new Promise((r) => setTimeout(r, 50));
          console.log('RESULT', (await run.finish()).state);
        } catch (e) {
          console.log('ERROR', e.message);
        }
      `), [id, release]);
      const procs = [racer(b), racer(c)];
      const answered = () => procs.filter((p) => p.lines.some((l) => l === 'WON' || l.startsWith('ERROR')) || p.exitCode !== null).length;
      await waitUntil(() => answered() === 2, 180_000, `both racers for ${id} to have their answer`);
      fs.writeFileSync(release, '');
      await Promise.all(procs.map((p) => exited(p, 180_000)));
      const outs = procs.map((p) => p.lines.join('\n'));
      const won = outs.filter((o) => o.includes('RESULT finished'));
      const lost = outs.filter((o) => o.includes('ERROR'));
      expect(won, outs.join('\n')).toHaveLength(1);
      expect(lost, outs.join('\n')).toHaveLength(1);
      const winner = procs[outs.indexOf(won[0])].pid;
      expect(lost[0]).toMatch(new RegExp(`run ${id} is still running, held by pid ${winner} on .*node "node-[bc]"`));
      const shown = await waitUploaded(a, pgc.url, id, 5, UPLOADED_MS);
      expect(shown.metadata.attempts).toHaveLength(2);
      expect((await rawRows(a, id, pgc.url)).map((r) => r.loss)).toEqual([0, 1, 2, 3, 9]);
    }
  }, 240_000);
});
