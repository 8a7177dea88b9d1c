// The dashboard in a real Chromium on a real daemon: what a person sees.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { makeEnv, script, spawnScript, waitUntil, type TestEnv } from '../helpers.js';
import { startUi, logRuns, type UiProcess } from './helpers.js';
import { chromiumMissing, launchChromium, type Chromium } from './browser.js';

const missing = chromiumMissing();
const HOSTILE = `<script>window.__pwned=1</script> "q" 'a' & <img src=x onerror="window.__pwned=2">`;
const RTL = 'تجربة \u202Erun\u202C שלום';

let t: TestEnv;
let ui: UiProcess;
let chrome: Chromium;

/** A worker that logs `v = step` every 100 ms until killed, and from step 30 on also `late/metric`; prints its run id. */
function endlessWorker(t: TestEnv): string {
  return script(t, 'endless.mjs', `
    const run = await logd.init({ project: 'live', name: process.argv[2], group: process.argv[3] || undefined });
    console.log('run ' + run.id);
    for (let step = 0; ; step++) {
      run.log({ v: step, 'loss/train': 1 / (step + 1), ...(step >= 30 ? { 'late/metric': step } : {}) }, { step });
      await run.flush();
      await new Promise((r) => setTimeout(r, 100));
    }
  `);
}

async function openPage(path: string): Promise<Page> {
  const page = await chrome.context.newPage();
  page.on('pageerror', (e) => process.stderr.write(`[page error] ${e.message}\n`));
  await page.goto(ui.base + path);
  return page;
}

