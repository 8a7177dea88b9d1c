// Issue 19, across nodes, when the node that holds a run is gone: node A's
// daemon and trainer are killed (SIGKILL) with the run open, so nothing ever
// releases it. Node B is refused the run while A's last upload is younger
// than LOGD_TAKEOVER_AFTER_S, and takes it over after that; the store shows
// one run, A's attempt crashed ("taken over") and B's, every row once. When
// A's daemon comes back it is refused the run and leaves the store as it
// was. And claims slowed down as a loaded machine slows them: one that meets
// the run's row locked (its node uploading it) is told to try again, so
// resume='allow' continues the run instead of creating a second copy here;
// one that runs out of time after writing its continuation log removes it.
// And a node that lives keeps its run: a trainer quiet for twice the lease is
// not taken over, its daemon's heartbeat keeping the store's row young.
// Real daemons, one real PostgreSQL.
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { pgUnavailable, startPg, type PgCluster } from '../pg/cluster.js';
import { alive, cliJson, daemonPids, runScript, script, spawnScript, startDaemon, killDaemon, waitUntil, type TestEnv } from '../helpers.js';
import { exited, GENEROUS, nodeEnv, rawRows, storeJson, waitUploaded } from './helpers.js';

const why = pgUnavailable();
const LEASE_S = 5;
let pgc: PgCluster;
let envs: TestEnv[] = [];

async function node(name: string, extra: Record<string, string> = {}): Promise<{ t: TestEnv; stderr: () => string }> {
  const t = nodeEnv(name, pgc.socketUrl, { LOGD_IDLE_TIMEOUT_MS: '600000', ...GENEROUS, ...extra });
  envs.push(t);
  return { t, stderr: (await startDaemon(t)).stderr };
}

/** One row of SQL output (psql -At: columns joined by |). */
const q = (sql: string) => pgc.psql(sql, 'logd').trim();

/** Logs a row every 20 ms until killed: its node uploads a slice every pass, so its last upload is always recent. */
const HOLDER = `
  const run = await logd.init({ project: 'xn', id: process.argv[2] });
  console.log('OPEN');
  for (let i = 0; ; i++) {
    run.log({ loss: i, node: 1 });
    await new Promise((r) => setTimeout(r, 20));
  }
`;

/**
 * Waits for a go file (so that it is started, and its client loaded, before
 * the test's clock matters), then asks for the run with resume='must' every
 * 250 ms until it gets it, printing each refusal with the ms since go; then
 * logs N rows and finishes.
 */
const TAKER = `
  import fs from 'node:fs';
  const [id, go, n] = process.argv.slice(2);
  console.log('WAITING');
  while (!fs.existsSync(go)) await new Promise((r) => setTimeout(r, 20));
  const t0 = Date.now();
  for (;;) {
    let run;
    try {
      run = await logd.init({ project: 'xn', id, resume: 'must' });
    } catch (e) {
      console.log('REFUSED', Date.now() - t0, e.message);
      if (Date.now() - t0 > 240_000) process.exit(1);
      await new Promise((r) => setTimeout(r, 250));
      continue;
    }
    console.log('TOOK', Date.now() - t0);
    for (let i = 0; i < Number(n); i++) run.log({ loss: i, node: 2 });
    console.log('RESULT', (await run.finish()).state);
    break;
  }
`;

beforeAll(async () => {
  if (why === null) pgc = await startPg();
});
afterAll(() => pgc?.destroy());

