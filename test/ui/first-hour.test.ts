// Issue 23, the dashboard in a real Chromium: the rough edges of a first hour
// (the group row's group column, the System tab of a one-sample run on a node
// without GPUs, deep links opened in a browser without the token) and the
// views people compare runs with (the runs table with config and summary
// columns, sorted and filtered, all in the URL; the group page's band by
// default; step, wall time and relative time on the x axis). Screenshots go
// to LOGD_SCREENSHOTS when it is set (docs/screenshots), else a temp dir
// (the compare page in relative time: test/ui/system-tab.test.ts, on live ranks).
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { makeEnv, script, runScript, waitUntil, ROOT, type TestEnv } from '../helpers.js';
import { startUi, getJson, type UiProcess } from './helpers.js';
import { chromiumMissing, launchChromium, type Chromium } from './browser.js';

const missing = chromiumMissing();
let t: TestEnv;
let ui: UiProcess;
let chrome: Chromium;
const ids: Record<string, string> = {};

/** Creates runs, one process each: config, a few steps of loss, a summary; some crash. */
async function sweep(t: TestEnv): Promise<void> {
  const file = script(t, 'sweep.mjs', `
    const spec = JSON.parse(process.argv[2]);
    const run = await logd.init({ project: 'sweep', name: spec.name, group: spec.group, config: spec.config });
    for (let step = 0; step < spec.steps; step++) run.log({ loss: spec.base / (step + 1), acc: step / 10 }, { step: step + (spec.offset ?? 0) });
    run.summary.update({ best_acc: spec.best });
    await run.finish({ exitCode: spec.crash ? 1 : 0 });
    console.log('run ' + run.id);
  `);
  const specs = [
    { name: 'lr-0.1', config: { lr: 0.1, batch: 32, optimizer: { name: 'sgd' } }, best: 0.71, base: 3, steps: 10 },
    { name: 'lr-0.003', config: { lr: 0.003, batch: 64, optimizer: { name: 'adam' } }, best: 0.93, base: 1, steps: 10 },
    { name: 'lr-0.03', config: { lr: 0.03, batch: 64, optimizer: { name: 'adam' } }, best: 0.88, base: 2, steps: 10, crash: true },
    { name: 'lr-0.0003', config: { lr: 0.0003, batch: 128, optimizer: { name: 'adam' } }, best: 0.8, base: 1.5, steps: 10 },
    ...[0, 1, 2].map((rank) => ({ name: `ddp-r${rank}`, group: 'ddp/overlap', rank, config: { lr: 0.01 }, best: 0.5, base: 1 + rank, steps: 20 })),
    ...[0, 1].map((rank) => ({ name: `stage-${rank}`, group: 'pipeline/apart', rank, config: { lr: 0.01 }, best: 0.5, base: 1, steps: 5, offset: rank * 100 })),
  ] as Array<{ name: string; group?: string; rank?: number; config: Record<string, unknown>; best: number; base: number; steps: number; offset?: number; crash?: boolean }>;
  for (const s of specs) {
    const r = await runScript(t, file, [JSON.stringify(s)], s.rank !== undefined ? { RANK: String(s.rank), WORLD_SIZE: '3' } : {});
    expect(r.exitCode, r.stderr).toBe(0);
    ids[s.name] = r.stdout.split('\n').find((l) => l.startsWith('run '))!.slice(4);
  }
}

async function openPage(p: string): Promise<Page> {
  const page = await chrome.context.newPage();
  page.on('pageerror', (e) => process.stderr.write(`[page error] ${e.message}\n`));
  await page.goto(ui.base + p);
  return page;
}

const shots = () => {
  const dir = process.env.LOGD_SCREENSHOTS ? path.resolve(ROOT, process.env.LOGD_SCREENSHOTS) : path.join(t.dir, 'shots');
  fs.mkdirSync(dir, { recursive: true });
  return dir;
};

/** The names in the runs table, in order (group rows by their group). */
const namesShown = (page: Page) => page.locator('#runs tbody tr td.name > a').allTextContents();

