// The dashboard in a real Chromium: prints figures, asserts nothing.
// Run: `node dist/bench/ui.js [--quick] [--only table]` (needs Debian's chromium; see README).
// `--only table`: only the runs (10 000) and the runs-list and runs-table figures.
// `--data DIR`: log into DIR and keep it; a later run with the same DIR (and
// options) measures again without logging anew.
// Fresh data dir, a real daemon, `logd ui` as its own process:
//   run page, 10 metrics × 100 k steps: navigation → all 10 charts drawn;
//   one metric of 1 M points: navigation → drawn; its history answer (time, bytes);
//   runs list over 10 000 runs: navigation → first page shown; its API answer;
//   runs table over the same runs, 3 config + 3 summary columns sorted by one
//   (summary.loss): navigation → first page shown, first and warm; its API answer;
//   live: a row's acknowledgement (flush resolved) → the chart shows it (median).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const self = fileURLToPath(import.meta.url);
const root = path.resolve(path.dirname(self), '..', '..');
const cli = path.join(root, 'dist', 'daemon', 'cli.js');
const quick = process.argv.includes('--quick');
const tableOnly = process.argv.includes('--only') && process.argv[process.argv.indexOf('--only') + 1] === 'table';
const CHROMIUM = process.env.LOGD_TEST_CHROMIUM ?? '/usr/bin/chromium';

