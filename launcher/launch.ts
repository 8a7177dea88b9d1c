// launch: starts nproc-per-node rank processes with torchrun's environment,
// prefixes their output with `[rank N] `, forwards SIGINT/SIGTERM, and stops
// every rank as soon as one fails. The job's runs go to one group (--group,
// or the script's name and the start time), passed to every rank as
// LOGD_GROUP, and the launcher says where they went. It never waits without a deadline: after a
// failure or a signal, stragglers get SIGTERM, then SIGKILL after graceMs.
import { spawn, type ChildProcess } from 'node:child_process';
import { constants } from 'node:os';
import path from 'node:path';
import { watchHealth, reportExit, jobRuns } from './health-watch.js';
import { storyOfRuns } from '../src/story/story.js';

export interface LaunchOptions {
  nprocPerNode: number;
  nnodes: number;
  nodeRank: number;
  masterAddr: string;
  masterPort: number;
  /** A .js/.mjs/.cjs file runs with this node (process.execPath); anything else is executed directly. */
  script: string;
  args: string[];
  /** Time between SIGTERM and SIGKILL when stopping ranks. */
  graceMs: number;
  /** The group of the job's runs, given to every rank as LOGD_GROUP; default: defaultGroup(script). */
  group?: string;
  /** Called once before any rank starts; its variables (e.g. LOGD_SERVICE) go to every rank. */
  ensureDaemon?: () => Promise<Record<string, string>>;
  /** Where prefixed output goes; defaults to process.stdout / process.stderr. */
  stdout?: NodeJS.WritableStream;
  stderr?: NodeJS.WritableStream;
}

const NODE_SCRIPT = /\.(m|c)?js$/;
/** ensureDaemon has its own deadlines; this one only guarantees launch itself never hangs. */
const ENSURE_DAEMON_TIMEOUT_MS = 60_000;

/**
 * A group name for a job: the script's name and the local start time,
 * `train-20261125-093012` (a second launch of the same script gets its own).
 */
export function defaultGroup(script: string, at = new Date()): string {
  const base = path.basename(script).replace(/\.(m|c)?(js|ts)$|\.py$|\.sh$/, '') || 'job';
  const p = (n: number) => String(n).padStart(2, '0');
  return `${base}-${at.getFullYear()}${p(at.getMonth() + 1)}${p(at.getDate())}-${p(at.getHours())}${p(at.getMinutes())}${p(at.getSeconds())}`;
}