describe.skipIf(missing !== null)(`the first hour in the dashboard${missing ? ` (skipped: ${missing})` : ''}`, () => {
  beforeAll(async () => {
    // One system sample per short run: the one taken as it finishes. And no GPU: nvidia-smi off PATH.
    t = makeEnv({ LOGD_SAMPLE_INTERVAL_MS: '600000' });
    t.env.PATH = (t.env.PATH ?? '').split(':').filter((d) => d && !fs.existsSync(path.join(d, 'nvidia-smi'))).join(':');
    await sweep(t);
    ui = await startUi(t);
    chrome = await launchChromium();
    const first = await chrome.context.newPage();
    await first.goto(ui.url);
    await first.close();
  }, 180_000);
  afterAll(async () => {
    await chrome?.close();
    await ui?.stop();
    await t?.cleanup();
  });

  it("the group row shows the group's name in the group column", async () => {
    const page = await openPage('/?project=sweep');
    const row = page.locator('tr.group-row[data-group="ddp/overlap"]');
    await row.waitFor({ timeout: 30_000 });
    expect(await row.locator('td.group-cell').textContent()).toBe('ddp/overlap');
    expect(await row.locator('td.group-cell a').getAttribute('href')).toBe('/groups/ddp%2Foverlap');
    await page.close();
  });

  it('the System tab of a one-sample run on a node without GPUs: no GPU panels, and a time axis of seconds, not years', async () => {
    const id = ids['lr-0.1'];
    const api = await getJson(ui, `/api/runs/${id}/system`);
    expect(api.body.gpus).toEqual([]);
    expect(api.body.series.cpu.value.length).toBeGreaterThanOrEqual(1);
    expect(api.body.series.cpu.value.length).toBeLessThanOrEqual(2);
    const page = await openPage(`/runs/${id}?tab=system`);
    const cpu = page.locator('.chart[data-panel="CPU, whole node (%)"]');
    await cpu.locator('canvas').waitFor({ timeout: 30_000 });
    expect(await page.locator('.no-gpu').textContent()).toBe('no GPU reported on this node');
    expect(await page.locator('.chart[data-panel^="GPU"]').count()).toBe(0);
    expect(await page.locator('.chart[data-panel*="GPU memory"]').count()).toBe(0);
    const span = Number(await cpu.getAttribute('data-x-span'));
    expect(span).toBeGreaterThan(0);
    expect(span).toBeLessThan(120); // seconds: uPlot's own guess for one point spans years
    await page.screenshot({ path: path.join(shots(), 'system-tab-short-run.png') });
    await page.close();
  });

  it('a deep link opened in a browser without the token: a field takes the token, then the page asked for opens', async () => {
    const fresh = await launchChromium(); // its own profile: no cookie
    try {
      const page = await fresh.context.newPage();
      const deep = `/runs/${ids['lr-0.003']}?tab=info`;
      const res = await page.goto(ui.base + deep);
      expect(res!.status()).toBe(401);
      await page.locator('#token').fill('not-the-token');
      await page.locator('#token-submit').click();
      await page.locator('#unauthorized').waitFor();
      expect(await page.locator('#unauthorized').textContent()).toContain('not this dashboard');
      await page.screenshot({ path: path.join(shots(), 'token-page.png') });
      await page.locator('#token').fill(ui.token);
      await page.locator('#token-submit').click();
      await page.locator('#config').waitFor({ timeout: 30_000 });
      expect(new URL(page.url()).pathname + new URL(page.url()).search).toBe(deep); // the token is not left in the address
      expect(await page.locator('#config').textContent()).toContain('0.003');
      // A group link works as well now, without the token.
      const grp = await page.goto(`${ui.base}/groups/${encodeURIComponent('ddp/overlap')}`);
      expect(grp!.status()).toBe(200);
      await page.locator('#group-runs tr.run').first().waitFor({ timeout: 30_000 });
    } finally {
      await fresh.close();
    }
  });

  it('the runs table: config and summary columns, sorted by a config column, filtered by lr < 0.01 and state = crashed, all in the URL', async () => {
    const page = await openPage('/?project=sweep');
    await page.locator('tr.run').first().waitFor({ timeout: 30_000 });
    // A first view shows the runs' main metrics: the summary keys most runs have (issue 38, item 17).
    expect(await page.locator('th.extra').evaluateAll((els) => els.map((e) => e.getAttribute('data-sort')))).toEqual(['summary.acc', 'summary.best_acc', 'summary.loss']);
    expect(await page.locator(`tr[data-run-id="${ids['lr-0.003']}"] td[data-column="summary.best_acc"]`).textContent()).toBe('0.93');
    // A group row's id cell counts its runs (their ids in its title).
    expect(await page.locator('tr.group-row[data-group="ddp/overlap"] td.group-ids').textContent()).toBe('3 runs');
    expect(new URL(page.url()).searchParams.has('cols')).toBe(false);
    for (const col of ['config.lr', 'config.batch', 'summary.best_acc']) {
      await page.locator('#add-column').fill(col);
      await page.locator('#add-column-button').click();
      await page.locator(`th[data-sort="${col}"]`).waitFor();
    }
    await page.locator('th[data-sort="config.lr"]').click();
    await waitUntil(async () => /sort=config\.lr/.test(page.url()), 10_000, 'the sort in the URL');
    await waitUntil(async () => (await page.locator('th[data-sort="config.lr"]').textContent())!.includes('▴'), 10_000, 'the ascending mark');
    // Ascending by lr: 0.0003, 0.003, then the groups at 0.01, 0.03, 0.1.
    await waitUntil(async () => (await namesShown(page)).join('|') === 'lr-0.0003|lr-0.003|pipeline/apart|ddp/overlap|lr-0.03|lr-0.1', 10_000, 'the runs ordered by lr');
    expect(await page.locator(`tr[data-run-id="${ids['lr-0.0003']}"] td[data-column="config.lr"]`).textContent()).toBe('3.000e-4');
    expect(await page.locator(`tr[data-run-id="${ids['lr-0.003']}"] td[data-column="summary.best_acc"]`).textContent()).toBe('0.93');
    await page.locator('th[data-sort="config.lr"]').click();
    await waitUntil(async () => (await namesShown(page))[0] === 'lr-0.1', 10_000, 'descending');
    await page.screenshot({ path: path.join(shots(), 'runs-table.png') });
    // Filters.
    await page.locator('#filter').fill('lr < 0.01');
    await page.locator('#filter').press('Enter');
    await waitUntil(async () => (await namesShown(page)).join('|') === 'lr-0.003|lr-0.0003', 10_000, 'lr < 0.01');
    await page.locator('#filter').fill('state = crashed');
    await page.locator('#filter').press('Enter');
    await waitUntil(async () => (await namesShown(page)).join('|') === 'lr-0.03', 10_000, 'state = crashed');
    await page.locator('#filter').fill('optimizer.name = adam and best_acc > 0.85');
    await page.locator('#filter').press('Enter');
    await waitUntil(async () => (await namesShown(page)).join('|') === 'lr-0.03|lr-0.003', 10_000, 'a nested config key and a summary key');
    // The URL reproduces the view in another tab.
    const url = new URL(page.url());
    expect(url.searchParams.get('cols')).toBe('summary.acc,summary.best_acc,summary.loss,config.lr,config.batch');
    expect(url.searchParams.get('filter')).toBe('optimizer.name = adam and best_acc > 0.85');
    const again = await openPage(url.pathname + url.search);
    await again.locator('tr.run').first().waitFor({ timeout: 30_000 });
    expect(await namesShown(again)).toEqual(['lr-0.03', 'lr-0.003']);
    expect(await again.locator('th.extra').count()).toBe(5);
    // A bad expression says what is wrong.
    await again.locator('#filter').fill('lr <');
    await again.locator('#filter').press('Enter');
    await waitUntil(async () => /no value after "<"/.test((await again.locator('#runs-problem').textContent()) ?? ''), 10_000, 'the error');
    await Promise.all([page.close(), again.close()]);
  });

  it('the group page: the mean with its min–max band by default where ranks overlap, every rank one click away; a node column', async () => {
    const page = await openPage(`/groups/${encodeURIComponent('ddp/overlap')}`);
    const chart = page.locator('.chart[data-key="loss"]');
    await chart.locator('canvas').waitFor({ timeout: 30_000 });
    expect(await chart.getAttribute('data-mode')).toBe('band');
    expect((await chart.locator('.u-legend .u-series .u-label').allTextContents()).slice(1)).toEqual(['mean of 3', 'mean of 3 max', 'mean of 3 min']);
    expect(await page.locator('#mode-band').getAttribute('aria-pressed')).toBe('true');
    expect(await page.locator('#group-runs th').allTextContents()).toContain('node');
    expect(await page.locator('#group-runs td.node-cell').first().textContent()).not.toBe('');
    await page.screenshot({ path: path.join(shots(), 'group-page-band.png') });
    await page.locator('#mode-ranks').click();
    await waitUntil(async () => (await chart.getAttribute('data-series')) === '3', 10_000, 'one line per rank');
    expect((await chart.locator('.u-legend .u-series .u-label').allTextContents()).slice(1)).toEqual(['rank 0', 'rank 1', 'rank 2']);
    expect(new URL(page.url()).searchParams.get('mode')).toBe('ranks');
    // Ranks whose steps do not overlap keep their own lines.
    const apart = await openPage(`/groups/${encodeURIComponent('pipeline/apart')}`);
    const c2 = apart.locator('.chart[data-key="loss"]');
    await c2.locator('canvas').waitFor({ timeout: 30_000 });
    expect(await c2.getAttribute('data-mode')).toBe('ranks');
    expect(await c2.getAttribute('data-series')).toBe('2');
    await Promise.all([page.close(), apart.close()]);
  });

  it('x axis: step, wall time or time since the start, on the run, group and compare pages, kept in the URL', async () => {
    const compare = `/compare?runs=${ids['lr-0.1']},${ids['lr-0.003']}`;
    for (const p of [`/runs/${ids['lr-0.1']}`, `/groups/${encodeURIComponent('ddp/overlap')}`, compare]) {
      const page = await openPage(p);
      const chart = page.locator('.chart[data-key="loss"]');
      await chart.locator('canvas').waitFor({ timeout: 30_000 });
      expect(await chart.getAttribute('data-x')).toBe('step');
      expect(Number(await chart.getAttribute('data-x-span'))).toBeGreaterThanOrEqual(9);
      await page.selectOption('#x-axis', 'relative');
      await waitUntil(async () => (await chart.getAttribute('data-x')) === 'relative', 10_000, `relative time on ${p}`);
      expect(new URL(page.url()).searchParams.get('x')).toBe('relative');
      expect(await chart.locator('.u-legend th').first().textContent()).toMatch(/relative time/);
      // The runs took well under a minute: the axis spans seconds from their start.
      expect(Number(await chart.getAttribute('data-x-span'))).toBeLessThan(60);
      await page.selectOption('#x-axis', 'time');
      await waitUntil(async () => (await chart.getAttribute('data-x')) === 'time', 10_000, `wall time on ${p}`);
      expect(await chart.locator('.u-legend th').first().textContent()).toMatch(/wall time/);
      await page.close();
    }
  });
});
