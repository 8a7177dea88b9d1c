// logd's client library: `import * as logd from 'logd'`.
//
//   await logd.setup();                     // optional: find or start the daemon, export LOGD_SERVICE
//   const run = await logd.init({ project, name, group, config });
//   run.log({ loss }, { step });            // synchronous, never blocks on I/O
//   const h = run.handle();                 // another process: await logd.attach(h)
//   await run.finish();
import os from 'node:os';
import { randomBytes } from 'node:crypto';
import { clientTunables, rankEnv, resolvePaths, LOGD_VERSION, PROTOCOL_VERSION } from '../src/config.js';
import { parseServiceAddress, type ClientInfo, type RunInfo, type ServiceAddress } from '../src/wire.js';
import { toJson } from '../src/json.js';
import { connectionFor, CallError } from './connection.js';
import { findDaemon, fromServiceFile, DaemonStartError } from './discovery.js';
import { withDaemon, DaemonUnavailableError } from './reach.js';
import { checkedDaemon } from './stale-service.js';
import { UntrustedDirError } from '../src/private-dir.js';
import { UntrustedDaemonError } from './peer-credentials.js';
import { BatchWriter } from './writer.js';
import { Run, liveRuns, type RunHandlePayload } from './run.js';
import { DisabledRun } from './disabled.js';
import { captureConsole } from './console-capture.js';
import { installExitHooks } from './exit-hooks.js';
import { raiseOnError, deferredSpool, deferredInfo, deferredCreate, retryCreate, type OnError } from './deferred.js';
import { checkRunId } from '../src/names.js';

export { Run, DisabledRun, CallError, DaemonStartError, DaemonUnavailableError, UntrustedDirError, UntrustedDaemonError };
export type { FinishOptions, FinishResult, LogOptions, RunState } from './run.js';
export { Histogram, Image, Text } from './media/index.js';
export { api } from './readback/index.js';
export type { RunRecord, HistoryColumns } from './readback/index.js';
export type { HistogramOptions, PixelsOptions } from './media/index.js';

export interface InitOptions {
  /** Record the git commit, branch, dirty flag, command line and versions on the run (default true; LOGD_SAVE_CODE=0 turns it off). */
  saveCode?: boolean;
  project?: string;
  name?: string;
  group?: string;
  jobType?: string;
  config?: Record<string, unknown>;
  tags?: string[];
  notes?: string;
  /** Ask for this run id (1-64 of A-Z a-z 0-9 _ -); default: the daemon picks one. */
  id?: string;
  /** online (default): stored and uploaded; offline: stored locally only; disabled: every call is a no-op. */
  mode?: 'online' | 'offline' | 'disabled';
  /** Sample system metrics at least this often while the run is open (default: the daemon's interval). */
  sampleIntervalMs?: number;
  /**
   * When no daemon can be used at start: 'defer' (default) goes on with a
   * deferred run (client/deferred.ts) and says why in `run.problem`; 'raise'
   * throws, as LOGD_ON_ERROR=raise does for every init().
   */
  onError?: OnError;
  /**
   * Capture this process's stdout and stderr into the run (default false, or
   * true with LOGD_CONSOLE=1; LOGD_CONSOLE=0 turns it off everywhere). Only
   * the first open run of a process captures (docs/api.md, "Console output").
   */
  console?: boolean;
  /**
   * When the run `id` exists: 'allow' continues it (else creates it), 'must'
   * continues it or throws, 'never' (default) throws. A continued run is a new
   * attempt: running again, its config merged, its steps going on from the
   * last stored step (docs/api.md, "Continuing a run").
   */
  resume?: 'allow' | 'must' | 'never';
  /**
   * Rewind: continue run `runId` (this init's id; leave `id` out or give the
   * same) as a new attempt from `step`, the step of the checkpoint you resume.
   * Rows earlier attempts logged above it stay stored but superseded: reads
   * show the latest timeline. `log()` without a step goes on from step + 1.
   * Throws when the step lies beyond the run's last stored step.
   */
  resumeFrom?: { runId?: string; step: number };
  /**
   * Fork: a new run (this init's id, or a fresh one) whose history starts as
   * the daemon's copy of run `runId`'s rows up to and including `step`, with
   * its config (merged with `config`); metadata.forkedFrom links back.
   */
  forkFrom?: { runId: string; step: number };
}

const warn = (m: string) => process.stderr.write(m.endsWith('\n') ? m : m + '\n');

