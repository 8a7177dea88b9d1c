// Issue 32 (smaller): the dashboard handed a stored 30 000 x 30 000 PNG (a
// deflate bomb: under 1 MB stored, gigabytes decoded) to the browser as it
// was. Now an image over MAX_SHOWN_PIXELS (16 MP) is a placeholder with a
// download link on the Media tab, and its route answers it only as a download
// (422 for an <img>). Real processes: a run logging a 12 000 x 12 000 image of
// zeros (144 MP, 140 kB stored) beside a small one, `logd ui`, Chromium.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeEnv, script, runScript, startDaemon, type TestEnv } from '../helpers.js';
import { startUi, getJson, type UiProcess } from './helpers.js';
import { chromiumMissing, launchChromium } from './browser.js';

let t: TestEnv;
let ui: UiProcess;
let run = '';
const SIDE = 12_000;

beforeAll(async () => {
  t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000', LOGD_SAMPLE_INTERVAL_MS: '0' });
  await startDaemon(t);
  const r = await runScript(t, script(t, 'bomb.mjs', `
    const { Image } = logd;
    const run = await logd.init({ project: 'media', name: 'bomb' });
    run.log({ big: Image.fromPixels(new Uint8Array(${SIDE * SIDE}), { width: ${SIDE}, height: ${SIDE}, channels: 1, caption: 'zeros' }),
              small: Image.fromPixels(new Uint8Array(64 * 64 * 3).fill(200), { width: 64, height: 64, channels: 3 }) }, { step: 0 });
    await run.finish();
    console.log('run ' + run.id);
  `), [], {}, 120_000);
  expect(r.exitCode, r.stderr).toBe(0);
  run = r.stdout.trim().split(' ')[1];
  ui = await startUi(t);
}, 180_000);
afterAll(async () => {
  await ui?.stop();
  await t?.cleanup();
});

describe('issue 32: an image too large to decode in the browser', () => {
  it('its route answers 422 with what to do, and the bytes only as a download (attachment); a small image as before', async () => {
    const entries = (await getJson(ui, `/api/runs/${run}/media?kind=image`)).body.entries as Array<{ key: string; sha256: string; width: number }>;
    const big = entries.find((e) => e.key === 'big')!;
    const small = entries.find((e) => e.key === 'small')!;
    expect(big.width).toBe(SIDE);
    const refused = await getJson(ui, `/api/runs/${run}/images/${big.sha256}`);
    expect(refused.status).toBe(422);
    expect(refused.body.error).toMatch(new RegExp(`is ${SIDE}x${SIDE} pixels \\(0\\.5 GiB once decoded\\), more than the dashboard draws \\(16 MP\\): download it with \\?download=1`));
    const dl = await fetch(`${ui.base}/api/runs/${run}/images/${big.sha256}?download=1`, { headers: { authorization: `Bearer ${ui.token}` } });
    expect(dl.status).toBe(200);
    expect(dl.headers.get('content-disposition')).toMatch(new RegExp(`^attachment; filename="${run}-${big.sha256.slice(0, 16)}\\.png"$`));
    expect((await dl.arrayBuffer()).byteLength).toBeLessThan(2 * 1024 * 1024); // the small file it is
    const ok = await fetch(`${ui.base}/api/runs/${run}/images/${small.sha256}`, { headers: { authorization: `Bearer ${ui.token}` } });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('content-disposition')).toBeNull();
  });

  it.skipIf(chromiumMissing() !== null)(`the Media tab shows a placeholder and a download link for it, and never loads it into an <img>${chromiumMissing() ? ` (skipped: ${chromiumMissing()})` : ''}`, async () => {
    const chrome = await launchChromium();
    try {
      const page = await chrome.context.newPage();
      const asked: string[] = [];
      page.on('request', (r) => asked.push(r.url()));
      await page.goto(ui.url);
      await page.goto(`${ui.base}/runs/${run}?tab=media`);
      const placeholder = page.locator('.media-figure.too-large .image-placeholder');
      await placeholder.waitFor({ timeout: 30_000 });
      expect(await placeholder.textContent()).toContain(`${SIDE}×${SIDE} image: too large to show here`);
      const href = await page.locator('.media-figure.too-large a.image-download').getAttribute('href');
      expect(href).toMatch(/\/images\/[0-9a-f]{64}\?download=1$/);
      await page.locator('img.media-image').first().waitFor({ timeout: 30_000 }); // the small one is drawn
      const big = (await getJson(ui, `/api/runs/${run}/media?kind=image&key=big`)).body.entries[0].sha256 as string;
      expect(asked.filter((u) => u.includes(big))).toEqual([]);
    } finally {
      await chrome.close();
    }
  }, 120_000);
});
