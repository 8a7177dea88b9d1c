// Issue 20 on the dashboard: a real run logged by the TypeScript client with
// 1000 steps of a 64-bin histogram, images and text, and console output
// (`console: true`); a group of two ranks printing (LOGD_CONSOLE=1); a live
// run printing a line at a time. `logd ui` serves them (the media, images and
// console routes) and a real Chromium shows them: the distribution chart
// drawn, the image at the logged size with its caption as text, text as
// text, the Logs tab with its filters and live tail. Nothing logged or printed
// runs as HTML. Screenshots of the Media and Logs tabs go to LOGD_SCREENSHOTS
// when it is set (docs/screenshots), else a temp dir.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { ROOT, makeEnv, script, runScript, spawnScript, startDaemon, waitUntil, type TestEnv } from '../helpers.js';
import { startUi, getJson, type UiProcess } from './helpers.js';
import { chromiumMissing, launchChromium, type Chromium } from './browser.js';
import { distribution, quantilesInto, QUANTILES } from '../../web/quantiles.js';
import { sgrSegments, plainText } from '../../web/ansi.js';

const missing = chromiumMissing();
const CAPTION = `<script>window.__xss=1</script><img src=x onerror="window.__xss=1"> "q" & é`;
const TEXT = (step: number) => `<b>hi</b> at step ${step}\n<script>window.__xss=2</script>`;
const PRINTED = 'hello from the run <script>window.__xss=3</script>';
const GROUP = 'g/logs';
const W = 48, H = 32, STEPS = 1000;

let t: TestEnv;
let ui: UiProcess;
let mediaRun = '';
const groupRuns: string[] = [];
const runIdOf = (stdout: string) => stdout.split('\n').find((l) => l.startsWith('run '))!.slice(4);

const api = (p: string) => getJson(ui, p);

const shots = () => {
  const dir = process.env.LOGD_SCREENSHOTS ? path.resolve(ROOT, process.env.LOGD_SCREENSHOTS) : path.join(t.dir, 'shots');
  fs.mkdirSync(dir, { recursive: true });
  return dir;
};

beforeAll(async () => {
  t = makeEnv();
  await startDaemon(t);
  const media = script(t, 'media.mjs', `
    const { Histogram, Image, Text } = logd;
    const run = await logd.init({ project: 'media', name: 'media-run', console: true });
    console.log('run ' + run.id);
    let seed = 11;
    const rnd = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
    const normal = () => Math.sqrt(-2 * Math.log(rnd())) * Math.cos(2 * Math.PI * rnd());
    const px = new Uint8Array(${W * H * 3});
    for (let y = 0; y < ${H}; y++) for (let x = 0; x < ${W}; x++) px.set([x * 5, y * 8, 128], (y * ${W} + x) * 3);
    for (let step = 0; step < ${STEPS}; step++) {
      const values = new Float64Array(256);
      for (let i = 0; i < values.length; i++) values[i] = normal() * (1 + step / 500) + step / 250;
      const row = { loss: 1 / (step + 1), 'grad/w': new Histogram(values, { bins: 64 }) };
      if (step % 100 === 0) row.img = Image.fromPixels(px, { width: ${W}, height: ${H}, channels: 3, caption: ${JSON.stringify(CAPTION)} });
      if (step % 250 === 0) row.note = new Text('<b>hi</b> at step ' + step + '\\n<script>window.__xss=2</script>');
      run.log(row, { step });
    }
    console.log(${JSON.stringify(PRINTED)});
    console.log('\\x1b[31mred\\x1b[0m \\x1b[1mbold\\x1b[0m plain');
    console.error('an error line');
    await run.finish();
  `);
  const rank = script(t, 'rank.mjs', `
    const rank = Number(process.env.RANK);
    const run = await logd.init({ project: 'media', name: 'logs-r' + rank, group: ${JSON.stringify(GROUP)} });
    console.log('run ' + run.id);
    for (let i = 0; i < 5; i++) {
      console.log('rank ' + rank + ' says line ' + i);
      await new Promise((r) => setTimeout(r, 40));
    }
    if (rank === 1) console.log('only-rank-1 marker');
    await run.finish();
  `);
  const [m, ...ranks] = await Promise.all([
    runScript(t, media, [], {}, 120_000),
    ...[0, 1].map((r) => runScript(t, rank, [], { RANK: String(r), WORLD_SIZE: '2', LOCAL_RANK: String(r), LOGD_CONSOLE: '1' }, 60_000)),
  ]);
  for (const r of [m, ...ranks]) if (r.exitCode !== 0) throw new Error(`a worker failed (exit ${r.exitCode}): ${r.stderr}`);
  mediaRun = runIdOf(m.stdout);
  groupRuns.push(...ranks.map((r) => runIdOf(r.stdout)));
  ui = await startUi(t);
}, 180_000);

