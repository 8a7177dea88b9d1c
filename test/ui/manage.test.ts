// Issue 38 item 9 in the dashboard: the runs table's selection tagged, renamed, noted and removed, in a real
// Chromium on a real daemon's runs; the same calls refused from another site (Origin), without the token, with
// bad input, and for a running run (nothing removed then).
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Page } from 'playwright-core';
import { cliJson, makeEnv, script, spawnScript, waitUntil, type TestEnv } from '../helpers.js';
import { dashboardFor, logRuns } from './helpers.js';
import { chromiumMissing } from './browser.js';

const missing = chromiumMissing();
let t: TestEnv;
let dash: Awaited<ReturnType<typeof dashboardFor>>;
let ids: string[] = [];

const post = (p: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(dash.ui.base + p, { method: 'POST', headers: { authorization: `Bearer ${dash.ui.token}`, 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) })
    .then(async (r) => ({ status: r.status, body: await r.json() as any }));

async function tick(page: Page, id: string): Promise<void> {
  await page.locator(`tr[data-run-id="${id}"] input[type=checkbox]`).check();
}

describe.skipIf(missing !== null)(`the dashboard manages the selected runs${missing ? ` (skipped: ${missing})` : ''}`, () => {
  beforeAll(async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000' });
    ids = await logRuns(t, ['a', 'b', 'c'].map((name) => ({ project: 'manage-ui', name, steps: 20, row: '{ loss: 1 / (step + 1) }' })));
    dash = await dashboardFor(t);
  }, 180_000);
  afterAll(async () => {
    await dash?.close();
    await t?.cleanup();
  });

  it('tag two runs, rename and note one, delete one: the page and the store agree', async () => {
    const [a, b, c] = ids;
    const page = await dash.open('/');
    await page.locator(`tr[data-run-id="${a}"]`).waitFor({ timeout: 30_000 });
    expect(await page.locator('#tag-selected').isDisabled()).toBe(true);
    await tick(page, a);
    await tick(page, b);
    expect(await page.locator('#rename-selected').isDisabled()).toBe(true); // one run at a time
    page.once('dialog', (d) => void d.accept('keep, best'));
    await page.locator('#tag-selected').click();
    await page.locator('#manage-result', { hasText: 'tagged 2 run(s)' }).waitFor({ timeout: 30_000 });
    for (const id of [a, b]) expect((await cliJson(t, ['show', id])).tags).toEqual(['keep', 'best']);
    // Untick b: one selected, so rename and notes open.
    await page.locator(`tr[data-run-id="${b}"] input[type=checkbox]`).uncheck();
    page.once('dialog', (d) => void d.accept('the baseline'));
    await page.locator('#rename-selected').click();
    await page.locator(`tr[data-run-id="${a}"] td.name`, { hasText: 'the baseline' }).waitFor({ timeout: 30_000 });
    page.once('dialog', (d) => void d.accept('kept for the paper'));
    await page.locator('#note-selected').click();
    await page.locator('#manage-result', { hasText: `notes of ${a} saved` }).waitFor({ timeout: 30_000 });
    expect(await cliJson(t, ['show', a])).toMatchObject({ name: 'the baseline', notes: 'kept for the paper', tags: ['keep', 'best'] });
    // Delete c: the confirmation names it; dismissing it removes nothing, accepting it removes it.
    await page.locator(`tr[data-run-id="${a}"] input[type=checkbox]`).uncheck();
    await tick(page, c);
    let asked = '';
    page.once('dialog', (d) => ((asked = d.message()), void d.dismiss()));
    await page.locator('#delete-selected').click();
    await waitUntil(() => asked !== '', 10_000, 'the confirmation');
    expect(asked).toMatch(new RegExp(`Remove 1 run\\(s\\) for good\\?[\\s\\S]*c \\(${c}, finished\\)`));
    expect((await cliJson(t, ['runs'])).map((r: { id: string }) => r.id)).toContain(c);
    page.once('dialog', (d) => void d.accept());
    await page.locator('#delete-selected').click();
    await page.locator('#manage-result', { hasText: 'removed 1 run(s)' }).waitFor({ timeout: 30_000 });
    await page.locator(`tr[data-run-id="${c}"]`).waitFor({ state: 'detached', timeout: 30_000 });
    expect((await cliJson(t, ['runs'])).map((r: { id: string }) => r.id).sort()).toEqual([a, b].sort());
    expect(fs.existsSync(path.join(t.dataDir, 'runs', c))).toBe(false);
    await page.close();
  });

  it('refused: another site, no token, bad input, a running run (nothing removed)', async () => {
    const [a] = ids;
    const other = await post('/api/manage/delete', { ids: [a] }, { origin: 'http://evil.example' });
    expect(other.status).toBe(403);
    const noToken = await fetch(dash.ui.base + '/api/manage/delete', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ids: [a] }) });
    expect(noToken.status).toBe(401);
    const form = await fetch(dash.ui.base + '/api/manage/delete', { method: 'POST', headers: { authorization: `Bearer ${dash.ui.token}`, 'content-type': 'application/x-www-form-urlencoded' }, body: `ids=${a}` });
    expect(form.status).toBe(415);
    expect((await post('/api/manage/edit', { ids: [a], name: '' })).body.error).toMatch(/name cannot be empty/);
    expect((await post('/api/manage/edit', { ids: [a], addTags: ['x\u0001'] })).status).toBe(400);
    expect((await post('/api/manage/edit', { ids: ids.slice(0, 2), name: 'two' })).body.error).toMatch(/rename one run at a time/);
    expect((await post('/api/manage/edit', { ids: 'nope' })).body.error).toMatch(/ids must be a list of strings/);
    expect((await post('/api/manage/delete', { ids: ['zzzzzzzzzzzz'] })).status).toBe(404);
    // A run that is still logging: the whole request is refused, the finished run named with it stays too.
    const go = path.join(t.dir, 'go');
    const w = spawnScript(t, script(t, 'live.mjs', `
      import fs from 'node:fs';
      const run = await logd.init({ project: 'manage-ui', name: 'live' });
      console.log('run ' + run.id);
      run.log({ loss: 1 });
      while (!fs.existsSync(${JSON.stringify(go)})) await new Promise((r) => setTimeout(r, 20));
      await run.finish();
    `));
    await waitUntil(() => w.lines.some((l) => l.startsWith('run ')), 30_000, 'the live run');
    const live = w.lines.find((l) => l.startsWith('run '))!.slice(4);
    const refused = await post('/api/manage/delete', { ids: [a, live] });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatch(new RegExp(`run ${live} \\(live\\) is running: .*nothing was removed`));
    expect((await cliJson(t, ['runs'])).map((r: { id: string }) => r.id)).toEqual(expect.arrayContaining([a, live]));
    fs.writeFileSync(go, '');
    await w.closed;
  });
});