describe.skipIf(missing !== null)(`dashboard in Chromium${missing ? ` (skipped: ${missing})` : ''}`, () => {
  beforeAll(async () => {
    t = makeEnv();
    await logRuns(t, [
      { project: 'a/b', name: HOSTILE, steps: 20, row: '{ "x/<b>y</b>": step }' },
      { project: 'a/b', name: RTL, steps: 20, row: '{ x: step }' },
      ...[0, 1, 2, 3].map((rank) => ({ project: 'ddp', name: `ddp-r${rank}`, group: `g/ddp ${HOSTILE}`, rank, steps: 100, row: '{ loss: 1 / (step + 1) + rank, lr: 0.1 }' })),
    ]);
    ui = await startUi(t);
    chrome = await launchChromium();
    // The first visit carries the token; the browser keeps it (a cookie).
    const first = await chrome.context.newPage();
    await first.goto(ui.url);
    expect(new URL(first.url()).search).toBe('');
    await first.close();
  });
  afterAll(async () => {
    await chrome?.close();
    await ui?.stop();
    await t?.cleanup();
  });

  it('the runs list shows the runs; names with <script>, quotes, / and RTL are text', async () => {
    const page = await openPage('/');
    await page.locator('tr.group-row').first().waitFor({ timeout: 30_000 });
    const names = await page.locator('tr.run td.name a').allTextContents();
    expect(names).toEqual(expect.arrayContaining([HOSTILE, RTL]));
    expect(await page.locator('td', { hasText: 'a/b' }).count()).toBe(2);
    // The group row folds its four ranks; opening it shows them.
    const group = page.locator('tr.group-row');
    expect(await group.locator('td.name a').textContent()).toBe(`g/ddp ${HOSTILE}`);
    await group.locator('button.toggle').click();
    expect(await page.locator('tr.run.in-group').count()).toBe(4);
    expect(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
    expect(await page.locator('img').count()).toBe(0);
    expect(await page.locator('script').count()).toBe(1);
    // Search goes to the server and narrows the list.
    await page.fill('#search', 'שלום');
    await waitUntil(async () => (await page.locator('tr.run').count()) === 1, 15_000, 'the search to narrow the list');
    await page.close();
  });

  it('the group page draws the mean with its band (ranks overlap), or one series per rank, labelled by rank', async () => {
    const page = await openPage(`/groups/${encodeURIComponent(`g/ddp ${HOSTILE}`)}`);
    const chart = page.locator('.chart[data-key="loss"]');
    await chart.locator('canvas').waitFor({ timeout: 30_000 });
    expect(await chart.getAttribute('data-series')).toBe('1');
    expect((await chart.locator('.u-legend .u-series .u-label').allTextContents()).slice(1)).toEqual(['mean of 4', 'mean of 4 max', 'mean of 4 min']);
    expect(await page.locator('#group-name').textContent()).toBe(`g/ddp ${HOSTILE}`);
    await page.click('#mode-ranks');
    await waitUntil(async () => (await chart.getAttribute('data-series')) === '4', 15_000, 'one series per rank');
    const labels = await chart.locator('.u-legend .u-series .u-label').allTextContents();
    expect(labels.slice(1)).toEqual(['rank 0', 'rank 1', 'rank 2', 'rank 3']);
    expect(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
    await page.close();
  });

  it('runs selected in the list open side by side on the compare page', async () => {
    const page = await openPage('/?project=a%2Fb');
    await page.locator('tr.run').first().waitFor({ timeout: 30_000 });
    expect(await page.locator('tr.run').count()).toBe(2);
    for (const box of await page.locator('tr.run input[type=checkbox]').all()) await box.check();
    await page.click('#compare');
    await page.waitForURL(/\/compare\?runs=/);
    const chart = page.locator('.chart[data-key="x"]');
    await chart.locator('canvas').waitFor({ timeout: 30_000 });
    // x is logged by one run only; "x/<b>y</b>" by the other: each chart shows who logged it.
    expect(await chart.getAttribute('data-series')).toBe('1');
    expect((await chart.locator('.u-legend .u-series .u-label').allTextContents()).slice(1)).toEqual([RTL]);
    const other = page.locator('.chart[data-key="x/<b>y</b>"]');
    await other.locator('canvas').waitFor({ timeout: 30_000 });
    expect((await other.locator('.u-legend .u-series .u-label').allTextContents()).slice(1)).toEqual([HOSTILE]);
    expect(await page.locator('b').count()).toBe(0);
    await page.close();
  });

  it('chart controls: smoothing adds the smoothed line over the raw one, log scale and x = time redraw, all kept in the URL', async () => {
    const list = await openPage('/?project=a%2Fb');
    await list.locator('tr.run').first().waitFor({ timeout: 30_000 });
    const href = await list.locator('tr.run td.name a', { hasText: 'שלום' }).getAttribute('href');
    await list.close();
    const page = await openPage(href!);
    const chart = page.locator('.chart[data-key="x"]');
    await chart.locator('canvas').waitFor({ timeout: 30_000 });
    const labels = async () => (await chart.locator('.u-legend .u-series .u-label').allTextContents()).slice(1);
    expect(await labels()).toEqual(['x']);
    await page.locator('#smoothing').fill('0.6');
    await waitUntil(async () => (await labels()).join('|') === 'x (raw)|x', 10_000, 'the smoothed line');
    await page.check('#log-scale');
    await page.selectOption('#x-axis', 'time');
    await waitUntil(async () => /smooth=0\.6/.test(page.url()) && /log=1/.test(page.url()) && /x=time/.test(page.url()), 10_000, 'the settings in the URL');
    expect(await chart.locator('.u-legend th').first().textContent()).toMatch(/time/);
    // The same URL opens the same charts.
    const again = await openPage(new URL(page.url()).pathname + new URL(page.url()).search);
    await again.locator('.chart[data-key="x"] canvas').waitFor({ timeout: 30_000 });
    expect(await again.locator('#log-scale').isChecked()).toBe(true);
    expect((await again.locator('.chart[data-key="x"] .u-legend .u-series .u-label').allTextContents()).slice(1)).toEqual(['x (raw)', 'x']);
    await Promise.all([page.close(), again.close()]);
  });

  it("a running run's chart grows while it logs, and a metric it starts logging later gets a chart, without a reload", async () => {
    const w = spawnScript(t, endlessWorker(t), ['grows']);
    try {
      await waitUntil(() => w.lines.some((l) => l.startsWith('run ')), 20_000, 'the worker to start');
      const id = w.lines.find((l) => l.startsWith('run '))!.slice(4);
      const page = await openPage(`/runs/${id}`);
      const chart = page.locator('.chart[data-key="v"]');
      await chart.locator('canvas').waitFor({ timeout: 30_000 });
      await page.evaluate(() => ((window as unknown as { __same?: boolean }).__same = true));
      const first = Number(await chart.getAttribute('data-points'));
      await waitUntil(async () => Number(await chart.getAttribute('data-points')) >= first + 10, 20_000, 'the chart to gain 10 points');
      expect(await page.evaluate(() => (window as unknown as { __same?: boolean }).__same)).toBe(true);
      expect(await page.locator('#run-state .state').textContent()).toBe('running');
      // A metric the run starts logging later gets its chart, still without a reload.
      await page.locator('.chart[data-key="late/metric"] canvas').waitFor({ timeout: 30_000 });
      expect(await page.locator('#metric-count').textContent()).toBe('3 metrics');
      expect(await page.evaluate(() => (window as unknown as { __same?: boolean }).__same)).toBe(true);
      await page.close();
    } finally {
      w.kill('SIGKILL');
    }
  });

  it('a rank killed with kill -9 shows as crashed on the group page and the runs list, without a reload', async () => {
    const worker = endlessWorker(t);
    const a = spawnScript(t, worker, ['k0', 'killgroup'], { RANK: '0', WORLD_SIZE: '2' });
    const b = spawnScript(t, worker, ['k1', 'killgroup'], { RANK: '1', WORLD_SIZE: '2' });
    try {
      await waitUntil(() => [a, b].every((w) => w.lines.some((l) => l.startsWith('run '))), 20_000, 'both ranks to start');
      const victim = b.lines.find((l) => l.startsWith('run '))!.slice(4);
      const group = await openPage('/groups/killgroup');
      const list = await openPage('/?text=killgroup');
      const inGroup = group.locator(`tr[data-run-id="${victim}"] .state`);
      await inGroup.waitFor({ timeout: 30_000 });
      expect(await inGroup.textContent()).toBe('running');
      await list.locator('tr.group-row button.toggle').click({ timeout: 30_000 });
      const inList = list.locator(`tr[data-run-id="${victim}"] .state`);
      expect(await inList.textContent()).toBe('running');
      b.kill('SIGKILL');
      await waitUntil(async () => (await inGroup.textContent()) === 'crashed', 30_000, 'the group page to show the rank as crashed');
      await waitUntil(async () => (await inList.textContent()) === 'crashed', 30_000, 'the runs list to show the rank as crashed');
      expect(await group.locator(`tr:not([data-run-id="${victim}"]) .state`).first().textContent()).toBe('running');
      // The metric the ranks start logging at step 30 joins the group page by itself.
      await group.locator('.chart[data-key="late/metric"] canvas').waitFor({ timeout: 30_000 });
      await Promise.all([group.close(), list.close()]);
    } finally {
      a.kill('SIGKILL');
      b.kill('SIGKILL');
    }
  });

  it('without the token the page says how to get the URL; an unknown run or group gets a clear 404 page', async () => {
    const stranger = await chrome.browser?.newContext?.().catch(() => null) ?? null;
    const page = stranger ? await stranger.newPage() : await chrome.context.newPage();
    if (!stranger) await chrome.context.clearCookies();
    const res = await page.goto(ui.base + '/');
    expect(res!.status()).toBe(401);
    expect(await page.locator('#unauthorized').textContent()).toMatch(/Run logd ui .* open the URL it prints/s);
    await page.goto(ui.url);
    const run = await page.goto(ui.base + '/runs/nosuchrun');
    expect(run!.status()).toBe(404);
    expect(await page.locator('#not-found h1').textContent()).toBe('Run not found');
    const grp = await page.goto(ui.base + '/groups/' + encodeURIComponent('<no such group>'));
    expect(grp!.status()).toBe(404);
    expect(await page.locator('#not-found p').first().textContent()).toContain('<no such group>');
    await page.close();
    await stranger?.close();
  });

  it('a run with 10 000 metric names opens without freezing: names paged and searchable, charts drawn as they scroll in', async () => {
    const [id] = await logRuns(t, [{ name: 'wide', steps: 3, row: 'Object.fromEntries(Array.from({ length: 10000 }, (_, i) => ["m/" + String(i).padStart(5, "0"), step * i]))' }]);
    const page = await openPage(`/runs/${id}`);
    await waitUntil(async () => (await page.locator('#metric-count').textContent()) === '10000 metrics', 30_000, 'the metric count');
    expect(await page.locator('.chart').count()).toBe(200);
    // Only the charts near the viewport are drawn.
    await waitUntil(async () => (await page.locator('.chart canvas').count()) > 0, 30_000, 'the first charts to draw');
    expect(await page.locator('.chart canvas').count()).toBeLessThan(40);
    // The page answers at once (no long task holds it).
    const t0 = Date.now();
    await page.evaluate(() => 1);
    expect(Date.now() - t0).toBeLessThan(1000);
    await page.fill('#metric-search', 'm/09999');
    await waitUntil(async () => (await page.locator('.chart').count()) === 1, 15_000, 'the search to leave one chart');
    await page.locator('.chart[data-key="m/09999"] canvas').waitFor({ timeout: 15_000 });
    await page.close();
  });
});
