// Issue 19: a run continued (init({ resume })) after it was uploaded whole
// reaches the shared store again: one run, every row of both attempts exactly
// once, its attempts in its metadata.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { pgUnavailable, startPg, type PgCluster } from '../pg/cluster.js';
import { runScript, script, startDaemon, killDaemon, type TestEnv } from '../helpers.js';
import { nodeEnv, rawRows, waitUploaded, reading } from './helpers.js';
import { exportJsonl } from '../helpers.js';

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

  it('rewound (resumeFrom) after it was uploaded: the shared store reads the latest timeline, and every attempt with --all-attempts', async () => {
    t = nodeEnv('node-a', pgc.socketUrl, { LOGD_IDLE_TIMEOUT_MS: '60000' });
    await startDaemon(t);
    const w = script(t, 'w.mjs', `
      const [from, first, last, offset] = process.argv.slice(2).map(Number);
      const run = await logd.init({ project: 'up', id: 'rw1', ...(from >= 0 ? { resumeFrom: { step: from } } : {}) });
      for (let s = first; s <= last; s++) run.log({ loss: s + offset }, { step: s });
      console.log((await run.finish()).state);
    `);
    expect((await runScript(t, w, ['-1', '0', '10', '0'])).stdout).toContain('finished');
    await waitUploaded(t, pgc.url, 'rw1', 11);
    expect((await runScript(t, w, ['5', '6', '8', '100'])).stdout).toContain('finished');
    const shown = await waitUploaded(t, pgc.url, 'rw1', 9); // the latest timeline: 14 rows stored, 5 superseded
    expect(shown.metadata.attempts.map((a: any) => a.resumedFromStep)).toEqual([undefined, 5]);
    const shared = reading(t, pgc.url);
    const rows = await exportJsonl(shared, 'rw1');
    expect(rows.map((r) => [r._step, r.loss])).toEqual([[0, 0], [1, 1], [2, 2], [3, 3], [4, 4], [5, 5], [6, 106], [7, 107], [8, 108]]);
    const all = await exportJsonl(shared, 'rw1', ['--all-attempts']);
    expect(all.filter((r) => r._superseded).map((r) => [r._step, r._attempt])).toEqual([[6, 1], [7, 1], [8, 1], [9, 1], [10, 1]]);
    expect(shown.metadata.supersededRows).toBe(5);
  });
});