afterAll(async () => {
  await ui?.stop();
  await t?.cleanup();
});

describe('quantiles and colours, in Node', () => {
  it("a histogram's quantiles: the counts' cumulative share, values spread evenly inside a bin; empty bins skipped; an empty histogram is NaN", () => {
    const out = new Float64Array(5);
    // 10 values in [0,1), none in [1,2), 10 in [2,3).
    quantilesInto([10, 0, 10], [0, 1, 2, 3], [0, 0.25, 0.5, 0.75, 1], out, 0, 1);
    expect([...out]).toEqual([0, 0.5, 1, 2.5, 3]);
    quantilesInto([0, 4, 0], [0, 1, 2, 3], [0, 0.5, 1], out, 0, 1);
    expect([...out.slice(0, 3)]).toEqual([1, 1.5, 2]);
    quantilesInto([0, 0], [0, 1, 2], [0, 1], out, 0, 1);
    expect(Number.isNaN(out[0]) && Number.isNaN(out[1])).toBe(true);
    // Against the values themselves: within a bin's width.
    const values = Array.from({ length: 10_000 }, (_, i) => Math.sin(i) * 3 + (i % 7));
    const lo = Math.min(...values), hi = Math.max(...values), bins = 64, width = (hi - lo) / bins;
    const counts = new Array(bins).fill(0);
    for (const v of values) counts[Math.min(bins - 1, Math.floor((v - lo) / width))]++;
    const edges = Array.from({ length: bins + 1 }, (_, i) => lo + i * width);
    const got = new Float64Array(QUANTILES.length);
    quantilesInto(counts, edges, QUANTILES, got, 0, 1);
    const sorted = [...values].sort((a, b) => a - b);
    QUANTILES.forEach((q, j) => expect(Math.abs(got[j] - sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))])).toBeLessThanOrEqual(width + 1e-9));
  });

  it('1000 steps × 64 bins: quantiles in a few milliseconds (printed, not asserted)', () => {
    const hists = Array.from({ length: 1000 }, (_, step) => ({ step, counts: Array.from({ length: 64 }, (_, b) => Math.exp(-((b - 32) ** 2) / (50 + step / 10))), edges: Array.from({ length: 65 }, (_, b) => b + step / 100) }));
    distribution(hists);
    const t0 = performance.now();
    const d = distribution(hists);
    const ms = performance.now() - t0;
    expect(d.steps.length).toBe(1000);
    expect(d.values[4]).toBeCloseTo(32, 0);
    process.stdout.write(`[media] quantiles of 1000 steps × 64 bins in Node: ${ms.toFixed(1)} ms\n`);
  });

  it('SGR codes become colour and weight; other escapes are dropped; the text is kept as written', () => {
    expect(sgrSegments('\x1b[31mred\x1b[0m \x1b[1;92mgreen bold\x1b[22m not bold\x1b[39m <b>x</b>')).toEqual([
      { text: 'red', fg: 1, bold: false }, { text: ' ', fg: null, bold: false }, { text: 'green bold', fg: 10, bold: true },
      { text: ' not bold', fg: 10, bold: false }, { text: ' <b>x</b>', fg: null, bold: false },
    ]);
    // A 256-colour code's arguments are no codes of their own (5 is not "blink", 196 nothing); an erase is dropped.
    expect(sgrSegments('\x1b[38;5;196mX\x1b[m\x1b[2KY')).toEqual([{ text: 'XY', fg: null, bold: false }]);
    expect(plainText('\x1b[1;31merror\x1b[0m: x')).toBe('error: x');
  });
});

