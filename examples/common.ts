// Helpers shared by the examples: option parsing, a fake training step, a
// tiny stand-in for torchrun, and waiting for children with a deadline.
// Nothing here talks to logd; each example shows its own logd calls.
import os from 'node:os';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

export interface ExampleOptions {
  /** Worker processes (ranks, pool workers or children, depending on the example). */
  workers: number;
  steps: number;
  project: string;
  /** Milliseconds of pretend work per training step. */
  stepMs: number;
  /** Set by a launcher on the processes it starts. */
  worker: boolean;
  /** Anything else the example asked for, as strings. */
  extra: Record<string, string | undefined>;
}

/**
 * Parses `--workers N --steps N --project P --step-ms N` (plus `extraNames`)
 * and exits with a usage line on anything else.
 */
export function parseOptions(
  script: string,
  defaults: { workers: number; steps: number; project: string; stepMs?: number },
  extraNames: string[] = [],
): ExampleOptions {
  const extraSpec = Object.fromEntries(extraNames.map((n) => [n, { type: 'string' as const }]));
  const usage = `usage: node ${script} [--workers N] [--steps N] [--project P] [--step-ms N]${extraNames.map((n) => ` [--${n} V]`).join('')}`;
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      options: {
        workers: { type: 'string' }, steps: { type: 'string' }, project: { type: 'string' }, 'step-ms': { type: 'string' },
        worker: { type: 'boolean' }, help: { type: 'boolean', short: 'h' }, ...extraSpec,
      },
      strict: true,
    }));
  } catch (e) {
    console.error(`${script}: ${(e as Error).message}\n${usage}`);
    process.exit(2);
  }
  if (values.help) {
    console.log(usage);
    process.exit(0);
  }
  const int = (name: string, raw: string | boolean | undefined, dflt: number, min: number): number => {
    if (raw === undefined) return dflt;
    const n = Number(raw);
    if (!Number.isSafeInteger(n) || n < min) {
      console.error(`${script}: --${name} must be an integer >= ${min}, not ${JSON.stringify(raw)}\n${usage}`);
      process.exit(2);
    }
    return n;
  };
  return {
    workers: int('workers', values.workers, defaults.workers, 1),
    steps: int('steps', values.steps, defaults.steps, 1),
    stepMs: int('step-ms', values['step-ms'], defaults.stepMs ?? 20, 0),
    project: typeof values.project === 'string' ? values.project : defaults.project,
    worker: values.worker === true,
    extra: Object.fromEntries(extraNames.map((n) => [n, values[n] as string | undefined])),
  };
}

/** The options again as argv, for the processes an example starts. */
export function optionArgs(o: ExampleOptions): string[] {
  return ['--workers', String(o.workers), '--steps', String(o.steps), '--project', o.project, '--step-ms', String(o.stepMs)];
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/**
 * The metrics of one fake training step: loss decays from about 2 towards 0,
 * accuracy rises towards 1; `seed` (a rank or a trial) shifts the curve so
 * runs differ. Rounded so that values read back compare exactly.
 */
export function fakeMetrics(step: number, steps: number, seed = 0): { loss: number; acc: number } {
  const progress = Math.exp((-3 * step) / steps);
  return { loss: round6(2 * progress + 0.01 * seed), acc: round6(1 - progress) };
}

function round6(x: number): number {
  return Math.round(x * 1e6) / 1e6;
}

/** Pretend work for one step: a short sleep, so examples stay fast on any machine. */
export async function trainStep(stepMs: number): Promise<void> {
  await sleep(stepMs);
}

/**
 * A command a reader can paste to look at what an example stored: `logd …`,
 * the command `make install` puts on PATH (see logdOnPath()).
 */
export function logdCommand(args: string): string {
  // The same data dir (and runtime dir) as this process, or the CLI would look at another daemon.
  const env = ['LOGD_DIR', 'LOGD_RUNTIME_DIR'].filter((k) => process.env[k]).map((k) => `${k}=${path.resolve(process.env[k]!)} `).join('');
  return `${env}logd ${args}`;
}

/** Whether a `logd` command is on PATH; when not, a line that says how to get one (or null). */
export function logdOnPathHint(): string | null {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (dir && existsSync(path.join(dir, 'logd'))) return null;
  }
  const cli = path.relative(process.cwd(), path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'daemon', 'cli.js')) || 'cli.js';
  return `no \`logd\` on PATH yet: \`make install\` puts it there (or run \`node ${cli} …\` in its place)`;
}

/** The shell's convention: 128 + the signal number for a process killed by a signal. */
function exitCodeOf(code: number | null, signal: NodeJS.Signals | null): number {
  if (code !== null) return code;
  return 128 + (signal ? os.constants.signals[signal] ?? 0 : 0);
}

/** Resolves with the child's exit code; kills it (SIGKILL) and resolves 124 once the deadline passes. */
export function waitForExit(child: ChildProcess, deadlineMs: number, what: string): Promise<number> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) {
      resolve(child.exitCode ?? exitCodeOf(null, child.signalCode));
      return;
    }
    const timer = setTimeout(() => {
      console.error(`${what} (pid ${child.pid}) did not exit within ${deadlineMs} ms; killing it`);
      child.kill('SIGKILL');
      resolve(124);
    }, deadlineMs);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      resolve(exitCodeOf(code, signal));
    });
    child.once('error', (e) => {
      clearTimeout(timer);
      console.error(`${what}: ${e.message}`);
      resolve(127);
    });
  });
}

/**
 * A tiny stand-in for `torchrun --nproc-per-node N`: starts this same script N
 * times with `--worker` and the torchrun environment (RANK, LOCAL_RANK,
 * WORLD_SIZE, ...), waits for all of them, and like torchrun stops the others
 * when one fails. Returns the first failing rank's exit code, 0 when all succeeded.
 */
export async function launch(script: string, nprocs: number, args: string[], deadlineMs = 60_000): Promise<number> {
  const children = Array.from({ length: nprocs }, (_, rank) =>
    spawn(process.execPath, [script, '--worker', ...args], {
      stdio: 'inherit',
      env: {
        ...process.env,
        RANK: String(rank), LOCAL_RANK: String(rank), WORLD_SIZE: String(nprocs), LOCAL_WORLD_SIZE: String(nprocs),
        GROUP_RANK: '0', MASTER_ADDR: '127.0.0.1', MASTER_PORT: '29500',
      },
    }),
  );
  let firstFailure = 0;
  await Promise.all(
    children.map(async (child, rank) => {
      const code = await waitForExit(child, deadlineMs, `rank ${rank}`);
      if (code === 0 || firstFailure !== 0) return;
      firstFailure = code;
      console.error(`launcher: rank ${rank} exited with code ${code}; stopping the other ranks`);
      for (const other of children) if (other.exitCode === null && other.signalCode === null) other.kill('SIGTERM');
    }),
  );
  return firstFailure;
}

/** Runs an example's entry point; a failure prints one clear line (not a stack) and exits 1. */
export async function runMain(label: string, fn: () => Promise<void>): Promise<void> {
  try {
    await fn();
  } catch (e) {
    console.error(`${label}: ${(e as Error).message}`);
    process.exit(1);
  }
}

/** The torchrun variables a worker was started with. */
export function rankFromEnv(): { rank: number; localRank: number; worldSize: number } {
  const int = (name: string) => {
    const v = process.env[name];
    if (v === undefined || !/^\d+$/.test(v)) throw new Error(`${name} is not set; start this script without --worker and it launches its workers itself`);
    return Number(v);
  };
  return { rank: int('RANK'), localRank: int('LOCAL_RANK'), worldSize: int('WORLD_SIZE') };
}
