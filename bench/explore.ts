// Issue 36's figures, in a real Chromium on a real daemon's store: prints
// figures, asserts nothing. Run: `node dist/bench/explore.js [--data DIR] [--runs N] [--shared]`.
// `--shared`: the daemon uploads to a throwaway PostgreSQL (bench/pg-cluster.ts)
// and `logd ui` reads that shared store (LOGD_STORE_URL) once every run is there.
// `--data DIR`: log into DIR and keep it; a later run with the same DIR
// measures again without logging anew.
//
// The store: N runs (10 000 unless --runs), each with 20 config keys and 10
// summary keys, 10 of them groups of 8 ranks that log 200 steps of 4 metrics.
// Measured, each first and again (the server then holds the listing), from
// the navigation's start until the page shows what is asked for:
//   the runs page: its first 50 rows;
//   /explore of 100 selected runs over 6 config keys and 1 summary metric:
//     every line of the parallel coordinates and every point of the scatter;
//   /explore of every run of the store (default axes): every line;
//   /compare of the 10 groups: the table of differences and the first chart.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const self = fileURLToPath(import.meta.url);
const root = path.resolve(path.dirname(self), '..', '..');
const cli = path.join(root, 'dist', 'daemon', 'cli.js');
const CHROMIUM = process.env.LOGD_TEST_CHROMIUM ?? '/usr/bin/chromium';
const arg = (name: string) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : undefined);
const GROUPS = 10, RANKS = 8;

async function worker(role: string, n: number, from: number): Promise<void> {
  const logd = await import('../client/index.js');
  if (role === 'sweep') {
    const batch = 16;
    for (let i = from; i < from + n; i += batch) {
      await Promise.all(Array.from({ length: Math.min(batch, from + n - i) }, async (_, j) => {
        const k = i + j;
        const config: Record<string, unknown> = {};
        for (let c = 0; c < 20; c++) config[`p${c}`] = c < 12 ? Math.round(Math.abs(Math.sin(k * (c + 1))) * 1e4) / 1e4 : ['adam', 'sgd', 'lamb', 'adamw'][(k + c) % 4];
        config.p0 = [0.1, 0.03, 0.01, 0.003, 0.001, 3e-4, 1e-4][k % 7];
        const run = await logd.init({ project: 'sweep', name: `run-${k}`, config });
        run.log({ x: 1 });
        const summary: Record<string, number> = {};
        for (let s = 0; s < 10; s++) summary[`m${s}`] = Math.round(Math.abs(Math.cos(k * (s + 2))) * 1e4) / 1e4;
        summary.loss = Math.abs(Math.log10(config.p0 as number) + 2.5) + (summary.m1 as number) / 10;
        run.summary.update(summary);
        await run.finish();
      }));
    }
  } else if (role === 'group') {
    // One rank of group `n`, rank `from`.
    const run = await logd.init({ project: 'jobs', name: `rank${from}`, group: `job-${n}`, config: { lr: [0.1, 0.01, 0.001][n % 3], seed: n, layers: 12 + (n % 2) * 12, dropout: n % 4 === 0 ? 0.1 : undefined } });
    for (let s = 0; s < 200; s++) run.log({ loss: 1 / (1 + s / 20) + n * 0.01 + from * 0.001, acc: s / 200, 'grad/norm': 1 + Math.sin(s), lr: 0.1 }, { step: s });
    await run.finish();
  }
  console.log('done');
}

