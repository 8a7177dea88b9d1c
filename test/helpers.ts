// Test helpers: every test gets its own data dir and runtime dir (so its own
// daemon), runs the compiled package as real processes, and cleans up.
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { procStartTime } from '../src/proc.js';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const CLI = path.join(ROOT, 'dist', 'daemon', 'cli.js');
export const CLIENT = path.join(ROOT, 'dist', 'client', 'index.js');

export interface TestEnv {
  dir: string;
  env: NodeJS.ProcessEnv;
  dataDir: string;
  runtimeDir: string;
  cleanup: () => Promise<void>;
}

export function makeEnv(extra: Record<string, string> = {}): TestEnv {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ldt-'));
  const dataDir = path.join(dir, 'data');
  const runtimeDir = path.join(dir, 'rt');
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    LOGD_DIR: dataDir,
    LOGD_RUNTIME_DIR: runtimeDir,
    LOGD_IDLE_TIMEOUT_MS: '3000',
    ...extra,
  };
  delete env.LOGD_SERVICE;
  delete env.RANK;
  delete env.WORLD_SIZE;
  delete env.LOCAL_RANK;
  return {
    dir, env, dataDir, runtimeDir,
    cleanup: async () => {
      // Every daemon whose data dir lies under this test's dir, whatever runtime dir the test gave it.
      await killDaemon(dir);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

export function serviceFile(runtimeDir: string): { pid: number; socket: string; token: string; tcp: string | null } | null {
  try {
    return JSON.parse(fs.readFileSync(path.join(runtimeDir, 'service.json'), 'utf8'));
  } catch {
    return null;
  }
}

export function alive(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z';
  } catch {
    return false;
  }
}

export async function waitUntil(pred: () => boolean | Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await pred()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

export async function killDaemon(dir: string, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  for (const pid of daemonPids(dir)) {
    try {
      process.kill(pid, signal);
    } catch {
      /* gone */
    }
    await waitUntil(() => !alive(pid), 8000, `daemon ${pid} to exit`).catch(() => process.kill(pid, 'SIGKILL'));
  }
}

/** Every live `logd serve` process whose runtime dir is `dir` or whose data or runtime dir lies below it. */
export function daemonPids(dir: string): number[] {
  const out: number[] = [];
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const cmd = fs.readFileSync(`/proc/${d}/cmdline`, 'utf8');
      if (!cmd.includes('cli.js\0serve')) continue;
      const env = fs.readFileSync(`/proc/${d}/environ`, 'utf8');
      const vars = env.split('\0');
      const under = (name: string) => vars.some((v) => v === `${name}=${dir}` || v.startsWith(`${name}=${dir}/`));
      if ((under('LOGD_RUNTIME_DIR') || under('LOGD_DIR')) && alive(Number(d))) out.push(Number(d));
    } catch {
      /* raced with exit */
    }
  }
  return out;
}

// t.env is the whole environment (makeEnv starts from process.env): extendEnv false, so a variable a test
// deleted from it (XDG_RUNTIME_DIR, say) stays deleted rather than coming back from the test runner's own.
export async function cli(t: TestEnv, args: string[], opts: { reject?: boolean; timeout?: number } = {}) {
  return execa(process.execPath, [CLI, ...args], { env: t.env, extendEnv: false, reject: opts.reject ?? true, timeout: opts.timeout ?? 30_000 });
}

export async function cliJson<T = any>(t: TestEnv, args: string[]): Promise<T> {
  const r = await cli(t, [...args, '--json']);
  return JSON.parse(r.stdout) as T;
}

/** Writes a worker script (ESM) that can `import * as logd from LOGD_CLIENT`. */
export function script(t: TestEnv, name: string, body: string): string {
  const file = path.join(t.dir, name);
  fs.writeFileSync(file, `import * as logd from ${JSON.stringify(CLIENT)};\n${body}\n`);
  return file;
}

export function runScript(t: TestEnv, file: string, args: string[] = [], env: Record<string, string> = {}, timeout = 60_000) {
  return execa(process.execPath, [file, ...args], { env: { ...t.env, ...env }, extendEnv: false, reject: false, timeout });
}

/** Starts a worker and resolves each time it prints a line matching `re`. */
/**
 * A script run with its stdout collected as lines. `closed` resolves once the process exited and every line it
 * printed was read: 'exit' may come while its last lines are still in the pipe, so a test that checks what a
 * killed writer printed waits for `closed`, never for 'exit'.
 */
