// The System tab on real GPU data: the daemon's sampler runs a stand-in
// nvidia-smi on PATH that replays the real H100 captures in
// test/fixtures/nvidia-smi/h100 (copied from ../shared/fixtures/nvidia-smi-h100).
// Also takes the screenshots of the group page and the System tab that
// README.md and docs/dashboard.md show, and of the compare page in relative
// time (into LOGD_SCREENSHOTS when set, e.g. docs/screenshots; else a temp dir).
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeEnv, script, spawnScript, waitUntil, ROOT, type TestEnv } from '../helpers.js';
import { startUi, getJson, type UiProcess } from './helpers.js';
import { chromiumMissing, launchChromium, type Chromium } from './browser.js';

const missing = chromiumMissing();
const H100 = path.join(ROOT, 'test/fixtures/nvidia-smi/h100');
const capturedPower = fs.readFileSync(path.join(H100, 'loaded-query-gpu-loop-lms500.csv'), 'utf8').trim().split('\n').map((l) => Number(l.split(', ')[8]));

let t: TestEnv;
let ui: UiProcess;
let chrome: Chromium;
const workers: Array<ReturnType<typeof spawnScript>> = [];
const ids: string[] = [];

describe.skipIf(missing !== null)(`System tab on real H100 captures${missing ? ` (skipped: ${missing})` : ''}`, () => {
  beforeAll(async () => {
    t = makeEnv({
      LOGD_SAMPLE_INTERVAL_MS: '500',
      FAKE_NVSMI_FIXTURE: 'h100/loaded-query-gpu-loop-lms500.csv',
      FAKE_NVSMI_APPS_FILE: path.join(H100, 'loaded-compute-apps.csv'),
    });
    const bin = path.join(t.dir, 'bin');
    fs.mkdirSync(bin);
    fs.symlinkSync(path.join(ROOT, 'test/fixtures/nvidia-smi/fake-nvidia-smi'), path.join(bin, 'nvidia-smi'));
    t.env.PATH = `${bin}:${process.env.PATH}`;
    const worker = script(t, 'train.mjs', `
      const rank = Number(process.env.RANK);
      const run = await logd.init({ project: 'llm', name: 'pretrain-rank' + rank, group: 'ddp/350m', config: { lr: 3e-4, batch: 256, model: '350m' } });
      console.log('run ' + run.id);
      let seed = 7 + rank;
      const noise = () => ((seed = (seed * 16807) % 2147483647) / 2147483647 - 0.5);
      for (let step = 0; ; step++) {
        const loss = 2.2 * Math.exp(-step / 60) + 0.9 + 0.08 * noise() + 0.03 * rank;
        run.log({ 'train/loss': loss, 'train/lr': 3e-4 * Math.min(1, (step + 1) / 20), 'train/grad_norm': 1.2 + 0.4 * noise() + (step === 70 ? 6 : 0), 'eval/ppl': Math.exp(loss) }, { step });
        if (step % 5 === 0) await run.flush();
        await new Promise((r) => setTimeout(r, 40));
      }
    `);
    for (const rank of [0, 1, 2, 3]) workers.push(spawnScript(t, worker, [], { RANK: String(rank), WORLD_SIZE: '4', LOCAL_RANK: String(rank) }));
    await waitUntil(() => workers.every((w) => w.lines.some((l) => l.startsWith('run '))), 30_000, 'four ranks to start');
    ids.push(...workers.map((w) => w.lines.find((l) => l.startsWith('run '))!.slice(4)));
    ui = await startUi(t);
    // Enough history and system samples for charts worth looking at.
    await waitUntil(async () => {
      const s = await getJson(ui, `/api/runs/${ids[0]}/system?keys=gpu.0.powerWatts`);
      const r = await getJson(ui, `/api/runs/${ids[3]}`);
      return (s.body.series?.['gpu.0.powerWatts']?.value.length ?? 0) >= 8 && r.body.historyRows >= 120;
    }, 60_000, 'system samples and rows to accumulate');
    chrome = await launchChromium();
    const first = await chrome.context.newPage();
    await first.goto(ui.url);
    await first.close();
  });
  afterAll(async () => {
    for (const w of workers) w.kill('SIGKILL');
    await chrome?.close();
    await ui?.stop();
    await t?.cleanup();
  });

  const shots = () => {
    const dir = process.env.LOGD_SCREENSHOTS ? path.resolve(ROOT, process.env.LOGD_SCREENSHOTS) : path.join(t.dir, 'shots');
    fs.mkdirSync(dir, { recursive: true });
    return dir;
  };

  it("shows the node's H100 from the replayed nvidia-smi: name, utilisation, memory, temperature and power, CPU, memory, disk, network and the run's processes", async () => {
    const api = await getJson(ui, `/api/runs/${ids[0]}/system`);
    expect(api.body.gpus).toEqual([expect.objectContaining({ index: 0, name: 'NVIDIA H100 80GB HBM3', uuid: 'GPU-476d9bb0-d0c4-e9ad-d81b-95e494810aff' })]);
    const power = api.body.series['gpu.0.powerWatts'].value as number[];
    expect(power.every((p) => capturedPower.includes(p))).toBe(true);
    expect(api.body.series['gpu.0.powerPercent'].value.some((p: number) => p > 100)).toBe(true); // 709.75 W of 700 W
    expect(api.body.keys).not.toContain('gpu.0.fanSpeed'); // [N/A] on the SXM board
    const page = await chrome.context.newPage();
    await page.goto(`${ui.base}/runs/${ids[0]}?tab=system`);
    await page.locator('.gpu-table td', { hasText: 'NVIDIA H100 80GB HBM3' }).waitFor({ timeout: 30_000 });
    for (const panel of ['GPU utilisation (%)', 'GPU memory allocated (%)', 'GPU temperature (°C)', 'GPU power (W)']) {
      const chart = page.locator(`.chart[data-panel="${panel}"]`);
      await chart.locator('canvas').waitFor({ timeout: 30_000 });
      expect((await chart.locator('.u-legend .u-series .u-label').allTextContents()).slice(1)).toEqual(['GPU 0']);
    }
    for (const panel of ['CPU, whole node (%)', 'Memory (%)', 'Disk usage (%)', 'Network since start (bytes)', "The run's processes: memory (RSS MiB)"]) {
      await page.locator(`.chart[data-panel="${panel}"]`).scrollIntoViewIfNeeded();
      await page.locator(`.chart[data-panel="${panel}"] canvas`).waitFor({ timeout: 30_000 });
    }
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({ path: path.join(shots(), 'system-tab.png') });
    expect(fs.statSync(path.join(shots(), 'system-tab.png')).size).toBeGreaterThan(10_000);
    await page.close();
  });

  it("the group page of four live ranks: the mean and its min–max band for every metric (one line per rank a click away), then the node's GPUs (screenshot)", async () => {
    const page = await chrome.context.newPage();
    await page.goto(`${ui.base}/groups/${encodeURIComponent('ddp/350m')}`);
    for (const k of ['eval/ppl', 'train/grad_norm', 'train/loss', 'train/lr']) {
      const chart = page.locator(`.chart[data-key="${k}"]`);
      // Charts are drawn as they come into view; the health strip above them (step rate per rank) takes room.
      await chart.scrollIntoViewIfNeeded({ timeout: 30_000 });
      await chart.locator('canvas').waitFor({ timeout: 30_000 });
      expect(await chart.getAttribute('data-mode')).toBe('band');
    }
    const ranks = await chrome.context.newPage();
    await ranks.goto(`${ui.base}/groups/${encodeURIComponent('ddp/350m')}?mode=ranks`);
    await ranks.locator('.chart[data-key="train/loss"] canvas').waitFor({ timeout: 30_000 });
    expect(await ranks.locator('.chart[data-key="train/loss"]').getAttribute('data-series')).toBe('4');
    await ranks.close();
    // The node's system charts follow the metrics (one node here: the lowest rank's view of it).
    await page.locator('#group-system .gpu-table td', { hasText: 'NVIDIA H100 80GB HBM3' }).waitFor({ timeout: 30_000 });
    expect(await page.locator('#group-system .system').count()).toBe(1);
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({ path: path.join(shots(), 'group-page.png') });
    expect(fs.statSync(path.join(shots(), 'group-page.png')).size).toBeGreaterThan(10_000);
    await page.close();
  });

  it('two ranks compared in relative time: each from its own start, the axis in seconds (screenshot)', async () => {
    const page = await chrome.context.newPage();
    await page.goto(`${ui.base}/compare?runs=${ids[0]},${ids[3]}&x=relative&smooth=0.6`);
    const chart = page.locator('.chart[data-key="train/loss"]');
    await chart.locator('canvas').waitFor({ timeout: 30_000 });
    expect(await chart.getAttribute('data-x')).toBe('relative');
    const span = Number(await chart.getAttribute('data-x-span'));
    expect(span).toBeGreaterThan(1);
    expect(span).toBeLessThan(600);
    await page.screenshot({ path: path.join(shots(), 'compare-relative-time.png') });
    await page.close();
  });
});