// Given by the loader `import 'logd'` runs (dist/client/logd.js, made by scripts/bundle-client.mjs); absent when the
// client is loaded from its modules (dist/client/index.js).
declare const __logdCodeCache: string | undefined;

/**
 * How this process compiled the client: 'accepted' (from the V8 code cache the build made: the first init() and
 * finish() run compiled code), 'rejected' (the cache is another Node's: compiled as usual), 'none' (no cache),
 * 'off' (LOGD_CODE_CACHE=0), 'unbundled' (loaded from its modules, not through `import 'logd'`).
 */
export function codeCache(): 'accepted' | 'rejected' | 'none' | 'off' | 'unbundled' {
  return typeof __logdCodeCache === 'string' ? (__logdCodeCache as 'accepted' | 'rejected' | 'none' | 'off') : 'unbundled';
}

export function clientInfo(): ClientInfo {
  return { pid: process.pid, host: os.hostname(), rank: rankEnv(), clientVersion: LOGD_VERSION };
}

/**
 * Trainers import logd long before init() (models and data load in between):
 * when the daemon's address is already known, the connection to it starts
 * as logd is imported (the socket connects and HTTP/2 settles while the
 * trainer goes on), and a Hello warms the call path once the importing code
 * yields, unless init() came first. Neither keeps a process alive.
 */
let reachingAlready = false;
function knownDaemon(): ServiceAddress | null {
  try {
    const t = clientTunables();
    if (t.mode === 'disabled') return null;
    return t.service ? parseServiceAddress(t.service) : fromServiceFile(resolvePaths());
  } catch {
    return null; // init() will say what is wrong
  }
}
const early = knownDaemon();
try {
  if (early) connectionFor(early).connect();
} catch {
  /* a daemon that is not this user's (UntrustedDaemonError): init() says so */
}
function preconnect(): void {
  // init() (or attach, setup) came first and is calling itself: a Hello beside it would only cost it time.
  if (reachingAlready || !early) return;
  try {
    void connectionFor(early).unary('hello', { protocolVersion: PROTOCOL_VERSION, client: clientInfo() }, 2000).catch(() => {});
  } catch {
    /* an untrusted daemon: init() says so */
  }
}
setTimeout(preconnect, 0).unref();

/** Makes sure a daemon is reachable and exports LOGD_SERVICE for child processes. */
export async function setup(): Promise<{ service: string }> {
  reachingAlready = true;
  const addr = (await checkedDaemon({ timeoutMs: clientTunables().callTimeoutMs }))!;
  return { service: `${addr.target}#${addr.token}` };
}

function makeWriter(addr: ServiceAddress, info: RunInfo, runToken: string, writerId: string): BatchWriter {
  const t = clientTunables();
  // An older daemon does not say where its spool is: this process's own is the best guess then.
  const spoolDir = info.spoolDir || resolvePaths().spoolDir;
  return new BatchWriter({ address: addr, runId: info.id, runToken, writerId, client: clientInfo(), flushIntervalMs: t.flushIntervalMs, maxBufferBytes: t.maxBufferBytes, journalMb: t.journalMb, warn, spoolDir });
}

/**
 * While this process has runs open, it tells their daemons it lives: a Hello
 * every LOGD_KEEPALIVE_MS (15 s) on a timer that never keeps the process
 * alive and costs log() nothing. A daemon on another host cannot watch this
 * process by pid; silence past its lease (LOGD_OWNER_LEASE_MS) means the
 * owner is gone. Paused with the process (SIGSTOP), it stops too.
 */
let keepalive: NodeJS.Timeout | null = null;
function ensureKeepalive(): void {
  const ms = clientTunables().keepaliveMs;
  if (keepalive || ms <= 0) return;
  keepalive = setInterval(() => {
    const runs = liveRuns();
    if (runs.length === 0) {
      clearInterval(keepalive!);
      keepalive = null;
      return;
    }
    const told = new Set<unknown>();
    for (const r of runs) {
      if (r.writer.deferred) continue;
      const c = r.writer.connection;
      if (told.has(c)) continue;
      told.add(c);
      void c.unary('hello', { protocolVersion: PROTOCOL_VERSION, client: clientInfo() }, Math.min(ms, 10_000)).catch(() => {});
    }
  }, ms);
  keepalive.unref();
}

