// Issue 36, in a real Chromium on a real daemon's runs: which settings won
// (parallel coordinates and a scatter of a 50-run sweep whose best settings
// are known, read back from what was drawn; brushing narrows the table; the
// view in the URL survives a reload) and how two jobs differ (the compare
// page of two groups: exactly the config keys that differ; a legend that
// tells two runs named alike apart). Keys that are numbers in some runs and
// text in others, runs without a key, and keys with `/`, `.`, quotes and HTML.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { makeEnv, script, runScript, ROOT, type TestEnv } from '../helpers.js';
import { getJson, dashboardFor, type UiProcess } from './helpers.js';
import { chromiumMissing, type Chromium } from './browser.js';

const missing = chromiumMissing();
let t: TestEnv;
let ui: UiProcess;
let chrome: Chromium;
let dash: Awaited<ReturnType<typeof dashboardFor>>;
const ODD = 'odd/key."q"<b>x</b>';

interface SweepRun { id: string; name: string; lr: number; batch: number; optimizer: string; loss: number; acc: number }
let sweep: SweepRun[] = [];
const groupIds: Record<string, string[]> = {};

/** val_loss of a setting: best at lr = 1e-3 and batch 64, adam a little better. */
const lossOf = (lr: number, batch: number, opt: string) => (Math.log10(lr) + 3) ** 2 + (batch === 64 ? 0 : 0.05) + (opt === 'adam' ? 0 : 0.02);

async function makeRuns(): Promise<void> {
  const file = script(t, 'sweep.mjs', `
    const specs = JSON.parse(process.argv[2]);
    for (const s of specs) {
      const run = await logd.init({ project: 'sweep', name: s.name, config: s.config });
      for (let step = 0; step < 5; step++) run.log({ val_loss: s.loss + (4 - step) * 0.1, acc: s.acc }, { step });
      await run.finish();
      console.log('run ' + run.id);
    }
  `);
  const specs = [];
  const lrs = [1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1];
  const batches = [32, 64, 128, 256, 512];
  for (let i = 0; i < 50; i++) {
    const lr = lrs[i % 10], batch = batches[Math.floor(i / 10)], optimizer = i % 3 === 0 ? 'sgd' : 'adam';
    const loss = lossOf(lr, batch, optimizer);
    const config: Record<string, unknown> = { lr, batch, optimizer, seed: i };
    // A key that is a number in some runs and text in others; a key some runs lack; a key with / . quotes and HTML.
    config.warmup = i % 2 === 0 ? 100 : 'linear';
    if (i % 5 !== 0) config.wd = 0.01 * (i % 4);
    config[ODD] = i % 2 === 0 ? '<i>a</i>' : 'b';
    specs.push({ name: `sweep-${i}`, config, loss, acc: 1 - loss / 10 });
  }
  const r = await runScript(t, file, [JSON.stringify(specs)], {}, 180_000);
  expect(r.exitCode, r.stderr).toBe(0);
  const ids = r.stdout.split('\n').filter((l) => l.startsWith('run ')).map((l) => l.slice(4));
  sweep = specs.map((s, i) => ({ id: ids[i], name: s.name, lr: s.config.lr as number, batch: s.config.batch as number, optimizer: s.config.optimizer as string, loss: s.loss, acc: s.acc }));
  // Two jobs of two ranks each; their rank-0 runs share a name.
  const rankFile = script(t, 'rank.mjs', `
    const s = JSON.parse(process.argv[2]);
    const run = await logd.init({ project: 'jobs', name: s.name, group: s.group, config: s.config });
    for (let step = 0; step < 20; step++) run.log({ loss: s.base / (step + 1) }, { step });
    await run.finish();
    console.log('run ' + run.id);
  `);
  for (const [group, config, base] of [['job-a', { lr: 0.1, model: 'resnet', layers: 50 }, 2], ['job-b', { lr: 0.01, model: 'resnet', layers: 50, dropout: 0.2 }, 1]] as const) {
    groupIds[group] = [];
    for (const rank of [0, 1]) {
      const out = await runScript(t, rankFile, [JSON.stringify({ name: `rank${rank}`, group, config, base: base + rank })], { RANK: String(rank), WORLD_SIZE: '2' });
      expect(out.exitCode, out.stderr).toBe(0);
      groupIds[group].push(out.stdout.split('\n').find((l) => l.startsWith('run '))!.slice(4));
    }
  }
}

