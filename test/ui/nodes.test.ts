// A group whose ranks ran on two nodes (two daemons, each with its own
// LOGD_NODE and the same hostname, uploading to one real PostgreSQL), seen
// through `logd ui` on the shared store in a real Chromium: the group page has
// a node column that tells the nodes apart, and a system section per node.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pgUnavailable, startPg, type PgCluster } from '../pg/cluster.js';
import { script, runScript, startDaemon, ROOT, type TestEnv } from '../helpers.js';
import { nodeEnv, reading, waitUploaded } from '../upload/helpers.js';
import { startUi, getJson, type UiProcess } from './helpers.js';
import { chromiumMissing, launchChromium, type Chromium } from './browser.js';

const why = chromiumMissing() ?? pgUnavailable();
let pgc: PgCluster;
const nodes: TestEnv[] = [];
let ui: UiProcess;
let chrome: Chromium;

describe.skipIf(why !== null)(`a group on two nodes, from the shared store${why ? ` (skipped: ${why})` : ''}`, () => {
  beforeAll(async () => {
    pgc = await startPg();
    for (const [rank, name] of ['node-a', 'node-b'].entries()) {
      const t = nodeEnv(name, pgc.url);
      nodes.push(t);
      await startDaemon(t);
      const w = script(t, 'rank.mjs', `
        const run = await logd.init({ project: 'multi', name: 'rank' + process.env.RANK, group: 'two-nodes', config: { lr: 0.01 } });
        for (let step = 0; step < 30; step++) {
          run.log({ loss: 1 / (step + 1) + Number(process.env.RANK) / 10 }, { step });
          await new Promise((r) => setTimeout(r, 20));
        }
        await run.finish();
        console.log(run.id);
      `);
      const r = await runScript(t, w, [], { RANK: String(rank), WORLD_SIZE: '2', GROUP_RANK: String(rank), LOCAL_RANK: '0' });
      expect(r.exitCode, r.stderr).toBe(0);
      await waitUploaded(t, pgc.url, r.stdout.trim().split('\n').pop()!, 30);
    }
    ui = await startUi(reading(nodes[0], pgc.url));
    chrome = await launchChromium();
    const first = await chrome.context.newPage();
    await first.goto(ui.url);
    await first.close();
  }, 180_000);
  afterAll(async () => {
    await chrome?.close();
    await ui?.stop();
    for (const t of nodes) await t.cleanup();
    pgc?.destroy();
  });

  it('a view saved on the shared store is kept in its logd_views table: another dashboard of it lists it; not in the node\'s views.json', async () => {
    const res = await fetch(`${ui.base}/api/views`, {
      method: 'POST', body: JSON.stringify({ name: 'both nodes', url: '/groups/two-nodes?mode=ranks' }),
      headers: { authorization: `Bearer ${ui.token}`, 'content-type': 'application/json' },
    });
    expect(res.status, await res.clone().text()).toBe(200);
    expect(pgc.psql("SELECT name || '|' || url FROM logd_views", 'logd').trim()).toBe('both nodes|/groups/two-nodes?mode=ranks');
    const other = await startUi(reading(nodes[1], pgc.url));
    try {
      const listed = await getJson(other, '/api/views');
      expect(listed.body.views.map((v: any) => [v.name, v.url])).toEqual([['both nodes', '/groups/two-nodes?mode=ranks']]);
      expect(listed.body.where).toMatch(/logd_views of postgres:\/\/logd:\*\*\*@/);
    } finally {
      await other.stop();
    }
    expect(fs.existsSync(path.join(nodes[0].env.LOGD_DIR!, 'views.json'))).toBe(false);
  });

  it('the group page names each rank\'s node (LOGD_NODE, not the shared hostname) and shows the system of every node', async () => {
    const page = await chrome.context.newPage();
    await page.goto(`${ui.base}/groups/two-nodes`);
    await page.locator('#group-runs tr.run').nth(1).waitFor({ timeout: 30_000 });
    expect(await page.locator('#group-runs th').allTextContents()).toEqual(['rank', 'name', 'node', 'state', 'rows']);
    expect(await page.locator('#group-runs td.node-cell').allTextContents()).toEqual(['node-a', 'node-b']);
    const sections = page.locator('#group-system .system');
    await sections.nth(1).waitFor({ timeout: 30_000 });
    expect(await sections.evaluateAll((els) => els.map((e) => e.getAttribute('data-node')))).toEqual(['node-a', 'node-b']);
    expect(await sections.locator('h2').allTextContents()).toEqual([expect.stringMatching(/^System of node-a \(host /), expect.stringMatching(/^System of node-b \(host /)]);
    for (const i of [0, 1]) {
      const cpu = sections.nth(i).locator('.chart[data-panel="CPU, whole node (%)"]');
      await cpu.scrollIntoViewIfNeeded();
      await cpu.locator('canvas').waitFor({ timeout: 30_000 });
    }
    // Folded, node-a's section leaves node-b's in view: the screenshot shows both nodes.
    await sections.nth(0).locator('summary').click();
    await page.evaluate(() => window.scrollTo(0, 0));
    const dir = process.env.LOGD_SCREENSHOTS ? path.resolve(ROOT, process.env.LOGD_SCREENSHOTS) : path.join(nodes[0].dir, 'shots');
    fs.mkdirSync(dir, { recursive: true });
    await page.setViewportSize({ width: 1280, height: 1200 });
    await page.screenshot({ path: path.join(dir, 'group-two-nodes.png') });
    await page.close();
  });
});
