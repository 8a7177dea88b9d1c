// Issue 38's dashboard items in a real Chromium on a real daemon's run:
// y-axis labels that fit and tell ticks apart on a flat series (item 15), the
// Info tab's times and rank in words (18), a Logs tab that says why it is
// empty (19), and the distribution chart's axis labels and band legend (20).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { makeEnv, script, runScript, type TestEnv } from '../helpers.js';
import { dashboardFor, getJson } from './helpers.js';
import { chromiumMissing } from './browser.js';

const missing = chromiumMissing();
let t: TestEnv;
let dash: Awaited<ReturnType<typeof dashboardFor>>;
let runId = '';

const openPage = (p: string): Promise<Page> => dash.open(p);

describe.skipIf(missing !== null)(`the first hour in the dashboard, round 2${missing ? ` (skipped: ${missing})` : ''}`, () => {
  beforeAll(async () => {
    t = makeEnv();
    // A run that prints nothing: flat series near 17.848 and 249.05, a wide one in the millions, and a histogram.
    const file = script(t, 'flat.mjs', `
      const run = await logd.init({ project: 'flat', name: 'flat' });
      for (let step = 0; step < 50; step++) {
        run.log({ 'gpu/util': 17.848 + (step % 2) * 0.002, 'gpu/mem_mib': 249.05, 'big': 1234567 + step * 1000,
          'grad/w': new logd.Histogram(Array.from({ length: 200 }, (_, i) => Math.sin(i + step)), { bins: 16 }) }, { step });
      }
      // Half a second: shorter than the 2 s sampling interval, longer than the 65 ms a just-started sampler needs
      // before its first CPU figure (daemon/sampler/node-metrics.ts cpuMeasurableAt).
      await new Promise((r) => setTimeout(r, 500));
      await run.finish();
      console.log('run ' + run.id);
    `);
    const r = await runScript(t, file, [], { RANK: '2', LOCAL_RANK: '2', WORLD_SIZE: '4' });
    expect(r.exitCode, r.stderr).toBe(0);
    runId = r.stdout.split('\n').find((l) => l.startsWith('run '))!.slice(4);
    dash = await dashboardFor(t);
  }, 180_000);
  afterAll(async () => {
    await dash?.close();
    await t?.cleanup();
  });

  it('y-axis labels fit their axis and tell every tick apart, on a flat series too (item 15)', async () => {
    const page = await openPage(`/runs/${runId}`);
    for (const [key, lo, hi] of [['gpu/util', 17.8, 17.9], ['gpu/mem_mib', 248, 250.1], ['big', 1.2e6, 1.29e6]] as const) {
      const chart = page.locator(`.chart[data-key="${key}"]`);
      await chart.scrollIntoViewIfNeeded();
      await page.locator(`.chart[data-key="${key}"][data-drawn]`).waitFor({ timeout: 30_000 });
      const ticks = JSON.parse((await chart.getAttribute('data-y-ticks'))!) as string[];
      expect(ticks.length, key).toBeGreaterThan(1);
      expect(new Set(ticks).size, `${key}: ${ticks}`).toBe(ticks.length);
      // Each label is a number near the data (not "7.848" for 17.848), in order.
      const values = ticks.map(Number);
      for (const v of values) expect(v, `${key}: ${ticks}`).toBeGreaterThanOrEqual(lo - (hi - lo));
      for (const v of values) expect(v, `${key}: ${ticks}`).toBeLessThanOrEqual(hi + (hi - lo));
      expect([...values].sort((a, b) => a - b)).toEqual(values);
      // The widest label fits the axis with room for its ticks.
      expect(Number(await chart.getAttribute('data-y-label-width')) + 10).toBeLessThanOrEqual(Number(await chart.getAttribute('data-y-axis-size')));
    }
    await page.close();
  });

  it('the Info tab: times as times and the rank in words, no raw Unix seconds or JSON (item 18)', async () => {
    const page = await openPage(`/runs/${runId}?tab=info`);
    await page.locator('#metadata').waitFor({ timeout: 30_000 });
    const text = (await page.locator('#metadata').textContent())! + (await page.locator('#writers').textContent())!;
    expect(text).toContain('rank 2 of 4 (local rank 2');
    expect(text).not.toMatch(/1\.\d+e\+9/);
    expect(text).not.toMatch(/\{"rank"/);
    expect(await page.locator('#writers').textContent()).toMatch(/joinedAt.*ago/);
    // The run's package list (the repository's package.json, where the trainer ran), read when opened (issue 38 item 8).
    const own = page.locator('#own-packages');
    await own.locator('summary').click();
    await page.waitForFunction(() => /better-sqlite3==\d/.test(document.querySelector('#own-packages pre')?.textContent ?? ''), null, { timeout: 30_000 });
    expect(await own.locator('summary').textContent()).toMatch(/^The \d+ packages installed$/);
    // Its code and environment (item 8): the command that ran and the runtime, in words.
    await page.locator('#environment').waitFor();
    expect(await page.locator('#environment').textContent()).toMatch(/command.*flat\.mjs.*env.*node /s);
    await page.close();
  });

  it('a run shorter than the sampling interval: sampled as it began and as it ended, and the System tab says so (item 16)', async () => {
    const r = await getJson(dash.ui, `/api/runs/${runId}`);
    const created = Date.parse(r.body.createdAt) / 1000;
    const finished = Date.parse(r.body.finishedAt) / 1000;
    expect(finished - created).toBeLessThan(2); // shorter than the default 2 s interval
    const s = await getJson(dash.ui, `/api/runs/${runId}/system`);
    const cpu = s.body.series.cpu ?? Object.values(s.body.series)[0];
    expect(cpu.time.length, `created ${created}, finished ${finished}; samples: ${JSON.stringify(Object.fromEntries(Object.entries(s.body.series as Record<string, { time: number[] }>).slice(0, 6).map(([k, v]) => [k, v.time])))}`).toBeGreaterThanOrEqual(2);
    // The first sample near the start (not both at the finish, milliseconds apart, as before).
    expect(cpu.time[0] - created).toBeLessThan((finished - created) / 2 + 0.05);
    expect(cpu.time[cpu.time.length - 1] - cpu.time[0]).toBeGreaterThan((finished - created) / 2);
    const page = await openPage(`/runs/${runId}?tab=system`);
    await page.locator('.too-short').waitFor({ timeout: 30_000 });
    expect(await page.locator('.too-short').textContent()).toMatch(/^This run lasted \d+\.\d+ s, less than the node's sampling interval: it was sampled as it began and as it ended/);
    await page.close();
  });

  it('the Logs tab of a run that printed nothing says why (item 19)', async () => {
    const page = await openPage(`/runs/${runId}?tab=logs`);
    await page.locator('#logs-empty').waitFor({ timeout: 30_000 });
    expect(await page.locator('#logs-empty').textContent()).toMatch(/has no console output: it printed nothing, or its output was not captured/);
    await page.close();
  });

  it('the distribution chart names its axes and its bands (item 20)', async () => {
    const page = await openPage(`/runs/${runId}?tab=media`);
    const chart = page.locator('.dist-chart[data-key="grad/w"]');
    await page.locator('.dist-chart[data-key="grad/w"][data-drawn]').waitFor({ timeout: 30_000 });
    expect(await chart.locator('.dist-axis-label').textContent()).toContain('x: step');
    expect(await chart.locator('.dist-key').evaluateAll((els) => els.map((e) => e.getAttribute('data-band')))).toEqual(['min–max', '7–93 %', '16–84 %', '31–69 %', 'median']);
    await page.close();
  });
});
