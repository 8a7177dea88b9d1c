// Issue 19 on the dashboard: runs that survive restarts. Real TypeScript
// trainers on a real daemon make a run of two attempts (the first SIGKILLed
// at step 50, the second resumed from step 40: rows 41..50 of the first are
// superseded), a fork of it at step 20, and a run never resumed; `logd ui`
// serves them and a real Chromium shows them: the Attempts table, a dashed
// "attempt 2" marker at step 40 on every chart (at the right pixel, and at
// the attempt's start on the wall-time axis), "show superseded rows" drawing
// the 10 superseded points of each metric and hiding them again, the
// fork's link to its source, and the Logs tab opening each attempt's part of
// the output with a heading (a group's lines saying their attempt instead). A screenshot of the run page goes to
// LOGD_SCREENSHOTS when it is set, else a temp dir.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Locator, Page } from 'playwright-core';
import { ROOT, makeEnv, script, runScript, startDaemon, waitUntil, type TestEnv } from '../helpers.js';
import { startUi, getJson, logRuns, type UiProcess } from './helpers.js';
import { chromiumMissing, launchChromium, type Chromium } from './browser.js';

const missing = chromiumMissing();
const KEYS = ['loss', 'eval/acc'];
const range = (a: number, b: number) => Array.from({ length: b - a + 1 }, (_, i) => a + i);

let t: TestEnv;
let ui: UiProcess;
let chrome: Chromium;
let plainRun = '';

const shots = () => {
  const dir = process.env.LOGD_SCREENSHOTS ? path.resolve(ROOT, process.env.LOGD_SCREENSHOTS) : path.join(t.dir, 'shots');
  fs.mkdirSync(dir, { recursive: true });
  return dir;
};

async function openPage(p: string): Promise<Page> {
  const page = await chrome.context.newPage();
  page.on('pageerror', (e) => process.stderr.write(`[page error] ${e.message}\n`));
  await page.goto(ui.base + p);
  return page;
}

/** Where a value of the chart's x scale lies on the page, from its drawn range and its plot area; null while the chart is not drawn. */
async function pageXOf(chart: Locator, x: number): Promise<number | null> {
  const min = Number(await chart.getAttribute('data-x-min')), max = Number(await chart.getAttribute('data-x-max'));
  const over = await chart.locator('.u-over').boundingBox();
  return over ? over.x + ((x - min) / (max - min)) * over.width : null;
}

/**
 * How far the chart's attempt marker stands from value `x` of its x scale, in pixels. Charts draw as they come
 * into view and redraw when data or size change: scrolled into view, and measured again until both are drawn.
 */
async function markerOffset(chart: Locator, x: number): Promise<number> {
  await chart.scrollIntoViewIfNeeded();
  let off = Infinity;
  await expect.poll(async () => {
    const box = await chart.locator('.attempt-marker').boundingBox();
    const at = await pageXOf(chart, x);
    off = box && at !== null ? Math.abs(box.x - at) : Infinity;
    return off;
  }, { timeout: 30_000 }).toBeLessThan(1.5);
  return off;
}

