// Issue 21 on the dashboard: a real daemon judges two real TypeScript ranks
// that log 40 explicit steps and then pause while alive (`job stalled` after
// the floor, 10 s here); `logd ui` serves the merged group health and a real
// Chromium shows it: the group page's strip (both ranks stalled, the event
// with its evidence, the stacks side by side) and the run page's events.
// Screenshots go to LOGD_SCREENSHOTS when it is set (docs/screenshots), else
// a temp dir.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChildProcess } from 'node:child_process';
import type { Page } from 'playwright-core';
import { ROOT, makeEnv, script, spawnScript, startDaemon, waitUntil, type TestEnv } from '../helpers.js';
import { startUi, getJson, logRuns, type UiProcess } from './helpers.js';
import { chromiumMissing, launchChromium, type Chromium } from './browser.js';
import { mergeGroupHealth } from '../../daemon/ui/health.js';
import type { RunInfo } from '../../src/wire.js';
import type { HealthEvent } from '../../src/health.js';

const missing = chromiumMissing();
const GROUP = 'hang <b>"7"</b>';
/** Long enough for the page to open on ranks still \`ok\`, so the stall reaches it live. */
const STALL_FLOOR_S = 10;

let t: TestEnv;
let ui: UiProcess;
let chrome: Chromium;
const workers: ChildProcess[] = [];
const runIds: string[] = [];

const shots = () => {
  const dir = process.env.LOGD_SCREENSHOTS ? path.resolve(ROOT, process.env.LOGD_SCREENSHOTS) : path.join(t.dir, 'shots');
  fs.mkdirSync(dir, { recursive: true });
  return dir;
};

async function openPage(path: string): Promise<Page> {
  const page = await chrome.context.newPage();
  page.on('pageerror', (e) => process.stderr.write(`[page error] ${e.message}\n`));
  await page.goto(ui.base + path);
  return page;
}