// ---- worker roles (this file spawned with --role) ----
async function worker(role: string): Promise<void> {
  const logd = await import('../client/index.js');
  if (role === 'wide') {
    const steps = Number(process.argv[4]);
    const run = await logd.init({ project: 'bench-ui', name: 'ten-metrics' });
    for (let s = 0; s < steps; s++) {
      const row: Record<string, number> = {};
      for (let m = 0; m < 10; m++) row[`train/m${m}`] = Math.sin(s / 1000 + m) + Math.random() * 0.1;
      run.log(row, { step: s });
      if (s % 50_000 === 0) await run.flush(120_000);
    }
    await run.finish({ timeoutMs: 120_000 });
    console.log(run.id);
  } else if (role === 'long') {
    const steps = Number(process.argv[4]);
    const run = await logd.init({ project: 'bench-ui', name: 'one-million' });
    for (let s = 0; s < steps; s++) {
      run.log({ loss: 1 / (1 + s / 1000) + Math.random() * 0.01 + (s === 777_777 ? 5 : 0) }, { step: s });
      if (s % 100_000 === 0) await run.flush(120_000);
    }
    await run.finish({ timeoutMs: 120_000 });
    console.log(run.id);
  } else if (role === 'many') {
    const n = Number(process.argv[4]);
    const batch = 16;
    for (let i = 0; i < n; i += batch) {
      await Promise.all(Array.from({ length: Math.min(batch, n - i) }, async (_, j) => {
        const k = i + j;
        // Three config keys and three summary keys: the runs table's columns.
        const run = await logd.init({ project: `bench-many-${k % 7}`, name: `run-${k}`, group: k % 10 === 0 ? `g${k % 100}` : undefined,
          config: { lr: [0.1, 0.03, 0.01, 0.003, 0.001][k % 5], batch: 32 << (k % 4), layers: 6 + (k % 3) * 6 } });
        run.log({ x: 1 });
        run.summary.update({ loss: Math.round((1 + Math.sin(k)) * 1e4) / 1e4, acc: (k % 1000) / 1000, best: k % 97 });
        await run.finish();
      }));
    }
    console.log('done');
  } else if (role === 'live') {
    const run = await logd.init({ project: 'bench-ui', name: 'live' });
    console.log(`run ${run.id}`);
    for (let s = 0; ; s++) {
      run.log({ v: s }, { step: s });
      await run.flush(30_000);
      console.log(`acked ${s} ${Date.now()}`);
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

function spawnRole(env: NodeJS.ProcessEnv, role: string, arg = 0): ChildProcess & { out: string[] } {
  const c = spawn(process.execPath, [self, '--role', role, String(arg)], { env, stdio: ['ignore', 'pipe', 'inherit'] }) as ChildProcess & { out: string[] };
  c.out = [];
  let buf = '';
  c.stdout!.on('data', (d: Buffer) => {
    buf += d.toString();
    const parts = buf.split('\n');
    buf = parts.pop()!;
    c.out.push(...parts);
  });
  return c;
}

async function finished(c: ChildProcess & { out: string[] }, what: string, ms: number): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} took over ${ms} ms`)), ms);
    c.on('exit', (code) => (clearTimeout(timer), code === 0 ? resolve() : reject(new Error(`${what} exited with ${code}`))));
  });
  return c.out.at(-1)!;
}

async function until<T>(f: () => Promise<T | null | undefined | false>, ms: number, what: string): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main(): Promise<void> {
  if (!fs.existsSync(CHROMIUM)) {
    console.log(`bench/ui: skipped: no Chromium at ${CHROMIUM} (install Debian's chromium)`);
    return;
  }
  const { chromium } = await import('playwright-core');
  const keep = process.argv.includes('--data') ? path.resolve(process.argv[process.argv.indexOf('--data') + 1]) : null;
  const dir = keep ?? fs.mkdtempSync(path.join(os.tmpdir(), 'logd-bench-ui-'));
  const marker = path.join(dir, 'bench-ui.json');
  fs.mkdirSync(dir, { recursive: true });
  const logged = keep && fs.existsSync(marker) ? (JSON.parse(fs.readFileSync(marker, 'utf8')) as { key: string; wideId: string; longId: string }) : null;
  const env: NodeJS.ProcessEnv = { ...process.env, LOGD_DIR: path.join(dir, 'data'), LOGD_RUNTIME_DIR: path.join(dir, 'rt') };
  delete env.LOGD_SERVICE;
  const daemon = spawn(process.execPath, [cli, 'serve', '--sample-interval', '0'], { env, stdio: 'ignore' });
  const children: ChildProcess[] = [daemon];
  let ui: ChildProcess | null = null;
  let ctx: Awaited<ReturnType<typeof chromium.launchPersistentContext>> | null = null;
  try {
    await until(async () => fs.existsSync(path.join(dir, 'rt', 'service.json')), 15_000, 'the daemon');
    const steps = quick ? 10_000 : 100_000, long = quick ? 100_000 : 1_000_000, many = quick ? 1000 : 10_000;
    const t0 = Date.now();
    const key = JSON.stringify({ quick, tableOnly });
    let wideId = '', longId = '';
    if (logged && logged.key === key) {
      ({ wideId, longId } = logged);
      console.log(`bench/ui: the data logged before in ${dir}`);
    } else {
      [wideId, longId] = await Promise.all([
        tableOnly ? '' : finished(spawnRole(env, 'wide', steps), 'logging 10 metrics', 300_000),
        tableOnly ? '' : finished(spawnRole(env, 'long', long), 'logging 1 M rows', 300_000),
        finished(spawnRole(env, 'many', many), `creating ${many} runs`, 1_800_000).then(() => ''),
      ]);
      console.log(`bench/ui: data logged in ${((Date.now() - t0) / 1000).toFixed(1)} s (${tableOnly ? '' : `${steps} steps × 10 metrics; ${long} rows; `}${many} runs)`);
      if (keep) fs.writeFileSync(marker, JSON.stringify({ key, wideId, longId }));
    }

    ui = spawn(process.execPath, [cli, 'ui', '--port', '0'], { env, stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(ui);
    let out = '';
    ui.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    const url = await until(async () => /open (http\S+)/.exec(out)?.[1], 20_000, 'logd ui');
    const base = new URL(url).origin, token = new URL(url).searchParams.get('token')!;

    ctx = await chromium.launchPersistentContext(path.join(dir, 'chromium'), {
      executablePath: CHROMIUM, headless: true, viewport: { width: 1280, height: 2000 },
      args: ['--no-sandbox', '--headless', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    const page = ctx.pages()[0] ?? (await ctx.newPage());
    await page.goto(url);
    const rows: string[][] = [];

    const drawn = async (path: string, selector: string, count: number) => {
      const s = performance.now();
      await page.goto(base + path);
      await page.waitForFunction(([sel, n]) => document.querySelectorAll(sel as string).length >= (n as number), [selector, count] as const, { timeout: 120_000, polling: 'raf' });
      return performance.now() - s;
    };
    // The same seen from inside the page: from the navigation's start until the
    // DOM holds what is asked for (a MutationObserver installed before the
    // page's own script), without the driver's round trips.
    await page.addInitScript(() => {
      const w = window as unknown as { __shownAt?: number; __want?: [string, number] };
      const want = sessionStorage.getItem('logd-bench-want');
      if (!want) return;
      const [sel, n] = JSON.parse(want) as [string, number];
      new MutationObserver((_m, obs) => {
        if (document.querySelectorAll(sel).length >= n) {
          w.__shownAt = performance.now();
          obs.disconnect();
        }
      }).observe(document, { childList: true, subtree: true });
    });
    const shownInPage = async (path: string, selector: string, count: number) => {
      await page.evaluate((want) => sessionStorage.setItem('logd-bench-want', want), JSON.stringify([selector, count]));
      const wall = await drawn(path, selector, count);
      const inPage = await page.evaluate(() => (window as unknown as { __shownAt?: number }).__shownAt ?? NaN);
      return { wall, inPage };
    };
    if (!tableOnly) for (const pass of ['first (cold: history read from the store)', 'again (warm)']) {
      const ms = await drawn(`/runs/${wideId}`, '.chart[data-drawn]', 10);
      rows.push([`run page, 10 metrics × ${steps / 1000} k steps: all 10 charts drawn, ${pass}`, `${ms.toFixed(0)} ms`, '≤ 1 s']);
    }
    if (!tableOnly) {
      for (const pass of ['first (cold)', 'again (warm)']) {
        const ms = await drawn(`/runs/${longId}`, '.chart[data-drawn]', 1);
        rows.push([`one metric of ${long / 1e6} M points: drawn, ${pass}`, `${ms.toFixed(0)} ms`, '≤ 1 s']);
      }
      const points = await page.evaluate(() => document.querySelector('.chart')!.getAttribute('data-points'));
      const times: number[] = [];
      let bytes = 0;
      for (let i = 0; i < 5; i++) {
        const s = performance.now();
        const res = await fetch(`${base}/api/runs/${longId}/history?keys=loss&points=1500`, { headers: { authorization: `Bearer ${token}` } });
        bytes = (await res.arrayBuffer()).byteLength;
        times.push(performance.now() - s);
      }
      rows.push([`its history answer (points=1500, ${points} drawn), median of 5`, `${median(times).toFixed(0)} ms, ${(bytes / 1000).toFixed(0)} kB`, '≤ 200 ms, ≤ 200 kB']);
    }
    for (const pass of ['first', 'again']) {
      const { wall, inPage } = await shownInPage('/', 'tr.run, tr.group-row', 50);
      rows.push([`runs list over ${many} runs: first page shown, ${pass}`, `${wall.toFixed(0)} ms (in the page: ${inPage.toFixed(0)} ms)`, '≤ 300 ms']);
    }
    const api: number[] = [];
    for (let i = 0; i < 5; i++) {
      const s = performance.now();
      await (await fetch(`${base}/api/runs?limit=100`, { headers: { authorization: `Bearer ${token}` } })).arrayBuffer();
      api.push(performance.now() - s);
    }
    rows.push(['  its API answer (100 runs), median of 5', `${median(api).toFixed(0)} ms`, '']);

    // The runs table: 3 config and 3 summary columns, sorted by one of them, over every run.
    const cols = 'config.lr,config.batch,config.layers,summary.loss,summary.acc,summary.best';
    const table = `/?cols=${encodeURIComponent(cols)}&sort=summary.loss`;
    for (const pass of ['first (the server reads every run)', 'again (warm)', 'a third time (warm)', 'a fourth time (warm)', 'a fifth time (warm)']) {
      const { wall, inPage } = await shownInPage(table, 'tr.run td[data-column="summary.loss"], tr.group-row', 50);
      rows.push([`runs table over ${many} runs, 3 config + 3 summary columns, sorted by summary.loss: first page shown, ${pass}`, `${wall.toFixed(0)} ms (in the page: ${inPage.toFixed(0)} ms)`, '≤ 300 ms warm']);
    }
    const sorted = await page.evaluate(() => [...document.querySelectorAll('tr.run td[data-column="summary.loss"]')].slice(0, 3).map((e) => e.textContent).join(' ≤ '));
    rows.push(['  its first rows (summary.loss)', sorted, '']);
    const tapi: number[] = [];
    for (let i = 0; i < 5; i++) {
      const s = performance.now();
      await (await fetch(`${base}/api/runs?limit=100&sort=summary.loss`, { headers: { authorization: `Bearer ${token}` } })).arrayBuffer();
      tapi.push(performance.now() - s);
    }
    rows.push(['  its API answer (100 of the sorted runs), median of 5', `${median(tapi).toFixed(0)} ms`, '']);
    const fapi: number[] = [];
    for (let i = 0; i < 5; i++) {
      const s = performance.now();
      await (await fetch(`${base}/api/runs?limit=100&sort=config.lr&filter=${encodeURIComponent('lr < 0.01; acc > 0.5')}`, { headers: { authorization: `Bearer ${token}` } })).arrayBuffer();
      fapi.push(performance.now() - s);
    }
    rows.push(['  filtered (lr < 0.01; acc > 0.5) and sorted by config.lr, API answer, median of 5', `${median(fapi).toFixed(0)} ms`, '']);
    if (tableOnly) {
      console.log('\n| what | measured | target |\n|---|---|---|');
      for (const r of rows) console.log(`| ${r.join(' | ')} |`);
      return;
    }

    // Live: the browser stamps each new point count; the worker stamps each acknowledgement.
    const live = spawnRole(env, 'live');
    children.push(live);
    const liveId = await until(async () => live.out.find((l) => l.startsWith('run '))?.slice(4), 20_000, 'the live run');
    await page.goto(`${base}/runs/${liveId}`);
    await page.waitForSelector('.chart[data-drawn]', { timeout: 60_000 });
    await page.evaluate(() => {
      const w = window as unknown as { seen: Array<[number, number]> };
      w.seen = [];
      const el = document.querySelector('.chart')!;
      new MutationObserver(() => w.seen.push([Number(el.getAttribute('data-points')), Date.now()])).observe(el, { attributes: true, attributeFilter: ['data-points'] });
    });
    const start = live.out.filter((l) => l.startsWith('acked')).length;
    const samples = quick ? 10 : 30;
    await until(async () => live.out.filter((l) => l.startsWith('acked')).length >= start + samples + 3, 120_000, 'live rows');
    await new Promise((r) => setTimeout(r, 2500));
    const seen = await page.evaluate(() => (window as unknown as { seen: Array<[number, number]> }).seen);
    const delays: number[] = [];
    for (const l of live.out.filter((x) => x.startsWith('acked')).slice(start + 1, start + 1 + samples)) {
      const [, step, at] = l.split(' ').map(Number);
      const shown = seen.find(([n]) => n >= step + 1);
      if (shown) delays.push(shown[1] - at);
    }
    rows.push([`live: acknowledgement → in the chart, median of ${delays.length} rows (one every 250 ms)`, `${median(delays)} ms (min ${Math.min(...delays)}, max ${Math.max(...delays)})`, '≤ 1.5 s']);

    console.log('\n| what | measured | target |\n|---|---|---|');
    for (const r of rows) console.log(`| ${r.join(' | ')} |`);
  } finally {
    await ctx?.close().catch(() => {});
    for (const c of children.reverse()) c.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 1000));
    fs.rmSync(keep ? path.join(dir, 'chromium') : dir, { recursive: true, force: true });
  }
}

const roleAt = process.argv.indexOf('--role');
if (roleAt > 0) await worker(process.argv[roleAt + 1]);
else await main();