export function spawnScript(t: TestEnv, file: string, args: string[] = [], env: Record<string, string> = {}): ChildProcess & { lines: string[]; closed: Promise<[number | null, NodeJS.Signals | null]> } {
  const child = spawn(process.execPath, [file, ...args], { env: { ...t.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] }) as ChildProcess & { lines: string[]; closed: Promise<[number | null, NodeJS.Signals | null]> };
  child.closed = new Promise((resolve) => child.once('close', (code: number | null, signal: NodeJS.Signals | null) => resolve([code, signal])));
  child.lines = [];
  let buf = '';
  child.stdout!.on('data', (d: Buffer) => {
    buf += d.toString();
    const parts = buf.split('\n');
    buf = parts.pop()!;
    child.lines.push(...parts);
  });
  child.stderr!.on('data', (d: Buffer) => process.stderr.write(`[worker ${child.pid}] ${d}`));
  return child;
}

export async function startDaemon(t: TestEnv, args: string[] = []): Promise<{ pid: number; proc: ChildProcess; stderr: () => string }> {
  const before = serviceFile(t.runtimeDir)?.pid;
  const proc = spawn(process.execPath, [CLI, 'serve', ...args], { env: t.env, stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  proc.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  await waitUntil(() => {
    const s = serviceFile(t.runtimeDir);
    if (proc.exitCode !== null) throw new Error(`logd serve exited with ${proc.exitCode}: ${err}`);
    return !!s && s.pid === proc.pid && s.pid !== before;
  }, 10_000, 'logd serve to publish its service file');
  return { pid: proc.pid!, proc, stderr: () => err };
}

export async function exportJsonl(t: TestEnv, runId: string, extra: string[] = []): Promise<Array<Record<string, unknown>>> {
  const r = await cli(t, ['export', runId, '--format', 'jsonl', ...extra]);
  return r.stdout.trim() === '' ? [] : r.stdout.trim().split('\n').map((l) => JSON.parse(l));
}

/**
 * The reach tests' silent daemon. Daemon `pid` (the writer's first rows already acknowledged) is SIGKILLed, and in
 * its place a listener of this user on its socket takes every connection and never says a word, named by the service
 * file with this process's own pid and start time (so discovery takes it as alive). The writer goes on (the `go`
 * file); once it has connected there (within `connectMs`), the real daemon comes back at the same socket path and
 * the silent one keeps what it took. Resolves with the writer's `finished {...}` line (`lines`: its stdout), parsed.
 */
export async function throughMuteListener(t: TestEnv, pid: number, lines: string[], go: string, connectMs: number): Promise<{ state: string; message: string; ms: number; id: string }> {
  process.kill(pid, 'SIGKILL');
  await waitUntil(() => !alive(pid), 10_000, 'the daemon to die');
  const file = path.join(t.runtimeDir, 'service.json');
  const service = JSON.parse(fs.readFileSync(file, 'utf8'));
  const socketPath = service.socket.slice('unix:'.length);
  fs.rmSync(socketPath, { force: true });
  const held: net.Socket[] = [];
  const mute = net.createServer((c) => held.push(c));
  await new Promise<void>((r) => mute.listen(socketPath, r));
  fs.writeFileSync(file, JSON.stringify({ ...service, pid: process.pid, procStart: procStartTime(process.pid) }));
  try {
    fs.writeFileSync(go, '');
    await waitUntil(() => held.length > 0, connectMs, 'the writer to connect to the mute listener');
    await new Promise((r) => setTimeout(r, 1000));
    // It takes no more connections (closing it removes its socket file), and keeps the ones it took.
    mute.close();
    await startDaemon(t);
    await waitUntil(() => lines.some((l) => l.startsWith('finished ')), 60_000, 'the writer to finish');
    return JSON.parse(lines.find((l) => l.startsWith('finished '))!.slice(9));
  } finally {
    for (const c of held) c.destroy();
    if (mute.listening) mute.close();
  }
}

/**
 * A daemon restarted under a finish, its new service file late. Daemon `pid` is stopped (SIGSTOP) before the writer
 * finishes (the `go` file), so FinishRun waits on it; then it is SIGKILLed, a new daemon serves the same socket with a
 * new token, and for 1.5 s no service file names it: the writer's retries reach it with the old token.
 */
export async function restartUnderFinish(t: TestEnv, pid: number, go: string): Promise<void> {
  process.kill(pid, 'SIGSTOP');
  fs.writeFileSync(go, '');
  await new Promise((r) => setTimeout(r, 700));
  process.kill(pid, 'SIGKILL');
  await waitUntil(() => !alive(pid), 10_000, `daemon ${pid} to die`);
  await startDaemon(t);
  const file = path.join(t.runtimeDir, 'service.json');
  fs.renameSync(file, `${file}.hidden`);
  await new Promise((r) => setTimeout(r, 1500));
  fs.renameSync(`${file}.hidden`, file);
}
