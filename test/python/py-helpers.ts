// Shared by the Python client's tests: where the Python with logd installed
// is (.venv-python, made by `make python`), why tests skip when there is
// none, and a LOGD_BIN wrapper so the client can auto-start this repository's
// daemon as its sidecar.
import net from 'node:net';
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { execa } from 'execa';
import { ROOT, CLI, type TestEnv } from '../helpers.js';

export const PYTHON = process.env.LOGD_TEST_PYTHON || path.join(ROOT, '.venv-python', 'bin', 'python');
export const FIXTURES = path.join(ROOT, 'test', 'python', 'fixtures');

function probe(code: string): string | null {
  if (!fs.existsSync(PYTHON)) return `${PYTHON} does not exist (run \`make python\`, which needs /usr/bin/python3 with python3-venv)`;
  try {
    execFileSync(PYTHON, ['-c', code], { stdio: 'pipe', timeout: 60_000 });
    return null;
  } catch (e) {
    const err = e as { stderr?: Buffer; message: string };
    return `${PYTHON} -c "${code}" failed: ${(err.stderr?.toString() || err.message).trim().split('\n').pop()}`;
  }
}

/** Why the Python client's tests cannot run here; null when they can. */
export const pythonMissing: string | null = probe('import logd, grpc, google.protobuf');
/** Why the DataFrame tests (logd.Api into pandas) cannot run here; null when they can. Asked on first use. */
export function pandasMissing(): string | null {
  if (pythonMissing) return pythonMissing;
  return probe('import pandas, numpy') && `${PYTHON} has no pandas (make python installs it from python/read-requirements.txt)`;
}
/** Why the PyTorch DDP tests cannot run here; null when they can. */
export const torchMissing: string | null = pythonMissing ?? probe('import torch, torch.distributed; assert torch.distributed.is_available()');

/** A `logd` executable for LOGD_BIN: this repository's CLI under this Node. */
export function logdBin(t: TestEnv): string {
  const file = path.join(t.dir, 'logd');
  fs.writeFileSync(file, `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(CLI)} "$@"\n`, { mode: 0o755 });
  return file;
}

export function pyEnv(t: TestEnv, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  // LOGD_QUIET: init()'s line about its run would be in every test's stderr (test/python/announce.test.ts turns it on).
  const env: NodeJS.ProcessEnv = { ...t.env, LOGD_BIN: logdBin(t), PYTHONUNBUFFERED: '1', LOGD_QUIET: '1', ...extra };
  for (const k of ['LOCAL_RANK', 'LOCAL_WORLD_SIZE', 'GROUP_RANK', 'ROLE_RANK', 'TORCHELASTIC_RUN_ID', 'TORCHELASTIC_RESTART_COUNT', 'MASTER_ADDR', 'MASTER_PORT']) delete env[k];
  return env;
}

/** Runs a Python program. Past the timeout its whole process group is killed (forked workers and relays included,
 * which would otherwise hold the output pipes open and the result back), so what it printed is seen. */
export function runPython(t: TestEnv, args: string[], opts: { env?: Record<string, string>; timeout?: number } = {}) {
  const timeout = opts.timeout ?? 120_000;
  const p = execa(PYTHON, args, { env: pyEnv(t, opts.env), extendEnv: false, reject: false, all: true, detached: true });
  const timer = setTimeout(() => {
    process.stderr.write(`runPython: ${args[0]} ran past ${timeout} ms; killing its process group\n`);
    try {
      process.kill(-p.pid!, 'SIGKILL');
    } catch { /* already gone */ }
  }, timeout);
  p.finally(() => clearTimeout(timer)).catch(() => {});
  return p;
}

export function readJson<T = any>(file: string): T {
  return JSON.parse(fs.readFileSync(file, 'utf8')) as T;
}

const spawned: ChildProcess[] = [];

/** Kills what spawnPython started and is still running (for afterEach: a failed test leaves no process waiting behind it). */
export function killSpawnedPython(): void {
  for (const p of spawned.splice(0)) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
}

/** Starts a Python process; its stdout lines are collected in `lines`, stderr in `err()`. */
export function spawnPython(t: TestEnv, args: string[], env: Record<string, string> = {}): ChildProcess & { lines: string[]; err: () => string } {
  const child = spawn(PYTHON, args, { env: pyEnv(t, env), stdio: ['ignore', 'pipe', 'pipe'] }) as ChildProcess & { lines: string[]; err: () => string };
  spawned.push(child);
  child.lines = [];
  let buf = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => {
    buf += d.toString();
    const parts = buf.split('\n');
    buf = parts.pop()!;
    child.lines.push(...parts);
  });
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  child.err = () => err;
  return child;
}

/** A TCP port free on loopback now (torchrun's --master_port). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}