describe.skipIf(missing !== null)(`attempts, rewinds and forks on the dashboard${missing ? ` (skipped: ${missing})` : ''}`, () => {
  beforeAll(async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    await startDaemon(t);
    // `from`: `-`, `resume:S` (rewind run `id` to step S) or `fork:RUN:S`; logs loss = step + offset and eval/acc every step.
    const trainer = script(t, 'trainer.mjs', `
      const [id, from, first, last, offset, how] = process.argv.slice(2);
      const opts = { project: 'attempts', name: 'r ' + id, id, onError: 'raise', console: true };
      if (id === 'job') opts.group = 'gjob';
      if (from.startsWith('resume:')) opts.resumeFrom = { runId: id, step: Number(from.slice(7)) };
      if (from.startsWith('fork:')) { const [, runId, step] = from.split(':'); opts.forkFrom = { runId, step: Number(step) }; }
      const run = await logd.init(opts);
      for (let s = Number(first); s <= Number(last); s++) {
        const row = { loss: s + Number(offset), 'eval/acc': (s + Number(offset)) / 2000, note: new logd.Text(id + ' text ' + s + ' +' + offset) };
        if (s % 10 === 0) row.hist = new logd.Histogram([s, s + 1, s + 2, Number(offset)]);
        if (s === 45) row.pic = logd.Image.fromPixels(new Uint8Array(4 * 4 * 3).fill(Number(offset) ? 200 : 50), { width: 4, height: 4, caption: 'pic +' + offset });
        run.log(row, { step: s });
        console.log(id + ' printed step ' + s);
      }
      if (how === 'kill') { await run.flush(10000); process.kill(process.pid, 'SIGKILL'); }
      console.log('done ' + (await run.finish()).state);
    `);
    const first = await runScript(t, trainer, ['job', '-', '0', '50', '0', 'kill']);
    expect(first.signal).toBe('SIGKILL');
    const second = await runScript(t, trainer, ['job', 'resume:40', '41', '60', '1000']);
    expect(second.stdout, second.stderr).toContain('done finished');
    const fork = await runScript(t, trainer, ['fk', 'fork:job:20', '21', '25', '9000']);
    expect(fork.stdout, fork.stderr).toContain('done finished');
    [plainRun] = await logRuns(t, [{ project: 'attempts', name: 'plain', steps: 30, row: '{ loss: step }' }]);
    ui = await startUi(t);
    chrome = await launchChromium();
    const token = await chrome.context.newPage();
    await token.goto(ui.url);
    await token.close();
  }, 180_000);
  afterAll(async () => {
    await chrome?.close();
    await ui?.stop();
    await t?.cleanup();
  });

  it('the history API gives the latest timeline by default and, with superseded=1, the superseded rows per earlier attempt', async () => {
    const plain = (await getJson(ui, '/api/runs/job/history?keys=loss&points=1000')).body;
    expect(plain.series.loss.step).toEqual(range(0, 60));
    expect(plain.superseded).toBeUndefined();
    const all = (await getJson(ui, '/api/runs/job/history?keys=loss&keys=eval%2Facc&points=1000&superseded=1')).body;
    expect(all.series.loss.step).toEqual(range(0, 60));
    expect(all.series.loss.value[45]).toBe(1045);
    expect(all.superseded.loss).toHaveLength(1);
    expect(all.superseded.loss[0]).toMatchObject({ attempt: 1, step: range(41, 50), value: range(41, 50), points: 10 });
    expect(all.superseded['eval/acc'][0].step).toEqual(range(41, 50));
    // A run nothing superseded: an empty answer, no read.
    expect((await getJson(ui, `/api/runs/${plainRun}/history?keys=loss&superseded=1`)).body.superseded).toEqual({});
  });

  it('the run page lists both attempts (the second resumed from step 40) and marks step 40 on every chart', async () => {
    const page = await openPage('/runs/job');
    const rows = page.locator('#run-attempts tr.attempt');
    await rows.first().waitFor({ timeout: 30_000 });
    expect(await rows.count()).toBe(2);
    expect(await page.locator('#run-attempts summary').textContent()).toBe('Attempts (2)');
    expect(await rows.nth(0).locator('.resumed-from').textContent()).toBe('—');
    expect(await rows.nth(0).locator('.attempt-end').textContent()).toMatch(/^crashed/);
    expect(await rows.nth(1).getAttribute('data-attempt')).toBe('2');
    expect(await rows.nth(1).locator('.resumed-from').textContent()).toBe('40');
    expect(await rows.nth(1).locator('.from-step').textContent()).toBe('41');
    expect(await rows.nth(1).locator('.attempt-end').textContent()).toBe('finished');
    const cells = await rows.nth(1).locator('td').allTextContents();
    expect(cells[1]).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/); // started
    expect(cells[4]).toMatch(/^\d+$/); // pid
    expect(await page.locator('#superseded-note').textContent()).toMatch(/^10 row\(s\) of earlier attempts/);
    expect(await page.locator('#run-fork').count()).toBe(0);

    for (const key of KEYS) {
      const chart = page.locator(`.chart[data-key="${key}"]`);
      await chart.locator('canvas').waitFor({ timeout: 30_000 });
      expect(await chart.getAttribute('data-points')).toBe('61'); // the latest timeline: 0..60 once
      const marker = chart.locator('.attempt-marker');
      expect(await marker.count()).toBe(1);
      expect(await marker.getAttribute('data-step')).toBe('40');
      expect(await marker.getAttribute('data-attempt')).toBe('2');
      expect(await marker.textContent()).toBe('attempt 2');
      expect(await marker.locator('.chart-marker-label').getAttribute('title')).toMatch(/^attempt 2: resumed from step 40, started /);
      expect(await markerOffset(chart, 40)).toBeLessThan(1.5);
      // Across the plot. A chart draws itself again when its data or layout changes (the marker element is made
      // anew): between two draws the locator finds no box, so the height is looked at until there is one.
      await expect.poll(async () => (await marker.boundingBox())?.height ?? 0, { timeout: 15_000 }).toBeGreaterThan(100);
    }
    await page.screenshot({ path: path.join(shots(), 'run-attempts.png'), fullPage: true });
    await page.close();
  });

  it('on the wall-time axis the marker stands at the second attempt\'s start', async () => {
    const info = (await getJson(ui, '/api/runs/job')).body;
    const startedAt = info.metadata.attempts[1].startedAt as number;
    const page = await openPage('/runs/job?x=time');
    const chart = page.locator('.chart[data-key="loss"]');
    await chart.locator('canvas').waitFor({ timeout: 30_000 });
    const marker = chart.locator('.attempt-marker');
    expect(await marker.isVisible()).toBe(true);
    expect(await markerOffset(chart, startedAt)).toBeLessThan(1.5);
    await page.close();
  });

  it('"show superseded rows" is off by default, draws the 10 superseded points of each chart when on, and hides them when off again', async () => {
    const page = await openPage('/runs/job');
    const toggle = page.locator('#show-superseded');
    await toggle.waitFor({ timeout: 30_000 });
    expect(await toggle.isChecked()).toBe(false);
    const charts = KEYS.map((k) => page.locator(`.chart[data-key="${k}"]`));
    for (const c of charts) {
      await c.locator('canvas').waitFor({ timeout: 30_000 });
      expect(await c.getAttribute('data-superseded')).toBe('0');
    }
    await toggle.check();
    expect(new URL(page.url()).searchParams.get('superseded')).toBe('1');
    for (const c of charts) {
      await waitUntil(async () => (await c.getAttribute('data-superseded')) === '10', 15_000, 'the superseded points drawn');
      expect(await c.getAttribute('data-series')).toBe('1'); // still one metric; the superseded line is extra
      expect(await c.getAttribute('data-points')).toBe('61'); // steps 41..50 are shared with the latest timeline
      expect(await c.locator('.u-legend').textContent()).toContain('(attempt 1, superseded)');
      expect(await c.locator('.attempt-marker').count()).toBe(1);
    }
    await page.screenshot({ path: path.join(shots(), 'run-superseded.png'), fullPage: true });
    // The URL keeps it: a reload still shows them.
    await page.reload();
    await page.locator('.chart[data-key="loss"] canvas').waitFor({ timeout: 30_000 });
    expect(await page.locator('#show-superseded').isChecked()).toBe(true);
    await waitUntil(async () => (await charts[0].getAttribute('data-superseded')) === '10', 15_000, 'the superseded points after a reload');
    await page.locator('#show-superseded').uncheck();
    expect(new URL(page.url()).searchParams.get('superseded')).toBeNull();
    for (const c of charts) {
      await waitUntil(async () => (await c.getAttribute('data-superseded')) === '0', 15_000, 'the superseded points hidden');
      expect(await c.locator('.u-legend').textContent()).not.toContain('superseded');
    }
    await page.close();
  });

  it('a fork says which run and step it came from, and links to that run', async () => {
    const page = await openPage('/runs/fk');
    const line = page.locator('#run-fork');
    await line.waitFor({ timeout: 30_000 });
    expect(await line.textContent()).toMatch(/^forked from job at step 20 /);
    const a = page.locator('#fork-source');
    expect(await a.getAttribute('href')).toBe('/runs/job');
    // One attempt, nothing superseded: no table, no toggle, no markers.
    await page.locator('.chart[data-key="loss"] canvas').waitFor({ timeout: 30_000 });
    expect(await page.locator('#run-attempts').count()).toBe(0);
    expect(await page.locator('#show-superseded').count()).toBe(0);
    expect(await page.locator('.attempt-marker').count()).toBe(0);
    await a.click();
    await page.waitForURL(/\/runs\/job$/);
    await page.locator('#run-attempts tr.attempt').first().waitFor({ timeout: 30_000 });
    await page.close();
  });

  it('the console API marks each line of a continued run with its attempt and lists the attempts; a run of one is not marked', async () => {
    const a = (await getJson(ui, '/api/runs/job/console?tail=5000')).body;
    expect(a.lines.map((l: { attempt: number; line: string }) => [l.attempt, l.line])).toEqual([
      ...range(0, 50).map((s) => [1, `job printed step ${s}`]),
      ...range(41, 60).map((s) => [2, `job printed step ${s}`]),
    ]);
    expect(a.attempts.map((x: { n: number; resumedFromStep?: number; fromStep: number }) => [x.n, x.fromStep, x.resumedFromStep])).toEqual([[1, 0, undefined], [2, 41, 40]]);
    // The group's answer: the attempts by run, each line with its own.
    const g = (await getJson(ui, '/api/groups/gjob/console?tail=5000')).body;
    expect(Object.keys(g.attempts)).toEqual(['job']);
    expect(g.lines.filter((l: { attempt: number }) => l.attempt === 2)).toHaveLength(20);
    const fk = (await getJson(ui, '/api/runs/fk/console?tail=5000')).body;
    expect(fk.lines).toHaveLength(5);
    expect(fk.attempts).toBeUndefined();
    expect(fk.lines.every((l: object) => !('attempt' in l))).toBe(true);
  });

  it("the Logs tab opens each attempt's part with a heading; the group's Logs say the attempt beside each line's name", async () => {
    const page = await openPage('/runs/job?tab=logs');
    await page.locator('#log-lines[data-loaded]').waitFor({ timeout: 30_000 });
    const headings = page.locator('#log-lines .log-attempt');
    expect(await headings.count()).toBe(2);
    expect(await headings.nth(0).textContent()).toMatch(/^attempt 1 of 2: started \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC on .+ \(pid \d+\), from step 0$/);
    expect(await headings.nth(1).textContent()).toMatch(/^attempt 2 of 2: started .* UTC on .+ \(pid \d+\), resumed from step 40$/);
    expect(await page.locator('#log-lines').getAttribute('data-lines')).toBe('71'); // headings are not lines
    // Each heading stands right before its attempt's first line.
    const order = await page.locator('#log-lines > *').evaluateAll((els) => els.map((e) => (e.classList.contains('log-attempt') ? `H${(e as HTMLElement).dataset.attempt}` : (e.querySelector('.log-text')?.textContent ?? ''))));
    expect(order[0]).toBe('H1');
    expect(order[1]).toBe('job printed step 0');
    expect(order.indexOf('H2')).toBe(52);
    expect(order[53]).toBe('job printed step 41');
    expect(await page.locator('#log-lines .log-line[data-attempt="2"]').count()).toBe(20);
    await page.screenshot({ path: path.join(shots(), 'run-logs-attempts.png'), fullPage: true });
    await page.close();

    const group = await openPage(`/groups/gjob?tab=logs`);
    await group.locator('#log-lines[data-loaded]').waitFor({ timeout: 30_000 });
    expect(await group.locator('#log-lines .log-attempt').count()).toBe(0);
    const who = await group.locator('#log-lines .log-who').allTextContents();
    expect(who).toHaveLength(71);
    expect(who[0]).toMatch(/ · attempt 1$/);
    expect(who[70]).toMatch(/ · attempt 2$/);
    await group.close();

    // A run of one attempt: no heading, no mark.
    const fk = await openPage('/runs/fk?tab=logs');
    await fk.locator('#log-lines[data-loaded]').waitFor({ timeout: 30_000 });
    expect(await fk.locator('#log-lines .log-line').count()).toBe(5);
    expect(await fk.locator('#log-lines .log-attempt, #log-lines .log-who').count()).toBe(0);
    await fk.close();
  });

  it("the Media tab says which attempt logged each text and image; a rewind's superseded histograms are left out of the distribution", async () => {
    // The API: each entry with its attempt (by time), the run's attempts listed.
    const text = (await getJson(ui, '/api/runs/job/media?kind=text&key=note')).body;
    expect(text.attempts.map((a: { n: number }) => a.n)).toEqual([1, 2]);
    expect(text.entries.map((e: { attempt: number; step: number; text: string }) => [e.attempt, e.step, e.text])).toEqual([
      ...range(0, 50).map((s) => [1, s, `job text ${s} +0`]),
      ...range(41, 60).map((s) => [2, s, `job text ${s} +1000`]),
    ]);
    expect((await getJson(ui, '/api/runs/fk/media?kind=text&key=note')).body.entries.every((e: object) => !('attempt' in e))).toBe(true);

    const page = await openPage('/runs/job?tab=media');
    // Text: step 45 twice, attempt 1's superseded by attempt 2's rewind to 40, listed first.
    const at45 = page.locator('.text-panel[data-key="note"] li.text-entry[data-step="45"]');
    await at45.first().waitFor({ timeout: 30_000 });
    expect(await at45.count()).toBe(2);
    expect(await at45.nth(0).locator('.text-step').textContent()).toBe('step 45 · attempt 1, superseded');
    expect(await at45.nth(0).getAttribute('class')).toContain('superseded');
    expect(await at45.nth(0).locator('.text-value').textContent()).toBe('job text 45 +0');
    expect(await at45.nth(1).locator('.text-step').textContent()).toBe('step 45 · attempt 2');
    expect(await page.locator('.text-panel li.text-entry.superseded').count()).toBe(10);
    expect(await page.locator('.text-panel li.text-entry[data-step="40"]').count()).toBe(1); // at the step resumed from: kept
    // The distribution: steps 0..60 every 10, attempt 1's step 50 left out for attempt 2's.
    const dist = page.locator('.dist-panel[data-key="hist"]');
    await dist.locator('.dist-chart[data-drawn]').waitFor({ timeout: 30_000 });
    expect(await dist.locator('.dist-chart').getAttribute('data-steps')).toBe('7');
    expect(await dist.getAttribute('data-superseded')).toBe('1');
    expect(await dist.locator('.media-note').textContent()).toMatch(/^1 histogram\(s\) of earlier attempts .* superseded, left out$/);
    // Images: both attempts' at step 45, the superseded one first.
    const figs = page.locator('.image-panel[data-key="pic"] figure.media-figure');
    await figs.nth(1).waitFor({ timeout: 30_000 });
    expect(await figs.locator('.caption').allTextContents()).toEqual(['pic +0', 'pic +1000']);
    expect(await figs.nth(0).locator('.image-facts').textContent()).toMatch(/^attempt 1, superseded · 4×4/);
    expect(await figs.nth(0).getAttribute('class')).toContain('superseded');
    expect(await figs.nth(1).locator('.image-facts').textContent()).toMatch(/^attempt 2 · 4×4/);
    await page.screenshot({ path: path.join(shots(), 'run-media-attempts.png'), fullPage: true });
    await page.close();

    // A run of one attempt: nothing said of attempts.
    const fk = await openPage('/runs/fk?tab=media');
    await fk.locator('.text-panel li.text-entry').first().waitFor({ timeout: 30_000 });
    expect(await fk.locator('.text-panel .text-step').allTextContents()).not.toContain(expect.stringContaining('attempt'));
    expect((await fk.locator('.text-panel .text-step').allTextContents()).some((t) => t.includes('attempt'))).toBe(false);
    await fk.close();
  });

  it('a run never resumed shows none of it', async () => {
    const page = await openPage(`/runs/${encodeURIComponent(plainRun)}`);
    await page.locator('.chart[data-key="loss"] canvas').waitFor({ timeout: 30_000 });
    expect(await page.locator('#run-attempts, #run-fork, #show-superseded, .chart-marker').count()).toBe(0);
    await page.close();
  });
});