function spawnRole(env: NodeJS.ProcessEnv, role: string, n: number, from = 0, extra: Record<string, string> = {}): Promise<void> {
  const c = spawn(process.execPath, [self, '--role', role, String(n), String(from)], { env: { ...env, ...extra }, stdio: ['ignore', 'ignore', 'inherit'] });
  return new Promise((resolve, reject) => c.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${role} exited with ${code}`)))));
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

async function main(): Promise<void> {
  if (!fs.existsSync(CHROMIUM)) {
    console.log(`bench/explore: skipped: no Chromium at ${CHROMIUM} (install Debian's chromium)`);
    return;
  }
  const { chromium } = await import('playwright-core');
  const many = Number(arg('--runs') ?? 10_000);
  const keep = arg('--data') ? path.resolve(arg('--data')!) : null;
  const dir = keep ?? fs.mkdtempSync(path.join(os.tmpdir(), 'logd-bench-explore-'));
  const marker = path.join(dir, 'bench-explore.json');
  fs.mkdirSync(dir, { recursive: true });
  const env: NodeJS.ProcessEnv = { ...process.env, LOGD_DIR: path.join(dir, 'data'), LOGD_RUNTIME_DIR: path.join(dir, 'rt'), LOGD_QUIET: '1' };
  delete env.LOGD_SERVICE;
  const shared = process.argv.includes('--shared');
  const { startPg } = await import('./pg-cluster.js');
  const pg = shared ? await startPg() : null;
  if (pg) env.LOGD_UPLOAD_URL = pg.url;
  const daemon = spawn(process.execPath, [cli, 'serve', '--sample-interval', '0'], { env, stdio: 'ignore' });
  const children: ChildProcess[] = [daemon];
  let ctx: Awaited<ReturnType<typeof chromium.launchPersistentContext>> | null = null;
  try {
    await until(async () => fs.existsSync(path.join(dir, 'rt', 'service.json')), 15_000, 'the daemon');
    const logged = fs.existsSync(marker) && JSON.parse(fs.readFileSync(marker, 'utf8')).runs === many;
    if (!logged) {
      const t0 = Date.now();
      const half = Math.floor(many / 2);
      await Promise.all([spawnRole(env, 'sweep', half, 0), spawnRole(env, 'sweep', many - half, half)]);
      for (let g = 0; g < GROUPS; g++) await Promise.all(Array.from({ length: RANKS }, (_, r) => spawnRole(env, 'group', g, r, { RANK: String(r), WORLD_SIZE: String(RANKS) })));
      console.log(`bench/explore: ${many} runs and ${GROUPS} groups of ${RANKS} logged in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
      fs.writeFileSync(marker, JSON.stringify({ runs: many }));
    } else console.log(`bench/explore: the runs logged before in ${dir}`);
    if (pg) {
      const t0 = Date.now();
      const want = many + GROUPS * RANKS;
      await until(async () => Number(pg.psql('SELECT count(*) FROM logd_runs', 'logd').trim() || 0) >= want, 1_800_000, `${want} runs uploaded`);
      console.log(`bench/explore: ${want} runs in the shared store after ${((Date.now() - t0) / 1000).toFixed(0)} s more`);
    }

    const ui = spawn(process.execPath, [cli, 'ui', '--port', '0'], { env: pg ? { ...env, LOGD_STORE_URL: pg.url } : env, stdio: ['ignore', 'pipe', 'inherit'] });
    children.push(ui);
    let out = '';
    ui.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    const url = await until(async () => /open (http\S+)/.exec(out)?.[1], 20_000, 'logd ui');
    const base = new URL(url).origin, token = new URL(url).searchParams.get('token')!;
    const apiJson = async (p: string) => (await fetch(base + p, { headers: { authorization: `Bearer ${token}` } })).json() as Promise<any>;

    ctx = await chromium.launchPersistentContext(path.join(dir, 'chromium'), {
      executablePath: CHROMIUM, headless: true, viewport: { width: 1400, height: 1000 },
      args: ['--no-sandbox', '--headless', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    const page = ctx.pages()[0] ?? (await ctx.newPage());
    await page.goto(url);
    // From the navigation's start until the DOM holds what is asked for, seen inside the page.
    await page.addInitScript(() => {
      const w = window as unknown as { __shownAt?: number };
      const want = sessionStorage.getItem('logd-bench-want');
      if (!want) return;
      const wanted = JSON.parse(want) as Array<[string, number]>;
      new MutationObserver((_m, obs) => {
        if (wanted.every(([sel, n]) => document.querySelectorAll(sel).length >= n)) {
          w.__shownAt = performance.now();
          obs.disconnect();
        }
      }).observe(document, { childList: true, subtree: true, attributes: true });
    });
    const shown = async (p: string, wanted: Array<[string, number]>) => {
      await page.evaluate((w) => sessionStorage.setItem('logd-bench-want', w), JSON.stringify(wanted));
      const s = performance.now();
      await page.goto(base + p);
      await page.waitForFunction((w) => w.every(([sel, n]) => document.querySelectorAll(sel).length >= n), wanted, { timeout: 180_000, polling: 'raf' }).catch(async (e) => {
        const seen = await page.evaluate((w) => w.map(([sel]) => document.querySelectorAll(sel).length), wanted);
        throw new Error(`${p}: waited for ${JSON.stringify(wanted)}, the page shows ${JSON.stringify(seen)}: ${(e as Error).message}`);
      });
      const wall = performance.now() - s;
      const inPage = await page.evaluate(() => (window as unknown as { __shownAt?: number }).__shownAt ?? NaN);
      return `${inPage.toFixed(0)} ms (driver: ${wall.toFixed(0)} ms)`;
    };
    const rows: string[][] = [];
    const twice = async (what: string, p: string, wanted: Array<[string, number]>) => {
      for (const pass of ['first', 'again']) rows.push([`${what}, ${pass}`, await shown(p, wanted)]);
    };

    await twice(`runs page over ${many + GROUPS * RANKS} runs: its first page (10 group rows and 20 runs)`, '/', [['tr.run, tr.group-row', 30]]);
    const picked = (await apiJson('/api/runs?project=sweep&limit=100')).runs.map((r: { id: string }) => r.id);
    const axes = ['config.p0', 'config.p1', 'config.p2', 'config.p3', 'config.p12', 'config.p13', 'summary.loss'];
    await twice('/explore of 100 selected runs, 7 axes and a scatter: every line and point', `/explore?runs=${picked.join(',')}&axes=${encodeURIComponent(axes.join(','))}&colour=summary.loss&x=config.p0&y=summary.loss`,
      [['svg.parallel path.pc-line', 100], ['svg.scatter circle.sc-point', 100]]);
    await twice(`/explore of every run of project sweep (${many}), 7 axes: every line`, `/explore?project=sweep&axes=${encodeURIComponent(axes.join(','))}&colour=summary.loss&x=config.p0&y=summary.loss`,
      [['svg.parallel path.pc-line', many]]);
    const groups = Array.from({ length: GROUPS }, (_, g) => `job-${g}`).join(',');
    await twice(`/compare of ${GROUPS} groups of ${RANKS} ranks: the differences and the first chart`, `/compare?groups=${groups}`, [['#diff-table tbody tr', 1], ['.chart[data-drawn]', 1]]);
    console.log(`\n${pg ? 'from the shared store (logd ui with LOGD_STORE_URL)' : 'from the local store'}\n| what | in the page (driver) |\n|---|---|`);
    for (const r of rows) console.log(`| ${r.join(' | ')} |`);
  } finally {
    await ctx?.close().catch(() => {});
    for (const c of children.reverse()) c.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 1000));
    fs.rmSync(keep ? path.join(dir, 'chromium') : dir, { recursive: true, force: true });
    pg?.destroy();
  }
}

const roleAt = process.argv.indexOf('--role');
if (roleAt > 0) await worker(process.argv[roleAt + 1], Number(process.argv[roleAt + 2]), Number(process.argv[roleAt + 3]));
else await main();