/** Screenshots go to LOGD_SCREENSHOTS (docs/screenshots) when it is set, else the test's temp dir. */
const shot = (name: string) => {
  const dir = process.env.LOGD_SCREENSHOTS ? path.resolve(ROOT, process.env.LOGD_SCREENSHOTS) : path.join(t.dir, 'shots');
  fs.mkdirSync(dir, { recursive: true });
  return path.join(dir, name);
};

const openPage = (p: string): Promise<Page> => dash.open(p);

/** Each parallel-coordinates line's y per axis, read back from its path. */
async function linesDrawn(page: Page): Promise<Map<string, number[]>> {
  const got = await page.locator('svg.parallel path.pc-line').evaluateAll((els) => els.map((e) => [e.getAttribute('data-run-id'), e.getAttribute('d')]));
  const out = new Map<string, number[]>();
  for (const [id, d] of got) out.set(id!, [...d!.matchAll(/[ML]([-\d.]+) ([-\d.]+)/g)].map((m) => Number(m[2])));
  return out;
}

describe.skipIf(missing !== null)(`parameters and compare in the dashboard${missing ? ` (skipped: ${missing})` : ''}`, () => {
  beforeAll(async () => {
    t = makeEnv();
    await makeRuns();
    dash = await dashboardFor(t);
    ({ ui, chrome } = dash);
  }, 240_000);
  afterAll(async () => {
    await dash?.close();
    await t?.cleanup();
  });

  it('GET /api/explore: the chosen keys of every run a filter picks, columnar, as numbers or text', async () => {
    const q = new URLSearchParams({ project: 'sweep', filter: 'batch = 64' });
    for (const k of ['config.lr', 'summary.val_loss', 'config.warmup', 'config.wd', `config.${ODD}`]) q.append('keys', k);
    const { status, body } = await getJson(ui, `/api/explore?${q}`);
    expect(status).toBe(200);
    const want = sweep.filter((s) => s.batch === 64);
    expect(body.total).toBe(want.length);
    expect(new Set(body.runs.map((r: any) => r.id))).toEqual(new Set(want.map((s) => s.id)));
    body.runs.forEach((r: any, i: number) => {
      const s = sweep.find((x) => x.id === r.id)!;
      expect(body.values['config.lr'][i]).toBe(s.lr);
      expect(body.values['summary.val_loss'][i]).toBeCloseTo(s.loss, 12);
      const n = Number(s.name.slice(6));
      expect(body.values['config.warmup'][i]).toBe(n % 2 === 0 ? 100 : 'linear');
      expect(body.values['config.wd'][i]).toBe(n % 5 === 0 ? null : 0.01 * (n % 4));
      expect(body.values[`config.${ODD}`][i]).toBe(n % 2 === 0 ? '<i>a</i>' : 'b');
    });
    expect(body.fields.config).toEqual(expect.arrayContaining(['lr', 'batch', 'optimizer', 'warmup', 'wd', ODD]));
    expect((await getJson(ui, '/api/explore?filter=lr%20%3C%3C%201')).status).toBe(400);
  });

  it('parallel coordinates and a scatter of the sweep: the best run is the extreme point of both; brushing narrows the table; the view survives a reload', async () => {
    const best = [...sweep].sort((a, b) => a.loss - b.loss)[0];
    const worst = [...sweep].sort((a, b) => b.loss - a.loss)[0];
    const axes = ['config.lr', 'config.batch', 'config.optimizer', 'config.warmup', 'config.wd', `config.${ODD}`, 'summary.val_loss'];
    const u = new URLSearchParams({ project: 'sweep', axes: axes.join(','), colour: 'summary.val_loss', x: 'config.lr', y: 'summary.val_loss' });
    const page = await openPage(`/explore?${u}`);
    await page.locator('svg.parallel path.pc-line').first().waitFor({ timeout: 30_000 });
    const lines = await linesDrawn(page);
    expect(lines.size).toBe(50);
    const lossAxis = axes.indexOf('summary.val_loss');
    // The lowest loss is drawn lowest on its axis (the largest y), the highest loss highest.
    const byY = [...lines].sort((a, b) => b[1][lossAxis] - a[1][lossAxis]);
    expect(byY[0][0]).toBe(best.id);
    expect(byY[byY.length - 1][0]).toBe(worst.id);
    // lr is on a log axis (1e-5 .. 0.3): equal ratios, equal distances.
    const yLr = (lr: number) => lines.get(sweep.find((s) => s.lr === lr)!.id)![0];
    expect(yLr(1e-4) - yLr(1e-3)).toBeCloseTo(yLr(1e-3) - yLr(1e-2), 0);
    expect(await page.locator('.pc-axis[data-key="config.lr"]').getAttribute('data-kind')).toBe('log');
    // Numbers in some runs and text in others: one categorical axis. Runs without wd: the missing row.
    expect(await page.locator('.pc-axis[data-key="config.warmup"]').getAttribute('data-kind')).toBe('category');
    const missingY = Math.max(...[...lines.values()].map((ys) => ys[4]));
    for (const s of sweep) expect(lines.get(s.id)![4] === missingY).toBe(Number(s.name.slice(6)) % 5 === 0);
    // A key with HTML shows as text, and its values too.
    const titles = await page.locator('.pc-axis').evaluateAll((els) => els.map((e) => [e.getAttribute('data-key'), e.querySelector('.pc-axis-title')!.textContent]));
    expect(titles.find(([k]) => k === `config.${ODD}`)![1]).toContain('odd/key."q"<b>');
    expect(await page.locator('svg.parallel b, svg.parallel i').count()).toBe(0);
    // The scatter: lowest loss lowest (largest cy).
    const dots = await page.locator('svg.scatter circle.sc-point').evaluateAll((els) => els.map((e) => [e.getAttribute('data-run-id'), Number(e.getAttribute('cy'))] as const));
    expect(dots).toHaveLength(50);
    expect([...dots].sort((a, b) => b[1] - a[1])[0][0]).toBe(best.id);
    // The table under the charts: best first (a loss, lowest first).
    expect(await page.locator('#explore-table tbody tr').first().getAttribute('data-run-id')).toBe(best.id);

    // Brush lr from about 1e-4 to 1e-2 by dragging along its axis.
    const hit = page.locator('.pc-brush-hit[data-key="config.lr"]');
    const box = (await hit.boundingBox())!;
    const lrY = (lr: number) => yLr(lr);
    const svgBox = (await page.locator('svg.parallel').boundingBox())!;
    const x = box.x + box.width / 2;
    await page.mouse.move(x, svgBox.y + lrY(1e-2) - 5);
    await page.mouse.down();
    await page.mouse.move(x, svgBox.y + lrY(1e-3), { steps: 5 });
    await page.mouse.move(x, svgBox.y + lrY(1e-4) + 5, { steps: 5 });
    await page.mouse.up();
    const inside = sweep.filter((s) => s.lr >= 1e-4 && s.lr <= 1e-2);
    await page.waitForFunction((n) => document.querySelectorAll('#explore-table tbody tr').length === n, inside.length, { timeout: 10_000 });
    const rows = await page.locator('#explore-table tbody tr').evaluateAll((els) => els.map((e) => e.getAttribute('data-run-id')));
    expect(new Set(rows)).toEqual(new Set(inside.map((s) => s.id)));
    expect(await page.locator('svg.parallel path.pc-line.dim').count()).toBe(50 - inside.length);
    await page.screenshot({ path: shot('explore.png'), fullPage: false });
    // The brush is in the URL: a reload brushes the same runs.
    expect(new URL(page.url()).searchParams.getAll('brush')).toHaveLength(1);
    await page.reload();
    await page.waitForFunction((n) => document.querySelectorAll('#explore-table tbody tr').length === n, inside.length, { timeout: 30_000 });
    expect(await page.locator('svg.parallel path.pc-line.dim').count()).toBe(50 - inside.length);
    // And the runs table shows the same runs through the filter the brush makes.
    const toTable = await page.locator('#explore-to-table').getAttribute('href');
    const table = await getJson(ui, `/api/runs?${new URL(toTable!, ui.base).searchParams}&limit=100`);
    expect(new Set(table.body.runs.map((r: any) => r.id))).toEqual(new Set(inside.map((s) => s.id)));
    await page.close();
  });

  it('from the runs table in two clicks: select runs, press Parameters; select two groups, press Compare', async () => {
    const page = await openPage('/?project=sweep');
    await page.locator('#runs tbody tr.run').first().waitFor();
    const boxes = page.locator('#runs tbody tr.run input[type=checkbox]');
    for (let i = 0; i < 5; i++) await boxes.nth(i).check();
    const chosen = await page.locator('#runs tbody tr.run').evaluateAll((els) => els.slice(0, 5).map((e) => e.getAttribute('data-run-id')));
    await page.locator('#explore').click();
    await page.waitForURL(/\/explore\?/);
    await page.locator('svg.parallel path.pc-line').first().waitFor({ timeout: 30_000 });
    expect(new Set(Object.keys(Object.fromEntries(await linesDrawn(page))))).toEqual(new Set(chosen));
    expect(await page.locator('h1').textContent()).toBe('Parameters of 5 selected runs');
    // "Charts": the runs the view shows, overlaid on the compare page (there grouped by a key: the compare test below).
    await page.goto(`${ui.base}/?project=sweep&filter=${encodeURIComponent('batch = 64')}`);
    await page.waitForFunction(() => document.querySelectorAll('#runs tbody tr.run').length === 10);
    await page.locator('#chart-view').click();
    await page.waitForURL(/\/compare\?/);
    expect(new Set(new URL(page.url()).searchParams.get('runs')!.split(','))).toEqual(new Set(sweep.filter((s) => s.batch === 64).map((s) => s.id)));
    await page.goto(`${ui.base}/?project=jobs`);
    for (const g of ['job-a', 'job-b']) await page.locator(`tr.group-row[data-group="${g}"] input.group-select`).check();
    await page.locator('#compare').click();
    await page.waitForURL(/\/compare\?/);
    expect(new URL(page.url()).searchParams.get('groups')!.split(',').sort()).toEqual(['job-a', 'job-b']);
    await page.close();
  });

  it('compare two groups: exactly the config keys that differ, the same ones behind a toggle, a mean with its band per group', async () => {
    const page = await openPage('/compare?groups=job-a,job-b');
    await page.locator('#diff-table tbody tr').first().waitFor({ timeout: 30_000 });
    const differs = await page.locator('#diff-table tbody tr.differs').evaluateAll((els) => els.map((e) => [e.getAttribute('data-key'), ...[...e.querySelectorAll('td')].map((td) => td.textContent)]));
    const configDiffers = differs.filter((r) => r[0]!.startsWith('config.'));
    expect(configDiffers).toEqual([['config.dropout', '—', '0.2'], ['config.lr', '0.1', '0.01']]);
    expect(await page.locator('#diff-table tbody tr.same').count()).toBe(0);
    await page.locator('#show-same').check();
    const same = await page.locator('#diff-table tbody tr.same').evaluateAll((els) => els.map((e) => e.getAttribute('data-key')));
    expect(same).toEqual(expect.arrayContaining(['config.model', 'config.layers']));
    expect(new URL(page.url()).searchParams.get('same')).toBe('1');
    // One chart of loss with one line per group (the mean) and its band.
    const chart = page.locator('.chart[data-key="loss"]');
    await chart.scrollIntoViewIfNeeded();
    await chart.locator('.u-legend').waitFor({ timeout: 30_000 });
    const legend = await chart.locator('.u-legend .u-series .u-label').allTextContents();
    await page.screenshot({ path: shot('compare-groups.png'), fullPage: false });
    expect(legend.filter((l) => l.startsWith('group '))).toEqual(['group job-a', 'group job-a max', 'group job-a min', 'group job-b', 'group job-b max', 'group job-b min']);
    await page.close();
  });

  it('compare runs grouped by a config key: one line per value, the mean of its runs with their band (GET /api/aggregate), coloured by a key', async () => {
    const six = sweep.slice(0, 6);
    const adam = six.filter((s) => s.optimizer === 'adam'), sgd = six.filter((s) => s.optimizer === 'sgd');
    const q = new URLSearchParams({ runs: adam.map((s) => s.id).join(','), keys: 'val_loss' });
    const { body } = await getJson(ui, `/api/aggregate?${q}`);
    const agg = body.series.val_loss;
    expect(agg.step).toEqual([0, 1, 2, 3, 4]);
    agg.step.forEach((step: number, i: number) => {
      const vs = adam.map((s) => s.loss + (4 - step) * 0.1);
      expect(agg.value[i]).toBeCloseTo(vs.reduce((a, b) => a + b, 0) / vs.length, 9);
      expect(agg.min[i]).toBeCloseTo(Math.min(...vs), 9);
      expect(agg.max[i]).toBeCloseTo(Math.max(...vs), 9);
    });
    expect((await getJson(ui, '/api/aggregate?keys=val_loss')).status).toBe(400);
    const page = await openPage(`/compare?runs=${six.map((s) => s.id).join(',')}&by=config.optimizer&colour=config.optimizer`);
    const chart = page.locator('.chart[data-key="val_loss"]');
    await chart.locator('.u-legend').waitFor({ timeout: 30_000 });
    const legend = await chart.locator('.u-legend .u-series .u-label').allTextContents();
    expect(legend.filter((l) => l.startsWith('config.optimizer'))).toEqual([
      `config.optimizer = adam (${adam.length} runs)`, `config.optimizer = adam (${adam.length} runs) max`, `config.optimizer = adam (${adam.length} runs) min`,
      `config.optimizer = sgd (${sgd.length} runs)`, `config.optimizer = sgd (${sgd.length} runs) max`, `config.optimizer = sgd (${sgd.length} runs) min`,
    ]);
    expect(await page.locator('#group-by').inputValue()).toBe('config.optimizer');
    // Ungrouped again: one line per run.
    await page.locator('#group-by').selectOption('');
    await page.waitForFunction(() => document.querySelector('#charts')?.getAttribute('data-lines') === '6');
    expect(new URL(page.url()).searchParams.has('by')).toBe(false);
    await page.close();
  });

  it('a saved view: named on the page, listed on the runs page, opens the same charts after a reload; kept in views.json (0600)', async () => {
    const axes = ['config.lr', 'config.batch', 'summary.val_loss'];
    const page = await openPage(`/explore?project=sweep&axes=${encodeURIComponent(axes.join(','))}&colour=summary.val_loss&x=config.lr&y=summary.val_loss`);
    await page.locator('svg.parallel path.pc-line').first().waitFor({ timeout: 30_000 });
    const url = new URL(page.url());
    await page.locator('#view-name').fill('best <b>lr</b>');
    await page.locator('#save-view').click();
    await page.waitForFunction(() => /saved as/.test(document.querySelector('#save-view-said')?.textContent ?? ''));
    const file = `${t.env.LOGD_DIR}/views.json`;
    expect((await import('node:fs')).statSync(file).mode & 0o777).toBe(0o600);
    await page.goto(`${ui.base}/`);
    const link = page.locator('#saved-views .saved-view[data-view="best <b>lr</b>"] a');
    await link.waitFor({ timeout: 30_000 });
    expect(await link.textContent()).toBe('best <b>lr</b>');
    expect(await page.locator('#saved-views b').count()).toBe(0);
    await link.click();
    await page.waitForURL(/\/explore\?/);
    await page.locator('svg.parallel path.pc-line').first().waitFor({ timeout: 30_000 });
    expect(new URL(page.url()).search).toBe(url.search);
    expect(await page.locator('svg.parallel path.pc-line').count()).toBe(50);
    expect(await page.locator('.pc-axis').evaluateAll((els) => els.map((e) => e.getAttribute('data-key')))).toEqual(axes);
    // Deleted from the runs page.
    await page.goto(`${ui.base}/`);
    await page.locator('#saved-views .saved-view button').click();
    await page.waitForFunction(() => document.querySelectorAll('#saved-views .saved-view').length === 0);
    expect(JSON.parse((await import('node:fs')).readFileSync(file, 'utf8')).views).toEqual([]);
    await page.close();
  });

  it('saving views refuses what is not a view of this dashboard, and writes nothing else', async () => {
    const post = (body: unknown, headers: Record<string, string> = {}) => fetch(`${ui.base}/api/views`, {
      method: 'POST', body: typeof body === 'string' ? body : JSON.stringify(body),
      headers: { authorization: `Bearer ${ui.token}`, 'content-type': 'application/json', ...headers },
    }).then(async (r) => ({ status: r.status, body: await r.json() as any }));
    expect((await post({ name: 'x', url: '/?project=sweep' })).status).toBe(200);
    for (const url of ['//evil.example/', 'https://evil.example/', '/\\evil.example', 'javascript:alert(1)', '/api/runs', '/nope']) {
      const r = await post({ name: 'bad', url });
      expect(r.status, url).toBe(400);
      expect(r.body.error).toMatch(/must be a page of this dashboard/);
    }
    expect((await post({ name: '', url: '/' })).status).toBe(400);
    expect((await post({ name: 'a\u0000b', url: '/' })).status).toBe(400);
    expect((await post('{not json')).status).toBe(400);
    expect((await post({ name: 'x', url: '/' }, { 'content-type': 'text/plain' })).status).toBe(415);
    expect((await post({ name: 'x', url: '/' }, { origin: 'http://evil.example' })).status).toBe(403);
    expect((await post('x'.repeat(20_000))).status).toBe(413);
    const noToken = await fetch(`${ui.base}/api/views`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } });
    expect(noToken.status).toBe(401);
    const other = await fetch(`${ui.base}/api/runs`, { method: 'POST', headers: { authorization: `Bearer ${ui.token}` } });
    expect(other.status).toBe(405);
    // A token in a saved URL is not kept.
    const kept = await post({ name: 'tok', url: `/?token=${ui.token}&project=sweep` });
    expect(kept.body.saved.url).toBe('/?project=sweep');
    const del = (name: string) => fetch(`${ui.base}/api/views/${encodeURIComponent(name)}`, { method: 'DELETE', headers: { authorization: `Bearer ${ui.token}` } });
    expect((await del('tok')).status).toBe(200);
    expect((await del('tok')).status).toBe(404);
    expect((await del('x')).status).toBe(200);
    expect((await getJson(ui, '/api/views')).body.views).toEqual([]);
  });

  it('two runs named alike are told apart in the legend and the table', async () => {
    const [a0] = groupIds['job-a'], [b0] = groupIds['job-b'];
    const page = await openPage(`/compare?runs=${a0},${b0}`);
    await page.locator('#compare-items tbody tr').nth(1).waitFor({ timeout: 30_000 });
    const labels = await page.locator('#compare-items td.legend-label').allTextContents();
    expect(labels).toEqual(['rank0 · job-a', 'rank0 · job-b']);
    const differs = await page.locator('#diff-table tbody tr.differs').evaluateAll((els) => els.map((e) => e.getAttribute('data-key')));
    expect(differs).toEqual(expect.arrayContaining(['config.lr', 'config.dropout']));
    await page.close();
  });
});