describe.skipIf(why !== null)(`a run whose node is gone${why ? ` (skipped: ${why})` : ''}`, () => {
  afterEach(async () => {
    for (const t of envs) await killDaemon(t.dir);
    for (const t of envs) await t.cleanup();
    envs = [];
  });

  it(`A killed with its run open: B is refused within LOGD_TAKEOVER_AFTER_S and takes it over after; one run, both attempts, every row once; A back later is refused and changes nothing`, async () => {
    const { t: a } = await node('node-a');
    const { t: b, stderr: bLog } = await node('node-b', { LOGD_TAKEOVER_AFTER_S: String(LEASE_S) });
    const M = 7;
    const holder = spawnScript(a, script(a, 'hold.mjs', HOLDER), ['tk1']);
    const go = path.join(b.dir, 'go');
    const taker = spawnScript(b, script(b, 'take.mjs', TAKER), ['tk1', go, String(M)]);
    try {
      // A has uploaded a good part of the run, and keeps uploading.
      await waitUntil(async () => {
        const s = await storeJson<any>(a, pgc.url, ['show', 'tk1', '--rows', '0']).catch(() => null);
        return s?.state === 'running' && s.historyRows >= 50;
      }, 180_000, 'run tk1 running in the store with 50 rows');
      await waitUntil(() => taker.lines.includes('WAITING') || taker.exitCode !== null, 120_000, 'the taker to be ready');

      // Node A is gone: its daemon first (it must not see its trainer die and end the run), then the trainer.
      const daemons = daemonPids(a.dir);
      expect(daemons).toHaveLength(1);
      for (const pid of daemons) process.kill(pid, 'SIGKILL');
      holder.kill('SIGKILL');
      await waitUntil(() => daemons.every((p) => !alive(p)) && holder.signalCode !== null, 60_000, "node A's processes to be gone");
      fs.writeFileSync(go, '');
      // A node uploads its live run's metadata with each slice, and that can count rows that were not durable
      // yet, so never came: made certain here (lastStep 1000 ahead; B is refused the run for seconds yet), the
      // new attempt must still follow the stored rows.
      q("UPDATE logd_runs SET metadata_json = jsonb_set(metadata_json::jsonb, '{lastStep}', to_jsonb((metadata_json::jsonb->>'lastStep')::int + 1000))::text WHERE id = 'tk1'");
      await exited(taker, 300_000);
      const lines = taker.lines;
      const log = `taker:\n${lines.join('\n')}\nnode B:\n${bLog().split('\n').filter((l) => l.includes('tk1')).join('\n')}`;
      expect(lines.at(-1), log).toBe('RESULT finished');

      // Refused while A's last upload was younger than the lease, naming A's trainer; then taken.
      const refused = lines.filter((l) => l.startsWith('REFUSED'));
      expect(refused.length, log).toBeGreaterThan(0);
      const held = new RegExp(`^REFUSED \\d+ .*run tk1 is still running, held by pid ${holder.pid} on .*\\(node "node-a"\\), its last upload (\\d+) s ago`);
      for (const r of refused) expect(r, log).toMatch(held);
      expect(Number(held.exec(refused[0])![1]), log).toBeLessThanOrEqual(LEASE_S);
      expect(lines.filter((l) => l.startsWith('TOOK')), log).toHaveLength(1);

      // The store: one run, A's attempt crashed (taken over, after the lease), B's finished; steps 0.. once each.
      await waitUntil(() => q("SELECT r.state, c.done FROM logd_runs r JOIN logd_cursors c ON c.run_id = r.id WHERE r.id = 'tk1'") === 'finished|t',
        180_000, 'run tk1 final and wholly uploaded by B');
      const shown = await storeJson<any>(b, pgc.url, ['show', 'tk1', '--rows', '0']);
      const [first, second] = shown.metadata.attempts;
      expect(shown.metadata.attempts).toHaveLength(2);
      expect([first.n, first.fromStep, first.state, second.n, second.state]).toEqual([1, 0, 'crashed', 2, 'finished']);
      const lateBy = /^node "node-a" stopped uploading \(its last upload (\d+) s ago\); taken over by node "node-b"$/.exec(first.reason);
      expect(lateBy, first.reason).not.toBeNull();
      expect(Number(lateBy![1])).toBeGreaterThanOrEqual(LEASE_S);
      const k = second.fromStep; // the rows of A's that the store holds: steps 0 .. k-1
      expect(k).toBeGreaterThanOrEqual(50);
      expect(shown.historyRows).toBe(k + M);
      const rows = await rawRows(b, 'tk1', pgc.url);
      expect(rows.map((r) => r._step)).toEqual([...Array(k + M).keys()]);
      expect(rows.map((r) => [r.loss, r.node])).toEqual([...[...Array(k).keys()].map((i) => [i, 1]), ...[...Array(M).keys()].map((i) => [i, 2])]);
      expect(q("SELECT count(*), count(DISTINCT s) FROM logd_rows, unnest(steps) s WHERE run_id = 'tk1' AND stream = 0")).toBe(`${k + M}|${k + M}`);
      expect((await storeJson<any[]>(b, pgc.url, ['runs'])).filter((r) => r.id === 'tk1')).toHaveLength(1);

      // A comes back: its daemon finds the run open, its trainer gone, ends it locally, and its uploader is refused
      // the run, saying it was taken over. The store is as B left it.
      /** What the store holds of tk1, table by table. */
      const stored = () => ({
        run: q("SELECT node, state, history_rows, metadata_json, summary_json FROM logd_runs WHERE id = 'tk1'"),
        cursor: q("SELECT node, log_offset, done FROM logd_cursors WHERE run_id = 'tk1'"),
        rows: q("SELECT count(*) FROM logd_rows WHERE run_id = 'tk1'"),
        values: q("SELECT count(*) FROM logd_values WHERE run_id = 'tk1'"),
        keys: q("SELECT count(*) FROM logd_keys WHERE run_id = 'tk1'"),
        writers: q("SELECT count(*) FROM logd_writers WHERE run_id = 'tk1'"),
      });
      const before = stored();
      const back = await startDaemon(a);
      await waitUntil(() => back.stderr().includes('upload: run tk1 was taken over from this node ("node-a") by node "node-b"'), 180_000,
        "A's uploader to say that tk1 was taken over");
      await waitUntil(async () => ['crashed', 'finished', 'killed'].includes((await cliJson<any>(a, ['show', 'tk1', '--rows', '0'])).state), 180_000,
        "A's copy of tk1 to be final");
      // A's uploader has looked at every run since (its status file is rewritten after each pass).
      const statusFile = path.join(a.dataDir, 'upload-status.json');
      const seen = fs.existsSync(statusFile) ? fs.statSync(statusFile).mtimeMs : 0;
      await waitUntil(() => fs.existsSync(statusFile) && fs.statSync(statusFile).mtimeMs > seen + 1000, 120_000, "A's uploader to make another pass");
      expect(stored()).toEqual(before);
      expect(back.stderr().match(/run tk1 was taken over/g)).toHaveLength(1); // said once, not every pass
      // A keeps its own copy: the rows the store has from it, and what it logged after its last upload.
      const local = await rawRows(a, 'tk1');
      expect(local.length).toBeGreaterThanOrEqual(k);
      expect(local.slice(0, k).map((r) => [r._step, r.loss])).toEqual(rows.slice(0, k).map((r) => [r._step, r.loss]));
    } finally {
      holder.kill('SIGKILL');
      taker.kill('SIGKILL');
    }
  }, 600_000);

  it("A's trainer alive but quiet for twice the lease: its daemon's heartbeat keeps the store's uploaded_at young, and B is refused the run", async () => {
    const lease = { LOGD_TAKEOVER_AFTER_S: String(LEASE_S) };
    const { t: a } = await node('node-a', lease);
    const { t: b } = await node('node-b', lease);
    // 20 rows, then nothing for as long as it lives (a long evaluation, a checkpoint, a hang).
    const holder = spawnScript(a, script(a, 'quiet.mjs', `
      const run = await logd.init({ project: 'xn', id: process.argv[2] });
      for (let i = 0; i < 20; i++) run.log({ loss: i });
      await run.flush(30000);
      console.log('QUIET');
      setInterval(() => {}, 1 << 30);
    `), ['qt1']);
    try {
      await waitUntil(async () => {
        const s = await storeJson<any>(a, pgc.url, ['show', 'qt1', '--rows', '0']).catch(() => null);
        return s?.state === 'running' && s.historyRows === 20;
      }, 180_000, 'run qt1 running in the store with its 20 rows');
      expect(holder.lines).toContain('QUIET');
      // Twice the lease with nothing logged: the row's age, sampled, stays under the lease.
      let oldest = 0;
      const until = Date.now() + 2 * LEASE_S * 1000;
      while (Date.now() < until) {
        oldest = Math.max(oldest, Number(q("SELECT extract(epoch FROM now() - uploaded_at) FROM logd_runs WHERE id = 'qt1'")));
        await new Promise((r) => setTimeout(r, 250));
      }
      expect(oldest).toBeLessThan(LEASE_S);
      expect(q("SELECT history_rows FROM logd_runs WHERE id = 'qt1'")).toBe('20'); // a heartbeat adds no rows
      // B asks for the run: still held by A's live trainer.
      const once = await runScript(b, script(b, 'once.mjs', `
        try {
          const run = await logd.init({ project: 'xn', id: 'qt1', resume: 'must' });
          console.log('TOOK');
          await run.finish();
        } catch (e) {
          console.log('REFUSED ' + e.message);
        }
      `), [], {}, 120_000);
      expect(once.stdout, once.stderr).toMatch(new RegExp(`^REFUSED .*run qt1 is still running, held by pid ${holder.pid} on .*\\(node "node-a"\\), its last upload \\d+ s ago`));
      expect(q("SELECT node, state FROM logd_runs WHERE id = 'qt1'")).toBe('node-a|running');
    } finally {
      holder.kill('SIGKILL');
    }
  }, 600_000);
});

