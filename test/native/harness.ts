// Helpers for native tests: free ports, and N real rank processes with a hard
// deadline (everything still running at the deadline is SIGKILLed).
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const workerScript = join(repoRoot, 'test', 'native', 'worker.mjs');
export const distReady = existsSync(join(repoRoot, 'dist', 'native', 'index.js'));
export const NOT_BUILT = 'dist/ is missing: run `make build` (npx tsc -p tsconfig.json) before vitest';

/** A port that was free a moment ago (bind port 0, read it, close). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

export interface RankOutcome {
  rank: number;
  code: number | null;
  signal: NodeJS.Signals | null;
  result: Record<string, any> | null;
  stdout: string;
  stderr: string;
  killedAtDeadline: boolean;
}

export interface Spawned {
  procs: ChildProcess[];
  done: Promise<RankOutcome[]>;
  /** Resolves when `rank` prints a line equal to `line`. */
  waitForLine(rank: number, line: string): Promise<void>;
}

/** Starts `node args...` (or `command args...`) once per rank; `argsFor(rank)` and `envFor(rank)` fill in the rest. */
export function spawnRanks(
  worldSize: number,
  argsFor: (rank: number) => string[],
  opts: { deadlineMs: number; envFor?: (rank: number) => Record<string, string>; ranks?: number[]; command?: string },
): Spawned {
  const ranks = opts.ranks ?? Array.from({ length: worldSize }, (_, r) => r);
  const lineWaiters: Array<{ rank: number; line: string; resolve: () => void }> = [];
  const stdouts = new Map<number, string>();
  const procs = ranks.map((rank) => {
    const child = spawn(opts.command ?? process.execPath, argsFor(rank), {
      cwd: repoRoot,
      env: { ...process.env, ...(opts.envFor?.(rank) ?? {}) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    stdouts.set(rank, '');
    child.stdout!.on('data', (d: Buffer) => {
      stdouts.set(rank, stdouts.get(rank)! + d.toString());
      for (const w of lineWaiters) if (w.rank === rank && stdouts.get(rank)!.split('\n').includes(w.line)) w.resolve();
    });
    return child;
  });
  const done = Promise.all(
    procs.map(
      (child, i) =>
        new Promise<RankOutcome>((resolve) => {
          let stderr = '';
          let killedAtDeadline = false;
          child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
          const timer = setTimeout(() => {
            killedAtDeadline = true;
            child.kill('SIGKILL');
          }, opts.deadlineMs);
          child.on('close', (code, signal) => {
            clearTimeout(timer);
            const stdout = stdouts.get(ranks[i]!)!;
            const line = stdout.split('\n').find((l) => l.startsWith('RESULT '));
            resolve({ rank: ranks[i]!, code, signal, result: line ? JSON.parse(line.slice(7)) : null, stdout, stderr, killedAtDeadline });
          });
        }),
    ),
  );
  const waitForLine = (rank: number, line: string) =>
    new Promise<void>((resolve, reject) => {
      if ((stdouts.get(rank) ?? '').split('\n').includes(line)) return resolve();
      lineWaiters.push({ rank, line, resolve });
      setTimeout(() => reject(new Error(`rank ${rank} did not print ${line} within ${opts.deadlineMs} ms`)), opts.deadlineMs).unref();
    });
  return { procs, done, waitForLine };
}

/** Runs one worker.mjs scenario on every rank over tcp:// and waits for all. */
export async function runScenario(scenario: string, worldSize: number, timeoutMs = 10_000, env: Record<string, string> = {}): Promise<RankOutcome[]> {
  const port = await freePort();
  return spawnRanks(worldSize, (rank) => [workerScript, scenario, String(rank), String(worldSize), `tcp://127.0.0.1:${port}`, String(timeoutMs)], {
    deadlineMs: 30_000,
    envFor: () => env,
  }).done;
}
