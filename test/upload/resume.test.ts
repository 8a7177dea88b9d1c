// Issue 19: a run continued (init({ resume })) after it was uploaded whole
// reaches the shared store again: one run, every row of both attempts exactly
// once, its attempts in its metadata.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { pgUnavailable, startPg, type PgCluster } from '../pg/cluster.js';
import { runScript, script, startDaemon, killDaemon, type TestEnv } from '../helpers.js';
import { nodeEnv, rawRows, waitUploaded } from './helpers.js';

const why = pgUnavailable();
let pgc: PgCluster;
let t: TestEnv | undefined;

describe.skipIf(why !== null)(`a continued run in the shared store${why ? ` (skipped: ${why})` : ''}`, () => {
  beforeAll(async () => {
    pgc = await startPg();
  });
  afterAll(() => pgc?.destroy());
  afterEach(async () => {
    if (t) await killDaemon(t.dir);
    await t?.cleanup();
    t = undefined;
  });

  it('uploaded whole, continued, uploaded again: one run, both attempts, every row once', async () => {
    t = nodeEnv('node-a', pgc.socketUrl, { LOGD_IDLE_TIMEOUT_MS: '60000' });
    await startDaemon(t);
    const w = script(t, 'w.mjs', `
      const run = await logd.init({ project: 'up', id: 'cont1', resume: 'allow' });
      for (let i = 0; i < Number(process.argv[2]); i++) run.log({ loss: i });
      console.log((await run.finish()).state);
    `);
    expect((await runScript(t, w, ['5'])).stdout).toContain('finished');
    await waitUploaded(t, pgc.url, 'cont1', 5);
    expect((await runScript(t, w, ['3'])).stdout).toContain('finished');
    const shown = await waitUploaded(t, pgc.url, 'cont1', 8);
    expect(shown.metadata.attempts.map((a: any) => a.state)).toEqual(['finished', 'finished']);
    const rows = await rawRows(t, 'cont1', pgc.url);
    expect(rows.map((r) => r._step)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
  });
});