/** init({ id, resume }), N rows, finish; prints RESULT <state> or ERROR <message>. */
function worker(t: TestEnv, id: string, n: number, resume: string, env: Record<string, string> = {}) {
  return spawnScript(t, script(t, `w-${id}-${n}.mjs`, `
    try {
      const run = await logd.init({ project: 'xn', id: '${id}', resume: '${resume}' });
      for (let i = 0; i < ${n}; i++) run.log({ loss: i, node: process.env.LOGD_NODE === 'node-a' ? 1 : 2 });
      console.log('RESULT', (await run.finish()).state);
    } catch (e) {
      console.log('ERROR', e.message);
    }
  `), [], env);
}

/** Run `id` logged on A (5 rows, finished) and wholly in the store. */
async function finishedOnA(a: TestEnv, id: string): Promise<void> {
  const first = worker(a, id, 5, 'allow');
  await exited(first, 180_000);
  expect(first.lines).toContain('RESULT finished');
  await waitUploaded(a, pgc.url, id, 5, 180_000);
}

describe.skipIf(why !== null)(`a claim slowed down${why ? ` (skipped: ${why})` : ''}`, () => {
  afterEach(async () => {
    for (const t of envs) await killDaemon(t.dir);
    for (const t of envs) await t.cleanup();
    envs = [];
  });

  it("a claim that meets the run's row locked past its wait is told to try again; resume='allow' then continues the run, no second copy", async () => {
    const { t: a } = await node('node-a');
    // B's claim gets 4 s in all, so its wait for the row lock ends after about 3 s.
    const { t: b, stderr: bLog } = await node('node-b', { LOGD_RESUME_STORE_TIMEOUT_MS: '4000' });
    await finishedOnA(a, 'lk1');

    // Node A's uploader, slowed down: a transaction holds the run's rows locked.
    const locker = new pg.Client({ connectionString: pgc.url });
    await locker.connect();
    let second: ReturnType<typeof worker> | null = null;
    try {
      await locker.query('BEGIN');
      await locker.query("SELECT 1 FROM logd_runs r JOIN logd_cursors c ON c.run_id = r.id WHERE r.id = 'lk1' FOR UPDATE OF r, c");
      second = worker(b, 'lk1', 3, 'allow');
      const gaveUp = 'run lk1 not taken from the shared store: run lk1 is in the shared store, and its row stayed locked';
      await waitUntil(() => bLog().includes(gaveUp) || second!.exitCode !== null, 120_000, "B's claim to give up waiting for the lock");
      expect(bLog()).toContain(gaveUp);
      await locker.query('COMMIT');
      await exited(second, 180_000);
    } finally {
      await locker.end().catch(() => {});
      second?.kill('SIGKILL');
    }
    const log = bLog().split('\n').filter((l) => l.includes('lk1')).join('\n');
    expect(second.lines, log).toContain('RESULT finished');
    expect(log).not.toContain('created on this node as a new run');
    const shown = await waitUploaded(b, pgc.url, 'lk1', 8, 180_000);
    expect(shown.metadata.attempts.map((x: any) => [x.n, x.fromStep, x.state])).toEqual([[1, 0, 'finished'], [2, 5, 'finished']]);
    expect((await rawRows(b, 'lk1', pgc.url)).map((r) => [r._step, r.node])).toEqual([[0, 1], [1, 1], [2, 1], [3, 1], [4, 1], [5, 2], [6, 2], [7, 2]]);
    await waitUntil(() => q("SELECT node, done FROM logd_cursors WHERE run_id = 'lk1'") === 'node-b|t', 120_000, "B's cursor of lk1 done");
  }, 600_000);

  it('a claim that runs out of time after writing its continuation log removes it: the next try asks the store again, no second copy', async () => {
    const { t: a } = await node('node-a');
    const { t: b, stderr: bLog } = await node('node-b', { LOGD_RESUME_STORE_TIMEOUT_MS: '4000' });
    await finishedOnA(a, 'sl1');
    // The claim's last statements, slowed past its deadline (as a loaded machine or a slow disk does): a trigger
    // that sleeps when a cursor moves to node B. B's continuation log is written by then.
    q(`CREATE FUNCTION logd_test_slow() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN IF NEW.node = 'node-b' AND OLD.node <> 'node-b' THEN PERFORM pg_sleep(8); END IF; RETURN NEW; END $$;
       CREATE TRIGGER logd_test_slow BEFORE UPDATE ON logd_cursors FOR EACH ROW EXECUTE FUNCTION logd_test_slow();`);
    try {
      // resume='must' with a short client budget (8 s), raising when it is spent: every try runs out of time.
      const slow = worker(b, 'sl1', 3, 'must', { LOGD_CALL_TIMEOUT_MS: '6000', LOGD_START_TIMEOUT_MS: '2000', LOGD_ON_ERROR: 'raise' });
      await exited(slow, 180_000);
      expect(slow.lines.join('\n')).toMatch(/^ERROR /);
    } finally {
      q('DROP TRIGGER logd_test_slow ON logd_cursors; DROP FUNCTION logd_test_slow();');
    }
    const removed = "server: run sl1: its claim in the shared store did not complete";
    expect(bLog()).toContain(removed);
    expect(q("SELECT node FROM logd_cursors WHERE run_id = 'sl1'")).toBe('node-a');
    // Nothing of it was kept here, so the next try takes the run from the store, as if the slow ones never were.
    const next = worker(b, 'sl1', 3, 'must');
    await exited(next, 180_000);
    const log = bLog().split('\n').filter((l) => l.includes('sl1')).join('\n');
    expect(next.lines, log).toContain('RESULT finished');
    const shown = await waitUploaded(b, pgc.url, 'sl1', 8, 180_000);
    expect(shown.metadata.attempts.map((x: any) => [x.n, x.fromStep, x.state])).toEqual([[1, 0, 'finished'], [2, 5, 'finished']]);
    expect((await rawRows(b, 'sl1', pgc.url)).map((r) => [r._step, r.node])).toEqual([[0, 1], [1, 1], [2, 1], [3, 1], [4, 1], [5, 2], [6, 2], [7, 2]]);
  }, 600_000);
});