/** A fresh run id: 12 characters of a-z 0-9 (about 60 random bits). */
function newRunId(): string {
  return randomBytes(10).toString('base64url').replace(/[-_]/g, 'x').toLowerCase().slice(0, 12);
}

export async function init(opts: InitOptions = {}): Promise<Run | DisabledRun> {
  const t = clientTunables();
  const mode = t.mode ?? opts.mode ?? 'online';
  if (mode === 'disabled') return new DisabledRun(opts);
  reachingAlready = true;
  // The id is chosen here and the create carries a key only this call
  // knows: a CreateRun sent again (after a timeout, or to a restarted
  // daemon) gets the same run back instead of leaving a second one behind.
  const request = {
    // A rank started by `logd launch` gets its job's group in LOGD_GROUP.
    client: clientInfo(), project: opts.project ?? '', name: opts.name ?? '', group: opts.group || process.env.LOGD_GROUP || '', jobType: opts.jobType ?? '',
    configJson: toJson(opts.config ?? {}), tags: opts.tags ?? [], id: opts.id ?? opts.resumeFrom?.runId ?? newRunId(), mode, notes: opts.notes ?? '',
    sampleIntervalMs: opts.sampleIntervalMs ?? 0, createKey: randomBytes(18).toString('base64url'), resume: opts.resume ?? '',
    resumeFrom: opts.resumeFrom ? { runId: opts.resumeFrom.runId ?? opts.id ?? '', step: opts.resumeFrom.step } : null,
    forkFrom: opts.forkFrom ? { runId: opts.forkFrom.runId, step: opts.forkFrom.step } : null,
  };
  if (opts.resume !== undefined && !['allow', 'must', 'never'].includes(opts.resume)) throw new TypeError(`logd: resume ${JSON.stringify(opts.resume)} must be 'allow', 'must' or 'never'`);
  if (opts.resume === 'must' && !opts.id && !opts.resumeFrom) throw new TypeError("logd: resume: 'must' continues a run: give its id");
  checkRewindOrFork(opts);
  const badId = checkRunId(request.id);
  if (badId) throw new TypeError(`logd: ${badId}`);
  const create = () => withDaemon('init', (c, ms) => c.unary<unknown, RunInfo>('createRun', request, ms));
  let created: { value: RunInfo; address: ServiceAddress };
  try {
    created = await create();
  } catch (e) {
    // A rewind or a fork is done by the daemon at init: it cannot be deferred to a daemon found later.
    if (raiseOnError(opts.onError, e) || opts.resumeFrom || opts.forkFrom) throw e;
    return deferredRun(request, e, create, opts);
  }
  const { value: info, address } = created;
  const writer = makeWriter(address, info, info.runToken, info.ownerWriterId);
  installExitHooks();
  ensureKeepalive();
  const run = withConsole(new Run(info, writer, info.runToken, true, warn), opts, t.console);
  // Its code and environment (client/environment.ts, loaded then): init({ saveCode }) first, then LOGD_SAVE_CODE.
  if (opts.saveCode ?? process.env.LOGD_SAVE_CODE !== '0') run.sendEnvironment();
  return run;
}

/** resumeFrom / forkFrom checked before anything is sent (the daemon checks them again). */
function checkRewindOrFork(opts: InitOptions): void {
  const step = (what: string, s: unknown) => {
    if (typeof s !== 'number' || !Number.isSafeInteger(s) || s < 0) throw new TypeError(`logd: ${what}.step ${JSON.stringify(s)} must be a non-negative integer (a step the run logged)`);
  };
  if (opts.resumeFrom && opts.forkFrom) throw new TypeError('logd: give resumeFrom (rewind this run) or forkFrom (a new run from another), not both');
  if (opts.resumeFrom) {
    step('resumeFrom', opts.resumeFrom.step);
    const named = opts.resumeFrom.runId;
    if (named !== undefined && opts.id !== undefined && named !== opts.id) {
      throw new TypeError(`logd: resumeFrom names run ${JSON.stringify(named)} but id is ${JSON.stringify(opts.id)}: resumeFrom rewinds the run being continued (give the same id, or leave id out); to start a new run from another run's step use forkFrom`);
    }
    if (named === undefined && opts.id === undefined) throw new TypeError('logd: resumeFrom rewinds a run: give its runId (or init\'s id)');
    if (opts.resume === 'never') throw new TypeError("logd: resume 'never' refuses to continue a run, and resumeFrom continues one: leave resume out");
  }
  if (opts.forkFrom) {
    step('forkFrom', opts.forkFrom.step);
    if (typeof opts.forkFrom.runId !== 'string' || !opts.forkFrom.runId) throw new TypeError('logd: forkFrom.runId must name the run to fork');
    if (opts.forkFrom.runId === opts.id) throw new TypeError(`logd: forkFrom names run ${JSON.stringify(opts.id)}, the run being created: a fork is a new run with its own id; to go back in this run use resumeFrom`);
    if (opts.resume === 'must') throw new TypeError("logd: resume 'must' continues an existing run, and forkFrom creates a new one: leave resume out");
  }
}