describe('media and console API', () => {
  it("GET /api/runs/{id}/media: every entry in order, filtered by kind and key; the run's media index; a bad kind is 400, an unknown run 404", async () => {
    const all = await api(`/api/runs/${mediaRun}/media`);
    expect(all.status).toBe(200);
    expect(all.body.kept).toBe(true);
    expect(all.body.truncated).toBe(false);
    expect(all.body.entries).toHaveLength(STEPS + 10 + 4);
    expect(all.body.keys).toEqual({
      'grad/w': { kind: 'histogram', count: STEPS, lastStep: STEPS - 1 },
      img: { kind: 'image', count: 10, lastStep: 900 },
      note: { kind: 'text', count: 4, lastStep: 750 },
    });
    const hist = await api(`/api/runs/${mediaRun}/media?kind=histogram&key=grad%2Fw`);
    expect(hist.body.entries).toHaveLength(STEPS);
    expect(hist.body.entries.map((e: { step: number }) => e.step)).toEqual(Array.from({ length: STEPS }, (_, i) => i));
    expect(hist.body.entries[0].counts).toHaveLength(64);
    expect(hist.body.entries[0].edges).toHaveLength(65);
    expect(hist.body.entries[0].counts.reduce((a: number, b: number) => a + b, 0)).toBe(256);
    const images = await api(`/api/runs/${mediaRun}/media?kind=image`);
    expect(images.body.entries).toHaveLength(10);
    for (const e of images.body.entries) expect(e).toMatchObject({ kind: 'image', key: 'img', format: 'png', width: W, height: H, caption: CAPTION, sha256: expect.stringMatching(/^[0-9a-f]{64}$/) });
    const texts = await api(`/api/runs/${mediaRun}/media?kind=text&key=note`);
    expect(texts.body.entries.map((e: { text: string }) => e.text)).toEqual([0, 250, 500, 750].map(TEXT));
    expect((await api(`/api/runs/${mediaRun}/media?kind=video`)).status).toBe(400);
    expect((await api(`/api/runs/no-such-run/media`)).status).toBe(404);
    expect((await getJson(ui, `/api/runs/${mediaRun}/media`, false)).status).toBe(401);
  });

  it('past 5000 entries an answer keeps every 2nd (4th, …) of them, still spanning the whole run, and says so', async () => {
    const file = script(t, 'many.mjs', `
      const run = await logd.init({ project: 'media', name: 'many-texts' });
      console.log('run ' + run.id);
      for (let step = 0; step < 6000; step++) run.log({ t: new logd.Text('s' + step) }, { step });
      await run.finish();
    `);
    const r = await runScript(t, file, [], {}, 60_000);
    expect(r.exitCode, r.stderr).toBe(0);
    const a = await api(`/api/runs/${runIdOf(r.stdout)}/media?kind=text`);
    expect(a.body).toMatchObject({ kept: true, truncated: true, stride: 2, total: 6000 });
    expect(a.body.entries.map((e: { step: number }) => e.step)).toEqual(Array.from({ length: 3000 }, (_, i) => i * 2));
  });

  it('GET /api/runs/{id}/images/{sha256}: the PNG as image/png, nosniff, a CSP that allows nothing, cached a year; 404 for an unknown or malformed sha, 401 without the token', async () => {
    const sha = (await api(`/api/runs/${mediaRun}/media?kind=image`)).body.entries[0].sha256 as string;
    const res = await fetch(`${ui.base}/api/runs/${mediaRun}/images/${sha}`, { headers: { authorization: `Bearer ${ui.token}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/png');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.headers.get('content-security-policy')).toBe("default-src 'none'");
    expect(res.headers.get('cache-control')).toMatch(/max-age=31536000/);
    expect(res.headers.get('cache-control')).toMatch(/immutable/);
    const png = Buffer.from(await res.arrayBuffer());
    expect([...png.subarray(0, 8)]).toEqual([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    expect([png.readUInt32BE(16), png.readUInt32BE(20)]).toEqual([W, H]); // IHDR
    for (const bad of ['0'.repeat(64), 'zz', sha.toUpperCase(), `${sha}0`, '..%2F..%2Fconfig.json']) {
      const r = await getJson(ui, `/api/runs/${mediaRun}/images/${bad}`);
      expect(r.status, bad).toBe(404);
      expect(r.body.error).toBeTruthy();
    }
    expect((await getJson(ui, `/api/runs/no-such-run/images/${sha}`)).status).toBe(404);
    expect((await getJson(ui, `/api/runs/${mediaRun}/images/${sha}`, false)).status).toBe(401);
  });

  it('GET /api/runs/{id}/console: printed lines with stream and time; stream, grep (any case) and regex filter; a bad regex is 400; the cursor brings only what is new; tail keeps the last', async () => {
    const all = await api(`/api/runs/${mediaRun}/console`);
    expect(all.status).toBe(200);
    const lines = all.body.lines as Array<{ line: string; stream: string; t: number; rank: number | null }>;
    expect(lines.map((l) => l.line)).toEqual(expect.arrayContaining([`run ${mediaRun}`, PRINTED, '\x1b[31mred\x1b[0m \x1b[1mbold\x1b[0m plain', 'an error line']));
    expect(lines.find((l) => l.line === 'an error line')!.stream).toBe('err');
    expect(lines.find((l) => l.line === PRINTED)!.stream).toBe('out');
    expect(lines.every((l) => l.t > 1.7e9 && l.rank === null)).toBe(true);
    expect((await api(`/api/runs/${mediaRun}/console?stream=err`)).body.lines.map((l: { line: string }) => l.line)).toEqual(['an error line']);
    expect((await api(`/api/runs/${mediaRun}/console?grep=HELLO%20FROM`)).body.lines.map((l: { line: string }) => l.line)).toEqual([PRINTED]);
    // The search reads the text a person sees: colour codes left out.
    expect((await api(`/api/runs/${mediaRun}/console?grep=red%20bold`)).body.lines).toHaveLength(1);
    expect((await api(`/api/runs/${mediaRun}/console?grep=${encodeURIComponent('^an? (error|warning)')}&regex=1`)).body.lines.map((l: { line: string }) => l.line)).toEqual(['an error line']);
    const bad = await api(`/api/runs/${mediaRun}/console?grep=(&regex=1`);
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatch(/regular expression/);
    expect((await api(`/api/runs/${mediaRun}/console?stream=both`)).status).toBe(400);
    expect((await api(`/api/runs/${mediaRun}/console?after=x`)).status).toBe(400);
    const again = await api(`/api/runs/${mediaRun}/console?after=${encodeURIComponent(all.body.next)}`);
    expect(again.body.lines).toEqual([]);
    expect(again.body.next).toBe(all.body.next);
    const tail = await api(`/api/runs/${mediaRun}/console?tail=1`);
    expect(tail.body.lines.map((l: { line: string }) => l.line)).toEqual([lines[lines.length - 1].line]);
    expect(tail.body.skipped).toBe(lines.length - 1);
    expect(tail.body.next).toBe(all.body.next);
    expect((await api(`/api/runs/no-such-run/console`)).status).toBe(404);
  });

  it("GET /api/groups/{group}/console: both ranks' lines merged by time, each with its rank; rank and grep filter; pages of 3 lines follow each other in order", async () => {
    const g = await api(`/api/groups/${encodeURIComponent(GROUP)}/console`);
    expect(g.status).toBe(200);
    const lines = g.body.lines as Array<{ line: string; rank: number; t: number; run: string }>;
    const said = lines.filter((l) => / says line /.test(l.line));
    expect(said).toHaveLength(10);
    expect(lines.map((l) => l.t)).toEqual([...lines.map((l) => l.t)].sort((a, b) => a - b));
    for (const l of said) expect(l.line.startsWith(`rank ${l.rank} `)).toBe(true);
    expect(new Set(said.map((l) => l.run))).toEqual(new Set(groupRuns));
    expect(g.body.ranks).toEqual([0, 1]);
    const r1 = await api(`/api/groups/${encodeURIComponent(GROUP)}/console?rank=1`);
    expect(r1.body.lines.length).toBeGreaterThan(5);
    expect(r1.body.lines.every((l: { rank: number }) => l.rank === 1)).toBe(true);
    const marker = await api(`/api/groups/${encodeURIComponent(GROUP)}/console?grep=marker`);
    expect(marker.body.lines.map((l: { line: string; rank: number }) => [l.line, l.rank])).toEqual([['only-rank-1 marker', 1]]);
    // Paged: the same lines, in the same order, three at a time.
    const paged: string[] = [];
    let after = '', pages = 0;
    for (;;) {
      const p = await api(`/api/groups/${encodeURIComponent(GROUP)}/console?limit=3&after=${encodeURIComponent(after)}`);
      expect(p.status).toBe(200);
      paged.push(...p.body.lines.map((l: { run: string; line: string }) => `${l.run} ${l.line}`));
      after = p.body.next;
      pages++;
      if (!p.body.more || pages > 50) break;
    }
    expect(pages).toBeGreaterThan(2);
    expect(paged).toEqual(lines.map((l) => `${l.run} ${l.line}`));
    expect((await api(`/api/groups/no-such-group/console`)).status).toBe(404);
  });
});

describe.skipIf(missing !== null)(`media and logs in Chromium${missing ? ` (skipped: ${missing})` : ''}`, () => {
  let chrome: Chromium;
  let live: ReturnType<typeof spawnScript> | null = null;
  const xss = (page: Page) => page.evaluate(() => (window as unknown as { __xss?: number }).__xss);

  async function openPage(path: string): Promise<Page> {
    const page = await chrome.context.newPage();
    page.on('pageerror', (e) => process.stderr.write(`[page error] ${e.message}\n`));
    await page.goto(ui.base + path);
    return page;
  }

  beforeAll(async () => {
    chrome = await launchChromium();
    const first = await chrome.context.newPage();
    await first.goto(ui.url);
    await first.close();
  }, 120_000);
  afterAll(async () => {
    live?.kill('SIGKILL');
    await chrome?.close();
  });

  it('the Media tab: the distribution of 1000 steps × 64 bins drawn on its canvas (timed, printed), the image at its logged size with its caption as text, the text as text', async () => {
    const t0 = Date.now();
    const page = await openPage(`/runs/${mediaRun}?tab=media`);
    const chart = page.locator('.dist-chart[data-key="grad/w"]');
    await page.locator('.dist-chart[data-key="grad/w"][data-drawn]').waitFor({ timeout: 30_000 });
    const loaded = Date.now() - t0;
    expect(await chart.getAttribute('data-steps')).toBe(String(STEPS));
    const inked = await chart.locator('canvas').evaluate((c: HTMLCanvasElement) => {
      const px = c.getContext('2d')!.getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 3; i < px.length; i += 4) if (px[i] > 0) n++;
      return n / (c.width * c.height);
    });
    expect(inked).toBeGreaterThan(0.2); // the bands fill much of the plot
    const cold = Number(await chart.getAttribute('data-draw-ms'));
    // Warm: the same chart drawn again (a resize redraws it at the new width).
    const drawn = await chart.getAttribute('data-drawn');
    await page.setViewportSize({ width: 1100, height: 900 });
    await waitUntil(async () => (await chart.getAttribute('data-drawn')) !== drawn, 10_000, 'the chart to redraw');
    const warm = Number(await chart.getAttribute('data-draw-ms'));
    process.stdout.write(`[media] distribution chart, ${STEPS} steps × 64 bins: cold draw ${cold} ms, warm ${warm} ms (quantiles + canvas); page open to drawn ${loaded} ms\n`);

    const panel = page.locator('.image-panel[data-key="img"]');
    await panel.scrollIntoViewIfNeeded();
    const img = panel.locator('img.media-image');
    await img.waitFor({ timeout: 15_000 });
    await waitUntil(() => img.evaluate((i: HTMLImageElement) => i.complete && i.naturalWidth > 0), 10_000, 'the image to load');
    expect(await img.evaluate((i: HTMLImageElement) => [i.naturalWidth, i.naturalHeight])).toEqual([W, H]);
    expect(await panel.getAttribute('data-step')).toBe('900'); // the newest first
    expect(await panel.locator('figcaption.caption').textContent()).toBe(CAPTION);
    expect(await panel.locator('.image-facts').textContent()).toContain(`${W}×${H}`);
    // The slider walks the steps that have an image.
    await panel.locator('input.step-slider').evaluate((s: HTMLInputElement) => ((s.value = '0'), s.dispatchEvent(new Event('input'))));
    expect(await panel.getAttribute('data-step')).toBe('0');
    expect(await panel.locator('.step-label').textContent()).toBe('step 0 (1 of 10)');
    await waitUntil(() => panel.locator('img.media-image').evaluate((i: HTMLImageElement) => i.complete && i.naturalWidth === 48), 10_000, 'the first image');

    const text = page.locator('.text-panel[data-key="note"]');
    await text.scrollIntoViewIfNeeded();
    await text.locator('pre.text-value').first().waitFor({ timeout: 15_000 });
    expect(await text.locator('pre.text-value').allTextContents()).toEqual([0, 250, 500, 750].map(TEXT));
    expect(await text.locator('b, script').count()).toBe(0);
    // Nothing logged ran or became markup.
    expect(await page.locator('img[src="x"]').count()).toBe(0);
    expect(await xss(page)).toBeUndefined();
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({ path: path.join(shots(), 'media-tab.png'), fullPage: true });
    await page.close();
  }, 90_000);

  it("the run's Logs tab: printed lines as text, ANSI colours as spans, stream filter and search", async () => {
    const page = await openPage(`/runs/${mediaRun}?tab=logs`);
    const list = page.locator('#log-lines');
    await page.locator('#log-lines[data-loaded]').waitFor({ timeout: 15_000 });
    await list.locator('.log-line', { hasText: 'hello from the run' }).waitFor({ timeout: 15_000 });
    expect(await list.locator('.log-line', { hasText: 'hello from the run' }).locator('.log-text').textContent()).toBe(PRINTED);
    const coloured = list.locator('.log-line', { hasText: 'plain' });
    expect(await coloured.locator('span.ansi-fg-1').textContent()).toBe('red');
    expect(await coloured.locator('span.ansi-bold').textContent()).toBe('bold');
    expect(await coloured.locator('.log-text').textContent()).toBe('red bold plain');
    expect(await list.locator('script').count()).toBe(0);
    expect(await list.locator('.log-line[data-stream="err"]').allTextContents()).toEqual([expect.stringContaining('an error line')]);
    await page.selectOption('#log-stream', 'err');
    await waitUntil(async () => (await list.locator('.log-line').count()) === 1, 10_000, 'only stderr');
    await page.selectOption('#log-stream', '');
    await page.fill('#log-search', 'HELLO');
    await waitUntil(async () => (await list.locator('.log-line').count()) === 1 && (await list.locator('.log-text').textContent()) === PRINTED, 10_000, 'the search to leave one line');
    expect(new URL(page.url()).searchParams.get('grep')).toBe('HELLO');
    expect(await xss(page)).toBeUndefined();
    await page.close();
  }, 60_000);

  it("the group's Logs tab: both ranks merged, a rank filter, a regex search", async () => {
    const page = await openPage(`/groups/${encodeURIComponent(GROUP)}?tab=logs`);
    const list = page.locator('#log-lines');
    await page.locator('#log-lines[data-loaded]').waitFor({ timeout: 15_000 });
    const says = list.locator('.log-line', { hasText: 'says line' });
    expect(await says.count()).toBe(10);
    expect(new Set(await says.locator('.log-who').allTextContents())).toEqual(new Set(['rank 0', 'rank 1']));
    expect(await page.locator('#log-rank option').allTextContents()).toEqual(['all ranks', 'rank 0', 'rank 1']);
    await page.selectOption('#log-rank', '1');
    await waitUntil(async () => (await list.locator('.log-line[data-rank="0"]').count()) === 0 && (await list.locator('.log-line[data-rank="1"]').count()) >= 6, 10_000, 'only rank 1');
    await page.check('#log-regex');
    await page.fill('#log-search', 'line [0-1]$|marker');
    await waitUntil(async () => (await list.getAttribute('data-lines')) === '3' && (await list.locator('.log-line', { hasText: 'marker' }).count()) === 1, 10_000, 'the regex to leave three lines of rank 1');
    expect(await list.locator('.log-line[data-rank="1"] .log-text').allTextContents()).toEqual(['rank 1 says line 0', 'rank 1 says line 1', 'only-rank-1 marker']);
    await page.fill('#log-search', '(');
    await page.locator('#log-status.error').waitFor({ timeout: 10_000 });
    expect(await page.locator('#log-status').textContent()).toMatch(/regular expression/);
    await page.fill('#log-search', '');
    await page.uncheck('#log-regex');
    await page.selectOption('#log-rank', '');
    await waitUntil(async () => (await list.locator('.log-line', { hasText: 'says line' }).count()) === 10, 10_000, 'every line again');
    await page.screenshot({ path: path.join(shots(), 'group-logs.png') });
    await page.close();
  }, 60_000);

  it('a running run: the Logs tab tails new lines within a few seconds, without a reload', async () => {
    const file = script(t, 'live.mjs', `
      const run = await logd.init({ project: 'media', name: 'live-logs' });
      console.log('run ' + run.id);
      for (let i = 0; ; i++) {
        console.log('tick ' + i);
        run.log({ x: i }, { step: i });
        await run.flush();
        await new Promise((r) => setTimeout(r, 300));
      }
    `);
    live = spawnScript(t, file, [], { LOGD_CONSOLE: '1' });
    await waitUntil(() => live!.lines.some((l) => l === 'tick 2'), 30_000, 'the live run to print');
    const id = live.lines.find((l) => l.startsWith('run '))!.slice(4);
    const page = await openPage(`/runs/${id}?tab=logs`);
    const list = page.locator('#log-lines');
    await page.locator('#log-lines[data-loaded]').waitFor({ timeout: 15_000 });
    const ticks = async () => (await list.locator('.log-text').allTextContents()).filter((l) => l.startsWith('tick ')).map((l) => Number(l.slice(5)));
    const first = Math.max(...(await ticks()));
    await waitUntil(async () => Math.max(...(await ticks())) >= first + 3, 15_000, 'three more ticks to arrive');
    const seen = await ticks();
    expect(seen).toEqual(Array.from({ length: seen.length }, (_, i) => i)); // none lost, none twice
    expect(await page.locator('#log-status').textContent()).toContain('live');
    live.kill('SIGKILL');
    await page.close();
  }, 60_000);
});