describe.skipIf(missing !== null)(`rank health on the dashboard${missing ? ` (skipped: ${missing})` : ''}`, () => {
  beforeAll(async () => {
    t = makeEnv();
    await startDaemon(t);
    const rank = script(t, 'rank.mjs', `
      const run = await logd.init({ project: 'health', name: 'r' + process.env.RANK, group: process.argv[2],
        config: { 'logd.health': { stallFloorS: ${STALL_FLOOR_S} } } });
      console.log('run ' + run.id);
      for (let step = 0; step < 40; step++) {
        run.log({ loss: 1 / (step + 1) }, { step });
        await new Promise((r) => setTimeout(r, 50));
      }
      await run.flush();
      console.log('paused');
      await new Promise((r) => setTimeout(r, 120_000)); // alive, no step: a hang
    `);
    for (const r of [0, 1]) workers.push(spawnScript(t, rank, [GROUP], { RANK: String(r), WORLD_SIZE: '2', LOCAL_RANK: String(r) }));
    // Meanwhile: a finished group that never stalled.
    await logRuns(t, [{ project: 'health', name: 'calm', group: 'calm', rank: 0, steps: 30, row: '{ x: step }' }]);
    await waitUntil(() => workers.every((w) => (w as unknown as { lines: string[] }).lines.includes('paused')), 20_000, 'both ranks to log 40 steps');
    for (const w of workers) runIds.push((w as unknown as { lines: string[] }).lines.find((l) => l.startsWith('run '))!.slice(4));
    ui = await startUi(t);
    chrome = await launchChromium();
    const first = await chrome.context.newPage();
    await first.goto(ui.url);
    await first.close();
  }, 60_000);
  afterAll(async () => {
    for (const w of workers) w.kill('SIGKILL');
    await chrome?.close();
    await ui?.stop();
    await t?.cleanup();
  });

  it('the group page shows each rank stalled, the `job stalled` event with its evidence, and the stacks side by side', async () => {
    const page = await openPage(`/groups/${encodeURIComponent(GROUP)}`);
    const strip = page.locator('#health');
    // Opened while both ranks are still judged ok: the stall reaches the page live, without a reload.
    await waitUntil(async () => (await strip.locator('tr.rank-health').count()) === 2, 10_000, 'the strip to show both ranks');
    expect(await strip.locator('tr.rank-health').evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-state')))).toEqual(['ok', 'ok']);
    expect(await strip.locator('li.health-event').count()).toBe(0);
    expect(await strip.locator('.no-health-events').textContent()).toBe('no health events');
    await strip.locator('li.health-event[data-kind="job stalled"]').waitFor({ timeout: 25_000 });
    await waitUntil(async () => (await strip.locator('tr.rank-health[data-state="stalled"]').count()) === 2, 10_000, 'both ranks shown stalled');
    const rows = await strip.locator('tr.rank-health').evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));
    expect(rows.map((r) => r[0])).toEqual(['rank 0', 'rank 1']);
    for (const r of rows) {
      expect(r[1]).toBe('stalled');
      expect(r[2]).toBe('39'); // the last step
      expect(Number(r[3])).toBeGreaterThan(5); // steps/s (one per 50 ms)
      expect(r[4]).toMatch(/s ago|min ago/);
    }
    expect(await page.locator('#health-verdict').textContent()).toBe('stalled');
    const event = strip.locator('li.health-event[data-kind="job stalled"]').first();
    expect(await event.locator('.event-ranks').textContent()).toBe('rank 0, rank 1');
    const evidence = await event.locator('.event-evidence').textContent();
    expect(evidence).toMatch(/^no rank has stepped for [\d.]+ s: /);
    expect(evidence).toMatch(/rank 0 at step 39 /);
    expect(evidence).toMatch(/rank 1 at step 39 /);
    // Newest first.
    const times = await strip.locator('li.health-event time').evaluateAll((ts) => ts.map((x) => Date.parse(x.getAttribute('datetime')!)));
    expect([...times].sort((a, b) => b - a)).toEqual(times);

    // Both ranks were asked for their stacks (SIGUSR2: a Node diagnostic report). A Node rank
    // idle in its event loop reports no JavaScript frame; the panel says so, rank by rank.
    const toggle = event.locator('button.stacks-toggle');
    const panel = event.locator('.stacks');
    expect(await panel.isHidden()).toBe(true);
    await toggle.click();
    expect(await toggle.getAttribute('aria-expanded')).toBe('true');
    const stacks = panel.locator('.stack');
    expect(await stacks.evaluateAll((els) => els.map((e) => e.getAttribute('data-run-id')))).toEqual(runIds);
    for (let i = 0; i < 2; i++) {
      const s = stacks.nth(i);
      expect(await s.isVisible()).toBe(true);
      expect(await s.locator('.stack-head').textContent()).toMatch(new RegExp(`^rank ${i} pid \\d+ · outside a collective`));
      expect((await s.locator('.stack-text').textContent())!.trim().length).toBeGreaterThan(0);
    }
    // Nobody is inside a collective here, so no rank stands out from the others.
    expect(await panel.locator('.stack.stands-out').count()).toBe(0);
    await strip.screenshot({ path: path.join(shots(), 'group-health-stacks.png') });
    // A live update (every 2 s) leaves an open toggle open.
    await page.waitForTimeout(2500);
    expect(await panel.isVisible()).toBe(true);
    // The API behind the strip: one event per (at, kind, ranks), however many ranks carry it.
    const api = await getJson(ui, `/api/groups/${encodeURIComponent(GROUP)}/health`);
    expect(api.status).toBe(200);
    const keys = api.body.events.map((e: { at: number; kind: string; runIds: string[] }) => `${e.at}|${e.kind}|${e.runIds.join(',')}`);
    expect(new Set(keys).size).toBe(keys.length);
    expect(api.body.stalled).toBe(true);
    // The page's data reached the DOM as text.
    expect(await page.locator('#group-name').textContent()).toBe(GROUP);
    expect(await page.locator('#group-name b').count()).toBe(0);
    await page.close();
  }, 40_000);

  it('the strip draws each rank\'s step rate over time: a line per rank, the newest sample 0 steps/s while they stall, an earlier one above', async () => {
    const page = await openPage(`/groups/${encodeURIComponent(GROUP)}`);
    const rate = page.locator('#health #health-rate');
    // The daemon samples every 5 s: both ranks stepped (2 s at 20 steps/s), then a sample sees them stopped; the page polls every 2 s.
    await waitUntil(async () => (await rate.locator('.rate-latest[data-steps-per-s="0"]').count()) === 2, 20_000, 'a sample of 0 steps/s for both ranks');
    expect(await rate.isVisible()).toBe(true);
    const chart = rate.locator('.chart');
    expect(await chart.getAttribute('data-series')).toBe('2');
    expect(Number(await chart.getAttribute('data-points'))).toBeGreaterThanOrEqual(2);
    expect(await chart.locator('canvas').count()).toBe(1);
    expect(await chart.locator('.u-legend').textContent()).toMatch(/rank 0.*rank 1/);
    const latest = await rate.locator('.rate-latest').evaluateAll((els) => els.map((e) => [e.getAttribute('data-health-run-id'), e.getAttribute('data-steps-per-s'), e.textContent]));
    expect(latest).toEqual([[runIds[0], '0', 'rank 0 0.00 steps/s'], [runIds[1], '0', 'rank 1 0.00 steps/s']]);
    // The same series through the API: an earlier sample saw the ranks step.
    const api = await getJson(ui, `/api/groups/${encodeURIComponent(GROUP)}/health`);
    for (const r of api.body.ranks) {
      expect(r.rate.at(-1).stepsPerS).toBe(0);
      expect(Math.max(...r.rate.map((p: { stepsPerS: number }) => p.stepsPerS))).toBeGreaterThan(0);
    }
    await page.locator('#health').screenshot({ path: path.join(shots(), 'group-health-rate.png') });
    await page.close();
  }, 30_000);

  it('the run page shows its run\'s events, compact; a group with no events says so in one line', async () => {
    const page = await openPage(`/runs/${runIds[1]}`);
    const events = page.locator('#run-health .health-events.compact');
    await events.locator('li.health-event[data-kind="job stalled"]').waitFor({ timeout: 15_000 });
    expect(await events.locator('li.health-event[data-kind="job stalled"] .event-ranks').first().textContent()).toBe('rank 0, rank 1');
    await page.locator('#run-health').screenshot({ path: path.join(shots(), 'run-health-events.png') });
    await page.goto(`${ui.base}/groups/calm`);
    await page.locator('#health .no-health-events').waitFor({ timeout: 15_000 });
    expect(await page.locator('#health .no-health-events').textContent()).toBe('no health events');
    expect(await page.locator('#health li.health-event').count()).toBe(0);
    await page.close();
  }, 30_000);

  it('stacks of a real DDP stall side by side: the rank outside the collective and the named cause stand out; stack text stays text', async () => {
    // The strip's answer as daemon/ui serves it for a torchrun job (test/python/health.test.ts makes the real one).
    const now = Date.now() / 1000;
    const stack = (rank: number, inCollective: boolean, text: string) => ({ rank, runId: `r${rank}`, pid: 100 + rank, text, inCollective, top: text.split('\n').at(-1), cpuPercent: inCollective ? 0 : 2 });
    const stall: HealthEvent = {
      at: now - 20, kind: 'job stalled', group: 'calm', ranks: [2, 0, 1], runIds: ['r2', 'r0', 'r1'],
      cause: { ranks: [2], runIds: ['r2'], why: 'the only rank whose stack is outside a collective' }, evidence: 'no rank has stepped for 9.0 s',
      stacks: [stack(1, true, 'File "torch/distributed/distributed_c10d.py", line 2 in all_reduce'), stack(2, false, 'File "train.py", line 60 in <script>alert(1)</script>\n  time.sleep(60)'),
        stack(0, true, 'File "torch/distributed/distributed_c10d.py", line 2 in all_reduce')],
    };
    const answer = {
      group: 'calm', stalled: false, now,
      ranks: [0, 1, 2].map((rank) => ({ runId: `r${rank}`, rank, host: 'n', pid: 100 + rank, step: 31, stepAt: now - 3, stepS: 0.2, stepsPerS: 5, lag: 0, cpuPerStepS: 0.05, state: 'ok', at: now, name: `r${rank}`, runState: 'finished' })),
      events: [stall, { at: now - 5, kind: 'recovered', group: 'calm', ranks: [0, 1, 2], runIds: ['r0', 'r1', 'r2'], evidence: 'stepping again' }],
    };
    const page = await chrome.context.newPage();
    await page.route('**/api/groups/calm/health', (route) => route.fulfill({ json: answer }));
    await page.goto(`${ui.base}/groups/calm`);
    const strip = page.locator('#health');
    await strip.locator('li.health-event').nth(1).waitFor({ timeout: 15_000 });
    expect(await strip.locator('li.health-event').evaluateAll((lis) => lis.map((li) => li.getAttribute('data-kind')))).toEqual(['recovered', 'job stalled']);
    const event = strip.locator('li.health-event[data-kind="job stalled"]');
    expect(await event.locator('.event-ranks').textContent()).toBe('rank 0, rank 1, rank 2');
    expect(await event.locator('.event-cause').textContent()).toBe('likely cause: rank 2: the only rank whose stack is outside a collective');
    await event.locator('button.stacks-toggle').click();
    const stacks = event.locator('.stack');
    expect(await stacks.evaluateAll((els) => els.map((e) => [e.getAttribute('data-run-id'), e.classList.contains('stands-out')]))).toEqual([['r0', false], ['r1', false], ['r2', true]]);
    expect(await stacks.nth(2).locator('pre.stack-text').textContent()).toBe('File "train.py", line 60 in <script>alert(1)</script>\n  time.sleep(60)');
    expect(await stacks.nth(2).locator('.outside').textContent()).toBe('outside a collective');
    expect(await page.locator('script').count()).toBe(1);
    await strip.screenshot({ path: path.join(shots(), 'group-health-ddp-stacks.png') });
    await page.close();
  }, 20_000);
});