/** A word the shell reads back as itself. */
function shellWord(s: string): string {
  return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

/** The line that says where a job's runs went, and how to see them. */
export function whereTheRunsAre(group: string): string {
  return `the runs of this job are in group ${group}: logd runs --group ${shellWord(group)} (or /groups/${encodeURIComponent(group)} in logd ui)`;
}

/** torchrun's per-rank variables. */
export function rankEnv(opts: LaunchOptions, localRank: number): Record<string, string> {
  return {
    RANK: String(opts.nodeRank * opts.nprocPerNode + localRank),
    LOCAL_RANK: String(localRank),
    WORLD_SIZE: String(opts.nnodes * opts.nprocPerNode),
    LOCAL_WORLD_SIZE: String(opts.nprocPerNode),
    GROUP_RANK: String(opts.nodeRank),
    MASTER_ADDR: opts.masterAddr,
    MASTER_PORT: String(opts.masterPort),
  };
}

function validate(opts: LaunchOptions): void {
  const int = (v: number, min: number, what: string) => {
    if (!Number.isInteger(v) || v < min) throw new Error(`launch: ${what} must be an integer >= ${min} (got ${v})`);
  };
  int(opts.nprocPerNode, 1, '--nproc-per-node');
  int(opts.nnodes, 1, '--nnodes');
  int(opts.nodeRank, 0, '--node-rank');
  int(opts.masterPort, 1, '--master-port');
  int(opts.graceMs, 0, '--grace-ms');
  if (opts.nodeRank >= opts.nnodes) throw new Error(`launch: --node-rank ${opts.nodeRank} must be below --nnodes ${opts.nnodes}`);
  if (!opts.script) throw new Error('launch: no script given');
}

/** Copies a child stream to `out`, one `[rank N] ` prefix per line. */
function pipePrefixed(from: NodeJS.ReadableStream, out: NodeJS.WritableStream, prefix: string): Promise<void> {
  let partial = '';
  from.setEncoding('utf8');
  from.on('data', (chunk: string) => {
    const lines = (partial + chunk).split('\n');
    partial = lines.pop()!;
    if (lines.length > 0) out.write(lines.map((l) => prefix + l + '\n').join(''));
  });
  return new Promise((resolve) => {
    from.on('end', () => {
      if (partial) out.write(prefix + partial + '\n');
      resolve();
    });
    from.on('error', () => resolve());
  });
}

function signalNumber(sig: NodeJS.Signals): number {
  return (constants.signals as Record<string, number>)[sig] ?? 15;
}

/** Signals the rank's whole process group (it runs in its own), falling back to the process. */
function signalRank(child: ChildProcess, sig: NodeJS.Signals): void {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  try {
    process.kill(-child.pid, sig);
  } catch {
    child.kill(sig);
  }
}

/**
 * Runs the job's ranks on this node and resolves with the exit code: 0 when
 * all succeed; otherwise the first failing rank's code (128 + signal number
 * when it died by a signal); 128 + signal when the launcher itself was
 * interrupted.
 */
export async function launch(opts: LaunchOptions): Promise<number> {
  validate(opts);
  const stdout = opts.stdout ?? process.stdout;
  const stderr = opts.stderr ?? process.stderr;
  let daemonEnv: Record<string, string> = {};
  if (opts.ensureDaemon) {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${ENSURE_DAEMON_TIMEOUT_MS} ms`)), ENSURE_DAEMON_TIMEOUT_MS);
    });
    try {
      daemonEnv = await Promise.race([opts.ensureDaemon(), deadline]);
    } catch (err) {
      stderr.write(`launch: could not reach or start the logd daemon: ${(err as Error).message} (start one with \`logd serve\`, or check LOGD_SERVICE)\n`);
      return 1;
    } finally {
      clearTimeout(timer);
    }
  }
  const launchedAt = Date.now() / 1000;
  const group = opts.group || process.env.LOGD_GROUP || defaultGroup(opts.script);
  stderr.write(`launch: ${whereTheRunsAre(group)}\n`);
  // One line per health event of the job's group (a stalled rank, a straggler), as the daemon judges them.
  const stopWatching = daemonEnv.LOGD_SERVICE ? watchHealth(daemonEnv.LOGD_SERVICE, group, (line) => stderr.write(`${line}\n`)) : async () => {};
  const isNode = NODE_SCRIPT.test(opts.script);
  const command = isNode ? process.execPath : opts.script;
  const argv = isNode ? [opts.script, ...opts.args] : opts.args;

  let exitCode: number | null = null; // first failure, or the signal we received
  let stopping = false;
  let killTimer: NodeJS.Timeout | null = null;
  const children: ChildProcess[] = [];

  const stopAll = (sig: NodeJS.Signals) => {
    for (const c of children) signalRank(c, sig);
    if (stopping) return;
    stopping = true;
    killTimer = setTimeout(() => {
      for (const c of children) signalRank(c, 'SIGKILL');
    }, opts.graceMs);
  };

  let signalsSeen = 0;
  const onSignal = (sig: NodeJS.Signals) => {
    signalsSeen++;
    exitCode ??= 128 + signalNumber(sig);
    if (signalsSeen > 1) {
      stderr.write(`launch: second ${sig}; killing all ranks now\n`);
      for (const c of children) signalRank(c, 'SIGKILL');
      return;
    }
    stderr.write(`launch: got ${sig}; forwarding it to ${children.length} rank(s)\n`);
    for (const c of children) signalRank(c, sig);
    stopAll(sig);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  try {
    const finished = Array.from({ length: opts.nprocPerNode }, (_, localRank) => {
      // LOGD_CONSOLE=1 unless set: each rank's client stores what the rank prints with its run (a TypeScript
      // client captures only when asked; here its stdout is this launcher's pipe, read as fast as it comes).
      const env: NodeJS.ProcessEnv = { LOGD_CONSOLE: '1', ...process.env, ...daemonEnv, ...rankEnv(opts, localRank), LOGD_GROUP: group };
      const rank = env.RANK;
      const child = spawn(command, argv, { env, stdio: ['inherit', 'pipe', 'pipe'], detached: true });
      children.push(child);
      const piped = Promise.all([pipePrefixed(child.stdout!, stdout, `[rank ${rank}] `), pipePrefixed(child.stderr!, stderr, `[rank ${rank}] `)]);
      return new Promise<void>((resolve) => {
        const onExit = (code: number | null, signal: NodeJS.Signals | null, why?: string) => {
          reportExit(daemonEnv.LOGD_SERVICE, child.pid, code, signal); // the daemon cannot read it: this process collected it
          const rc = code ?? (signal ? 128 + signalNumber(signal) : 1);
          if (rc !== 0 && exitCode === null) {
            exitCode = rc;
            stderr.write(`launch: rank ${rank} ${why ?? (signal ? `was killed by ${signal}` : `exited with code ${code}`)}; stopping the other ranks\n`);
            stopAll('SIGTERM');
          }
          // Output pipes may be held open by grandchildren; don't wait on them forever.
          const drained = setTimeout(resolve, 1000);
          piped.then(() => {
            clearTimeout(drained);
            resolve();
          });
        };
        child.once('error', (err: NodeJS.ErrnoException) => {
          const rc = err.code === 'ENOENT' ? 127 : 126;
          onExit(rc, null, `could not start ${command} (${err.code}: ${err.message})`);
        });
        child.once('exit', (code, signal) => onExit(code, signal));
      });
    });
    await Promise.all(finished);
  } finally {
    await stopWatching();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    if (killTimer) clearTimeout(killTimer);
  }
  const code = exitCode ?? 0;
  // The runs the ranks made (a script may name its own group), and the job's story when it failed.
  const made = await jobRuns(daemonEnv.LOGD_SERVICE, children.map((c) => c.pid ?? 0).filter(Boolean), launchedAt, code === 0 ? 2000 : 5000);
  const groups = [...new Set((made ?? []).map((r) => r.group).filter(Boolean))];
  if (code !== 0 && made && made.length) {
    const story = storyOfRuns(made);
    if (story) stderr.write(`launch: job ${story.verdict}: ${story.line.replace(/^(failed|stopped): /, '')}\n`);
  }
  const shown = groups.length === 1 ? groups[0] : group;
  stderr.write(`launch: ${code === 0 ? 'done' : `exited with code ${code}`}; ${groups.length > 1 ? `the ranks' runs are in groups ${groups.join(', ')}` : whereTheRunsAre(shown)}\n`);
  return code;
}
