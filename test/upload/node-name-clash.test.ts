// Issue 32 item 5: two daemons given the same LOGD_NODE, each with its own run
// of one id. Before: the second copy was never uploaded and nothing said so;
// when it was the longer copy its daemon showed `uploading`, a backlog that
// never shrank and `lastError: null` for ever (when shorter, backlog 0). Now
// the store keeps, per run, which local store uploads it: the second daemon is
// refused the run, says so once in its log and in `logd status` (what to do:
// give each node its own LOGD_NODE), and leaves its copy local; the first
// copy in the store is untouched. Real daemons, one real PostgreSQL.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { pgUnavailable, startPg, type PgCluster } from '../pg/cluster.js';
import { cli, cliJson, runScript, script, startDaemon, waitUntil, type TestEnv } from '../helpers.js';
import { nodeEnv, rawRows, waitUploaded } from './helpers.js';

const why = pgUnavailable();
let pgc: PgCluster;
let envs: TestEnv[] = [];

const TRAINER = `
  const [id, n] = process.argv.slice(2);
  const run = await logd.init({ project: 'clash', id });
  for (let s = 0; s < Number(n); s++) run.log({ loss: s, copy: Number(n) }, { step: s });
  console.log('done ' + (await run.finish()).state);
`;

describe.skipIf(why !== null)(`a node name given to two daemons${why ? ` (skipped: ${why})` : ''}`, () => {
  beforeAll(async () => {
    pgc = await startPg();
  });
  afterAll(() => pgc?.destroy());
  afterEach(async () => {
    for (const t of envs.splice(0)) await t.cleanup();
  });

  for (const second of ['longer', 'shorter'] as const) {
    it(`the second daemon's copy of a run id (${second}) is refused, said once in its log and in logd status, and kept local`, async () => {
      const a = nodeEnv('same-node', pgc.socketUrl, { LOGD_IDLE_TIMEOUT_MS: '600000' });
      const b = nodeEnv('same-node', pgc.socketUrl, { LOGD_IDLE_TIMEOUT_MS: '600000' });
      envs.push(a, b);
      const id = `clash${second}`;
      await startDaemon(a);
      const ra = await runScript(a, script(a, 't.mjs', TRAINER), [id, '1000']);
      expect(ra.stdout, ra.stderr).toContain('done finished');
      await waitUploaded(a, pgc.url, id, 1000);

      const db = await startDaemon(b);
      const n = second === 'longer' ? 3000 : 500;
      const rb = await runScript(b, script(b, 't.mjs', TRAINER), [id, String(n)]);
      expect(rb.stdout, rb.stderr).toContain('done finished');
      await waitUntil(async () => ((await cliJson(b, ['status'])).upload?.leftLocal ?? []).some((x: { run: string }) => x.run === id), 30_000,
        `daemon B to say that run ${id} stays local: ${db.stderr().slice(-600)}`);
      const st = await cliJson(b, ['status']);
      const left = st.upload.leftLocal.find((x: { run: string }) => x.run === id);
      expect(left.why).toMatch(/another daemon that was given the same node name \("same-node"\).*give each node its own LOGD_NODE/);
      expect(st.upload.lastError).toBeNull(); // the store works: this is about one run, not the uploader
      expect(st.upload.backlog.runs).toBe(0); // nothing pretends to be on its way
      const text = (await cli(b, ['status'])).stdout;
      expect(text).toMatch(new RegExp(`LEFT LOCAL, not uploaded \\(1 run\\(s\\)\\):\\n\\s+${id}: `));
      // Said once in B's log, however many passes the uploader made.
      await new Promise((r) => setTimeout(r, 3000));
      expect(db.stderr().match(new RegExp(`upload: run ${id} is in the shared store already, uploaded by another daemon`, 'g')) ?? []).toHaveLength(1);

      // The store still holds A's copy, whole and unmixed; B keeps its own locally.
      const shared = await rawRows(a, id, pgc.url, ['--keys', 'copy']);
      expect(shared).toHaveLength(1000);
      expect(shared.every((r) => r.copy === 1000)).toBe(true);
      expect((await rawRows(b, id, undefined, ['--keys', 'copy']))).toHaveLength(n);
    }, 180_000);
  }
});