describe('a group\'s health, merged from its runs (daemon/ui/health.ts)', () => {
  const run = (id: string, state: string, health: unknown, rank: number | null): RunInfo =>
    ({ id, name: id, state, metadataJson: JSON.stringify({ health, rank: rank === null ? null : { rank, worldSize: 2 } }) }) as unknown as RunInfo;
  const ev = (at: number, kind: HealthEvent['kind'], stacks?: boolean): HealthEvent =>
    ({ at, kind, group: 'g', ranks: [0, 1], runIds: ['a', 'b'], evidence: 'e', ...(stacks ? { stacks: [] } : {}) });
  const progress = (runId: string, rank: number, state: string) => ({ runId, rank, host: 'n', pid: 1, step: 9, stepAt: 1, stepS: 0.1, stepsPerS: 10, lag: 0, cpuPerStepS: null, state, at: 2 });

  it('an event every rank carries is one event (the copy with stacks kept); ranks ordered by rank; stalled until recovered', () => {
    const g = mergeGroupHealth([
      run('b', 'running', { progress: progress('b', 1, 'stalled'), events: [ev(10, 'job stalled', true)] }, 1),
      run('a', 'running', { progress: progress('a', 0, 'stalled'), events: [ev(10, 'job stalled')] }, 0),
      run('c', 'crashed', null, null),
    ], 50);
    expect(g.events).toHaveLength(1);
    expect(g.events[0].stacks).toEqual([]);
    expect(g.ranks.map((r) => [r.runId, r.state])).toEqual([['a', 'stalled'], ['b', 'stalled'], ['c', 'crashed']]);
    expect(g.stalled).toBe(true);
    expect(g.now).toBe(50);
    const after = mergeGroupHealth([run('a', 'running', { progress: progress('a', 0, 'ok'), events: [ev(10, 'job stalled'), ev(20, 'recovered')] }, 0)]);
    expect(after.events.map((e) => e.kind)).toEqual(['job stalled', 'recovered']);
    expect(after.stalled).toBe(false);
  });
});
