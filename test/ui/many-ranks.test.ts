// A group of 512 ranks on the group page (issue 36, scale), in a real Chromium
// on a real daemon: a page of 64 rank rows (the crashed ones first) until
// "show all", charts drawn as the mean with its band from the aggregate alone
// (no rank's line travels), the health table paged too. And the paging rules
// alone (web/many-ranks.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeEnv, script, runScript, type TestEnv } from '../helpers.js';
import { getJson, dashboardFor, type UiProcess } from './helpers.js';
import { chromiumMissing } from './browser.js';
import { shownRows, slowest } from '../../web/many-ranks.js';

const RANKS = 512;
const CRASHED = [300, 511];
const missing = chromiumMissing();
let t: TestEnv;
let ui: UiProcess;
let dash: Awaited<ReturnType<typeof dashboardFor>>;

describe('paging hundreds of ranks', () => {
  it('shows every row up to the limit; past it, the ones picked first, then the rest in order', () => {
    const xs = Array.from({ length: 10 }, (_, i) => i);
    expect(shownRows(xs, 20, false)).toEqual(xs);
    expect(shownRows(xs, 4, false, (x) => x === 7 || x === 9)).toEqual([0, 1, 7, 9]);
    expect(shownRows(xs, 4, true)).toEqual(xs);
    expect(slowest([{ r: 3 }, { r: NaN }, { r: 1 }, { r: 2 }], 2, (x) => x.r)).toEqual([{ r: 1 }, { r: 2 }]);
  });
});

describe.skipIf(missing !== null)(`a group of ${RANKS} ranks on the group page${missing ? ` (skipped: ${missing})` : ''}`, () => {
  beforeAll(async () => {
    t = makeEnv();
    // One process plays every rank in turn (the client reads RANK at init).
    const file = script(t, 'ranks.mjs', `
      const crashed = new Set(${JSON.stringify(CRASHED)});
      for (let rank = 0; rank < ${RANKS}; rank++) {
        process.env.RANK = String(rank);
        process.env.WORLD_SIZE = '${RANKS}';
        const run = await logd.init({ project: 'big', name: 'rank' + rank, group: 'big-job', quiet: true });
        for (let step = 0; step < 20; step++) run.log({ loss: 1 / (step + 1) + rank / 10000 }, { step });
        await run.finish({ exitCode: crashed.has(rank) ? 1 : 0 });
      }
      console.log('done');
    `);
    const r = await runScript(t, file, [], {}, 240_000);
    expect(r.exitCode, r.stderr).toBe(0);
    dash = await dashboardFor(t);
    ({ ui } = dash);
  }, 300_000);
  afterAll(async () => {
    await dash?.close();
    await t?.cleanup();
  });

  it('64 rank rows, the crashed first, until "show all"; one mean with its band per chart, from the aggregate alone', async () => {
    const agg = await getJson(ui, '/api/groups/big-job?keys=loss&aggregate=1');
    expect(agg.status, JSON.stringify(agg.body).slice(0, 300)).toBe(200);
    expect(agg.body.runs).toHaveLength(RANKS);
    expect(agg.body.series.loss.runs).toEqual({});
    expect(agg.body.series.loss.aggregate.step).toHaveLength(20);
    expect(agg.body.series.loss.aggregate.max[0] - agg.body.series.loss.aggregate.min[0]).toBeCloseTo((RANKS - 1) / 10000, 9);
    const full = await getJson(ui, '/api/groups/big-job?keys=loss');
    // Every rank's line is 512 series; the aggregate one.
    expect(Object.keys(full.body.series.loss.runs)).toHaveLength(RANKS);
    expect(JSON.stringify(agg.body.series).length * 100).toBeLessThan(JSON.stringify(full.body.series).length);

    const page = await dash.open('/groups/big-job');
    await page.locator('#group-runs tbody tr.run').first().waitFor({ timeout: 60_000 });
    expect(await page.locator('#group-runs tbody tr.run').count()).toBe(64);
    const names = await page.locator('#group-runs tbody tr.run td:nth-child(2)').allTextContents();
    for (const c of CRASHED) expect(names).toContain(`rank${c}`);
    expect(await page.locator('#group-more').textContent()).toContain(`64 of ${RANKS} ranks shown`);
    const chart = page.locator('.chart[data-key="loss"]');
    await chart.scrollIntoViewIfNeeded();
    await chart.locator('.u-legend').waitFor({ timeout: 60_000 });
    expect(await chart.getAttribute('data-mode')).toBe('band');
    expect(await chart.locator('.u-legend .u-series .u-label').allTextContents()).toEqual(['step', `mean of ${RANKS}`, `mean of ${RANKS} max`, `mean of ${RANKS} min`]);
    // The health table is paged as well.
    const healthRows = await page.locator('tr.rank-health').count();
    expect(healthRows).toBeLessThanOrEqual(64);
    await page.locator('#group-show-all').click();
    expect(await page.locator('#group-runs tbody tr.run').count()).toBe(RANKS);
    await page.close();
  });
});