/** The owner's run takes this process's console, unless turned off or another run has it. */
function withConsole(run: Run, opts: InitOptions, allowed: boolean): Run {
  // Off unless asked (console: true, or LOGD_CONSOLE=1): taking process.stdout makes Node switch a piped
  // stdout to non-blocking, for this process and every process sharing the pipe, which breaks a program that
  // writes fd 1 with fs.writeSync. The Python client captures by default (a tee changes no file descriptor).
  const wanted = opts.console ?? process.env.LOGD_CONSOLE === '1';
  if (allowed && wanted) run.consoleCapture = captureConsole(run.id, run.writer, warn);
  return run;
}

/** init() could not use a daemon: the run goes on deferred, and a daemon gets it later (client/deferred.ts). */
function deferredRun(request: Parameters<typeof deferredInfo>[0] & Record<string, any>, e: unknown, create: () => Promise<{ value: RunInfo; address: ServiceAddress }>, opts: InitOptions): Run {
  const reason = (e as Error)?.message ?? String(e);
  const spoolDir = deferredSpool();
  const info = deferredInfo(request, spoolDir);
  const t = clientTunables();
  const writer = new BatchWriter({
    address: { target: 'unix:/nonexistent', token: '' }, runId: info.id, runToken: info.runToken, writerId: info.ownerWriterId, client: clientInfo(),
    flushIntervalMs: t.flushIntervalMs, maxBufferBytes: t.maxBufferBytes, journalMb: t.journalMb, warn, spoolDir,
    deferred: deferredCreate(request as any, reason),
  });
  const problem = `deferred: ${reason}. Training goes on and its rows are kept; logd keeps trying to reach a daemon, and if none answers before this process ends they are written to ${spoolDir}, which the daemon of this data dir stores at its next start (or: logd sync --ingest FILE)`;
  writer.lastProblem = problem;
  warn(`logd: run ${info.id}: ${problem}`);
  installExitHooks();
  const run = withConsole(new Run(info, writer, info.runToken, true, warn), opts, t.console);
  retryCreate(writer, create, (real) => {
    run.adoptToken(real.runToken);
    ensureKeepalive();
    warn(`logd: run ${info.id}: a daemon answered; the deferred run is created and its rows are being delivered`);
  });
  return run;
}

export function parseHandle(handle: string): RunHandlePayload {
  const bad = () => new TypeError('logd: that is not a run handle; pass the string returned by run.handle()');
  if (typeof handle !== 'string' || !handle.startsWith('logd1.')) throw bad();
  try {
    const p = JSON.parse(Buffer.from(handle.slice(6), 'base64url').toString('utf8')) as RunHandlePayload;
    if (p.v !== 1 || typeof p.r !== 'string' || typeof p.t !== 'string' || typeof p.s !== 'string') throw bad();
    return p;
  } catch {
    throw bad();
  }
}

/** Attaches to a run created elsewhere (its handle came from `run.handle()`). */
export async function attach(handle: string): Promise<Run> {
  const p = parseHandle(handle);
  reachingAlready = true;
  const writerId = `w-${randomBytes(6).toString('hex')}`;
  const { value: info, address } = await withDaemon(
    'attach',
    (c, ms) => c.unary<unknown, RunInfo>('attachRun', { client: clientInfo(), runId: p.r, runToken: p.t, writerId }, ms),
    parseServiceAddress(p.s),
  );
  const writer = makeWriter(address, info, p.t, writerId);
  installExitHooks();
  ensureKeepalive();
  return new Run(info, writer, p.t, false, warn);
}

/** Finishes every run this process still has open (what happens at exit too). */
export async function finishAll(exitCode = 0): Promise<void> {
  await Promise.all(liveRuns().map((r) => r.finish({ exitCode })));
}
