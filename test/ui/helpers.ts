// Starting `logd ui` as a real process on a test's own data dir, and the
// worker scripts that fill it with runs.
import { spawn, type ChildProcess } from 'node:child_process';
import type { Page } from 'playwright-core';
import { CLI, waitUntil, script, runScript, type TestEnv } from '../helpers.js';
import { launchChromium, type Chromium } from './browser.js';

export interface UiProcess {
  proc: ChildProcess;
  /** The URL it printed, with ?token=. */
  url: string;
  base: string;
  token: string;
  stderr: () => string;
  stop(): Promise<void>;
}

export async function startUi(t: TestEnv, args: string[] = ['--port', '0']): Promise<UiProcess> {
  const proc = spawn(process.execPath, [CLI, 'ui', ...args], { env: t.env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '', err = '';
  proc.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  await waitUntil(() => {
    if (proc.exitCode !== null) throw new Error(`logd ui exited with ${proc.exitCode}: ${err}`);
    return /open http\S+/.test(out);
  }, 30_000, 'logd ui to print its URL');
  const url = /open (http\S+)/.exec(out)![1];
  const u = new URL(url);
  return {
    proc, url, base: u.origin, token: u.searchParams.get('token')!, stderr: () => err,
    stop: async () => {
      if (proc.exitCode !== null) return;
      proc.kill('SIGTERM');
      await waitUntil(() => proc.exitCode !== null || proc.signalCode !== null, 10_000, 'logd ui to exit').catch(() => proc.kill('SIGKILL'));
    },
  };
}

export async function getJson(ui: UiProcess, path: string, auth = true): Promise<{ status: number; body: any; bytes: number }> {
  const res = await fetch(ui.base + path, { headers: auth ? { authorization: `Bearer ${ui.token}` } : {}, redirect: 'manual' });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    /* an HTML page */
  }
  return { status: res.status, body, bytes: Buffer.byteLength(text) };
}

/**
 * Logs finished runs, one process each. `row` is a JS expression of `step`
 * and `rank` giving the row to log at that step. Returns the run ids in order.
 */
export async function logRuns(t: TestEnv, runs: Array<{ project?: string; name: string; group?: string; rank?: number; steps: number; row: string }>): Promise<string[]> {
  const file = script(t, 'log-runs.mjs', `
    const spec = JSON.parse(process.argv[2]);
    const row = new Function('step', 'rank', 'return (' + spec.row + ');');
    const run = await logd.init({ project: spec.project ?? 'ui', name: spec.name, group: spec.group || undefined });
    for (let step = 0; step < spec.steps; step++) run.log(row(step, spec.rank ?? 0), { step });
    await run.finish();
    console.log('run ' + run.id);
  `);
  const ids: string[] = [];
  for (const spec of runs) {
    const env: Record<string, string> = spec.rank !== undefined ? { RANK: String(spec.rank), WORLD_SIZE: '8' } : {};
    const r = await runScript(t, file, [JSON.stringify(spec)], env, 120_000);
    if (r.exitCode !== 0) throw new Error(`logging run ${spec.name} failed (exit ${r.exitCode}): ${r.stderr}`);
    ids.push(r.stdout.split('\n').find((l) => l.startsWith('run '))!.slice(4));
  }
  return ids;
}

/**
 * `logd ui` on `t` with a Chromium that has been given its token (a first visit to the printed URL), for a
 * browser suite's beforeAll; `open(path)` a page of it (page errors go to stderr), `close()` for its afterAll.
 */
export async function dashboardFor(t: TestEnv): Promise<{ ui: UiProcess; chrome: Chromium; open(path: string): Promise<Page>; close(): Promise<void> }> {
  const ui = await startUi(t);
  const chrome = await launchChromium();
  const first = await chrome.context.newPage();
  await first.goto(ui.url);
  await first.close();
  return {
    ui, chrome,
    open: async (p: string) => {
      const page = await chrome.context.newPage();
      page.on('pageerror', (e) => process.stderr.write(`[page error] ${e.message}\n`));
      await page.goto(ui.base + p);
      return page;
    },
    close: async () => {
      await chrome.close();
      await ui.stop();
    },
  };
}
