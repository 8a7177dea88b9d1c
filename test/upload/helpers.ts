// Shared by the upload suites: a node is a daemon with its own data dir and
// LOGD_NODE, uploading to the test's PostgreSQL.
import type { ChildProcess } from 'node:child_process';
import { execa } from 'execa';
import { CLI, makeEnv, waitUntil, type TestEnv } from '../helpers.js';

/**
 * For nodes whose tests are about who gets a run and what the store ends up
 * with, not latency: a claim of a run from the store may take 30 s and a
 * client call 60 s (the claim stays below the call, as the defaults are), so
 * a loaded machine does not turn into a refusal or a run created as new.
 */
export const GENEROUS = { LOGD_RESUME_STORE_TIMEOUT_MS: '30000', LOGD_CALL_TIMEOUT_MS: '60000' };

/** Resolves when `p` has exited (at once if it has); rejects after `timeoutMs`. */
export async function exited(p: ChildProcess, timeoutMs: number): Promise<number | null> {
  await waitUntil(() => p.exitCode !== null || p.signalCode !== null, timeoutMs, `process ${p.pid} to exit`);
  return p.exitCode;
}

export function nodeEnv(name: string, uploadUrl: string | null, extra: Record<string, string> = {}): TestEnv {
  return makeEnv({
    LOGD_NODE: name,
    ...(uploadUrl ? { LOGD_UPLOAD_URL: uploadUrl } : {}),
    LOGD_UPLOAD_BACKOFF_MAX_MS: '1000',
    LOGD_SAMPLE_INTERVAL_MS: '200',
    ...extra,
  });
}

/**
 * `t` reading the shared store at `url`. The URL holds the password, so it goes
 * in LOGD_STORE_URL: logd refuses a password on the command line.
 */
export function reading(t: TestEnv, url: string): TestEnv {
  return { ...t, env: { ...t.env, LOGD_STORE_URL: url } };
}

/** `logd <args> --json` on the shared store at `url`, parsed. */
export async function storeJson<T = any>(t: TestEnv, url: string, args: string[]): Promise<T> {
  const r = await execa(process.execPath, [CLI, ...args, '--json'], { env: reading(t, url).env, timeout: 60_000 });
  return JSON.parse(r.stdout) as T;
}

/** Whether the shared store lists run `id` (false, not a throw, while the store cannot be read yet). */
export async function storeListed(t: TestEnv, url: string, id: string): Promise<boolean> {
  const r = await execa(process.execPath, [CLI, 'runs', '--json'], { env: reading(t, url).env, reject: false, timeout: 60_000 });
  if (r.exitCode !== 0) return false;
  return (JSON.parse(r.stdout) as Array<{ id: string }>).some((x) => x.id === id);
}

/** Raw rows (arrival order, with _writer) of a run, from the local store or the shared one. */
export async function rawRows(t: TestEnv, id: string, store?: string, extra: string[] = []): Promise<Array<Record<string, unknown>>> {
  const r = await execa(process.execPath, [CLI, 'export', id, '--raw', ...extra], { env: (store ? reading(t, store) : t).env, timeout: 120_000, maxBuffer: 1 << 30 });
  return r.stdout.trim() === '' ? [] : r.stdout.trim().split('\n').map((l) => JSON.parse(l));
}

/** Waits until the shared store shows the run final with this many rows. */
export async function waitUploaded(t: TestEnv, url: string, id: string, rows: number, timeoutMs = 60_000): Promise<any> {
  let last: any = null;
  await waitUntil(async () => {
    const r = await execa(process.execPath, [CLI, 'show', id, '--json', '--rows', '0'], { env: reading(t, url).env, reject: false, timeout: 30_000 });
    if (r.exitCode !== 0) return false;
    last = JSON.parse(r.stdout);
    return ['finished', 'crashed', 'killed'].includes(last.state) && last.historyRows === rows;
  }, timeoutMs, `run ${id} to be in the shared store, final, with ${rows} rows (last seen: ${last ? `${last.state}, ${last.historyRows} rows` : 'nothing'})`);
  return last;
}

/** Sorts rows by writer, then step, for comparing two stores regardless of chunking. */
export function byWriterStep(rows: Array<Record<string, unknown>>): Array<Record<string, unknown>> {
  return [...rows].sort((a, b) => (a._writer as number) - (b._writer as number) || (a._step as number) - (b._step as number));
}
