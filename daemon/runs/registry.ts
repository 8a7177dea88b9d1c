// Run registry: runs by id and their writers. A record batch's path from the
// stream to the log (validate -> intern -> append) is runs/intake.ts; the
// group commit that makes it durable and acknowledges it is runs/commit.ts.
import type { RunInfo } from '../../src/wire.js';
import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { Store } from '../store/store.js';
import { RunExistsError } from '../store/store.js';
import { StoreContinueRefused, type SharedRuns, type StoredRun } from '../store/from-store.js';
import { FINAL_STATES, type RunMeta, type RankMeta } from '../store/format.js';
import { LiveRun, type Writer, type WriteCall } from './run.js';
import { invalid, notFound, denied, failedPrecondition, alreadyExists, unavailable } from '../../src/errors.js';
import { reopenKilledRun, continueFinalRun, checkRewindOrFork, RewindRefused } from './resume.js';
import { checkRunId, checkLabel, checkKey } from '../../src/names.js';
import { parseJsonObject, ownRecord } from '../../src/json.js';
import { sameSecret } from '../../src/token.js';
import type { ClientInfo, OpenWriterMsg, RecordBatchMsg, StepRef } from '../../src/wire.js';
import { ForkRefused } from '../store/fork.js';
import type { DaemonTunables } from '../../src/config.js';
import { RunSummary } from '../store/summary.js';
import { rowFromLive } from './index-rows.js';
import type { SystemMetrics } from '../sampler/system-metrics.js';
import { Backpressure } from './backpressure.js';
import { GroupCommit } from './commit.js';
import { takeBatch } from './intake.js';

export interface CreateRunInput {
  client: ClientInfo | null; project: string; name: string; group: string; jobType: string;
  configJson: string; tags: string[]; id: string; mode: string; notes: string; sampleIntervalMs?: number; createKey?: string;
  /** '' or 'never' (refuse an existing id), 'allow' (continue it, else create), 'must' (continue it, else NOT_FOUND). */
  resume?: string;
  /** Rewind: continue run `id` (the same run) as a new attempt from this step. */
  resumeFrom?: StepRef | null;
  /** Fork: a new run starting as a copy of another run's rows up to this step. */
  forkFrom?: StepRef | null;
}

export function newId(bytes = 8): string {
  return randomBytes(bytes).toString('base64url').replace(/[-_]/g, 'x').toLowerCase();
}

export function rankOf(c: ClientInfo | null | undefined): RankMeta | null {
  const r = c?.rank;
  if (!r || (r.rank < 0 && r.localRank < 0 && r.worldSize < 0)) return null;
  return { rank: r.rank, localRank: r.localRank, worldSize: r.worldSize, nodeRank: r.nodeRank, localWorldSize: r.localWorldSize };
}

export class Registry {
  readonly runs = new Map<string, LiveRun>();
  recordsStored = 0;
  lastActivity = Date.now();
  /** The node's system metrics (null: sampling off). */
  system: SystemMetrics | null = null;
  /** Set by a graceful stop: new work is refused as UNAVAILABLE, so clients take it to the next daemon. */
  stopping: string | null = null;
  /** Bounds what the daemon holds in memory between a stream and the disk. */
  readonly backpressure = new Backpressure();
  /** Appended batches made durable in rounds, and acknowledged (runs/commit.ts). */
  readonly commits: GroupCommit;
  /** Runs continued as a new attempt since the uploader last looked (it may have uploaded them whole before). */
  readonly continued = new Set<string>();
  /** The shared store this daemon uploads to, for continuing runs it does not have (null: none configured). */
  shared: SharedRuns | null = null;

  constructor(readonly store: Store, readonly tunables: DaemonTunables, readonly log: (line: string) => void) {
    this.commits = new GroupCommit(this.runs, store, this.backpressure, log);
  }

  // ---- runs ----

  /**
   * `given`: the token and owner a deferred run's client chose (its spill
   * file says so; runs/spool.ts), instead of fresh ones.
   */
  createRun(req: CreateRunInput, given?: { runToken: string; ownerWriterId: string }): LiveRun {
    this.refuseWhileStopping();
    const rewind = req.resumeFrom ?? null;
    const fork = req.forkFrom ?? null;
    const id = req.id || rewind?.runId || newId();
    const bad = checkRunId(id)
      ?? checkLabel('project', req.project) ?? checkLabel('name', req.name) ?? checkLabel('group', req.group)
      ?? checkLabel('job type', req.jobType) ?? req.tags.map((t) => checkLabel('tag', t)).find(Boolean) ?? null;
    if (bad) throw invalid(bad);
    if (req.mode && req.mode !== 'online' && req.mode !== 'offline') throw invalid(`mode ${JSON.stringify(req.mode)} must be online or offline`);
    let config: Record<string, unknown>;
    try {
      config = parseJsonObject(req.configJson, 'config');
    } catch (e) {
      throw invalid((e as Error).message);
    }
    const resume = req.resume || 'never';
    if (!['allow', 'must', 'never'].includes(resume)) throw invalid(`resume ${JSON.stringify(String(req.resume).slice(0, 40))} must be allow, must or never`);
    if (resume === 'must' && !req.id && !rewind) throw invalid("resume='must' continues a run: give its id");
    const badFrom = checkRewindOrFork(id, req.resume ?? '', rewind, fork);
    if (badFrom) throw invalid(badFrom);
    const again = this.runs.get(id);
    if (again && req.createKey && again.meta.createKey && sameSecret(req.createKey, again.meta.createKey)) return again; // a retry of this create
    if (again && req.createKey && again.attemptKey && sameSecret(req.createKey, again.attemptKey)) return again; // a retry of this continue
    const exists = this.runs.has(id) || this.store.exists(id);
    if (rewind) {
      if (exists) return this.continueRun(id, req, config, rewind.step);
      throw notFound(`run ${id} does not exist in ${this.store.dataDir}; resume_from rewinds a run this node's store holds (logd runs lists them; to start a new run from another run's step use fork_from)`);
    }
    if (fork && exists) {
      if (resume !== 'allow') throw alreadyExists(`run ${id} already exists; fork_from creates a new run: pick another id, or leave id out`);
      const was = this.forkedFromOf(id);
      if (!was || was.runId !== fork.runId || was.step !== fork.step) {
        throw failedPrecondition(`run ${id} already exists and is not a fork of run ${fork.runId} at step ${fork.step}${was ? ` (it was forked from run ${was.runId} at step ${was.step})` : ''}; pick another id for the fork`);
      }
      return this.continueRun(id, req, config, null); // a restarted worker of a forked job continues its fork
    }
    if (exists && resume !== 'never') return this.continueRun(id, req, config, null);
    if (exists) throw alreadyExists(`run ${id} already exists; continue it with resume='allow' (or 'must'), attach to it with its handle, or pick another id`);
    if (resume === 'must') {
      throw notFound(this.shared
        ? `run ${id} is neither in this node's store (${this.store.dataDir}) nor in the shared store (${this.shared.where}); check the id (logd runs, logd runs --store URL), or use resume='allow' to create it when missing`
        : `run ${id} does not exist in ${this.store.dataDir}: it is not on this node, and no shared store is configured (LOGD_UPLOAD_URL, or logd serve --upload URL) to look for it there; run it where its data dir is or configure the store its node uploads to (resume='allow' creates it when missing)`);
    }
    if (fork && !this.store.exists(fork.runId)) {
      throw notFound(`fork_from: run ${fork.runId} does not exist in ${this.store.dataDir}; fork a run this node's store holds (logd runs lists them)`);
    }
    const meta: RunMeta = {
      id, project: req.project || 'default', name: req.name || id, group: req.group, jobType: req.jobType,
      tags: req.tags, notes: req.notes, mode: req.mode || 'online', createdAt: Date.now() / 1000,
      runToken: given?.runToken ?? randomBytes(18).toString('base64url'), ownerWriterId: given?.ownerWriterId ?? `w-${newId()}`,
      host: req.client?.host ?? '', pid: req.client?.pid ?? 0, rank: rankOf(req.client), config,
      ...(req.createKey ? { createKey: req.createKey } : {}),
      ...(fork ? { forkedFrom: { runId: fork.runId, step: fork.step } } : {}),
    };
    let run: LiveRun;
    try {
      if (fork) {
        const f = this.store.forkRun({ ...meta, forkedFrom: { runId: fork.runId, step: fork.step } });
        run = new LiveRun(f.meta, f.log, f.keys, f.summary, ownRecord(), ownRecord(f.config));
        for (const w of f.writers) run.restoreWriter(w, f.maxSeq[w.idx] ?? 0);
        this.log(`server: run ${id} forked from run ${fork.runId} at step ${fork.step} (${f.summary.rows} rows copied)`);
      } else {
        const log = this.store.createRun(meta);
        run = new LiveRun(meta, log, [], new RunSummary(), ownRecord(), ownRecord(config));
      }
    } catch (e) {
      if (e instanceof RunExistsError) throw alreadyExists(e.message);
      if (e instanceof ForkRefused) throw failedPrecondition(e.message);
      throw e;
    }
    // The owner is known from the start, so a process that dies before it
    // opens its stream still ends up `crashed`.
    run.addWriter(meta.ownerWriterId, meta.pid, meta.host, meta.rank);
    this.runs.set(id, run);
    this.adopt(run, req.sampleIntervalMs);
    this.touch();
    return run;
  }

  /**
   * Before createRun: init(resume='allow'|'must') of an id this node does not
   * have, with a shared store configured. When the store has the run (another
   * node logged it) and nobody holds it, this node's continuation log is
   * written and the store records this node as the run's uploader, in one
   * transaction (upload/continue.ts); createRun then continues it as a new
   * attempt like any final run here. A store that cannot be asked in time
   * fails a 'must' (UNAVAILABLE); an 'allow' goes on and creates the run here.
   */
  async continueFromStore(req: CreateRunInput): Promise<void> {
    const id = req.id;
    const resume = req.resume || 'never';
    if (!this.shared || !id || (resume !== 'allow' && resume !== 'must') || req.forkFrom || checkRunId(id) !== null) return;
    if (this.runs.has(id) || this.store.exists(id)) return;
    if (req.resumeFrom) {
      throw failedPrecondition(`run ${id} is not on this node; resume_from rewinds a run whose rows this node holds, and this node has none of run ${id}'s rows: rewind it on the node that logged it, or continue it here with resume='allow' (no rewind)`);
    }
    this.refuseWhileStopping();
    const t0 = Date.now();
    let got: 'claimed' | 'absent';
    let wrote = false;
    const materialize = async (s: StoredRun) => {
      const offset = await this.store.writeStoredRun(s);
      wrote = true;
      return offset;
    };
    try {
      got = await this.shared.claim(id, { host: req.client?.host ?? '', pid: req.client?.pid ?? 0 }, materialize);
    } catch (e) {
      if (e instanceof RunExistsError) return; // another CreateRun of this id here made it meanwhile: createRun decides
      if (wrote && !this.runs.has(id)) {
        // The claim wrote its continuation log and then did not commit (its deadline passed: a loaded machine, a slow
        // disk). Left here, that log would be continued by the next init() without the store's say, a second copy.
        this.store.removeUnanswered(id);
        this.log(`server: run ${id}: its claim in the shared store did not complete (${(e as Error).message}); the continuation log it wrote here is removed`);
      }
      if (!(e instanceof StoreContinueRefused)) throw e;
      if (e.kind !== 'unreachable') this.log(`server: run ${id} not taken from the shared store: ${e.message}`);
      if (e.kind === 'held') throw alreadyExists(e.message);
      if (e.kind === 'behind') throw unavailable(e.message);
      if (resume === 'must') throw unavailable(`run ${id} is not on this node, and the shared store (${this.shared.where}) could not be asked: ${e.message}; try again once the store answers`);
      this.log(`server: run ${id}: the shared store could not be asked whether it holds this run (${e.message}); created on this node as a new run (resume='allow')`);
      return;
    }
    if (got === 'claimed') this.log(`server: run ${id} taken from the shared store (${this.shared.where}) in ${Date.now() - t0} ms, to be continued on this node`);
  }

  /** The run a stored run was forked from (its metadata), or null. */
  private forkedFromOf(id: string): StepRef | null {
    const live = this.runs.get(id);
    if (live) return live.meta.forkedFrom ?? null;
    const row = this.store.index.get(id);
    try {
      return (JSON.parse(row?.metadata_json || '{}') as { forkedFrom?: StepRef }).forkedFrom ?? null;
    } catch {
      return null;
    }
  }

  /** init(resume='allow'|'must') of an existing run: a new attempt, or a refusal that names who holds it. */
  private continueRun(id: string, req: CreateRunInput, config: Record<string, unknown>, resumeFrom: number | null): LiveRun {
    const open = this.runs.get(id);
    if (open && !open.final) {
      throw alreadyExists(`run ${id} is still running, held by pid ${open.meta.pid} on ${open.meta.host || 'an unknown host'}; it can be continued once that process has ended (or attach to it with its handle)`);
    }
    if (open) throw unavailable(`run ${id} is being finalised; try again in a moment`);
    const owner = { host: req.client?.host ?? '', pid: req.client?.pid ?? 0, rank: rankOf(req.client), runToken: randomBytes(18).toString('base64url'), ownerWriterId: `w-${newId()}` };
    let run: LiveRun | null;
    try {
      run = continueFinalRun(this.store, id, owner, config, resumeFrom);
    } catch (e) {
      if (e instanceof RewindRefused) throw failedPrecondition((e as Error).message);
      throw failedPrecondition(`run ${id} cannot be continued: ${(e as Error).message}`);
    }
    if (!run) throw failedPrecondition(`run ${id} is open in this node's store but not on this daemon (a daemon stop left it waiting for its writers); try again once it is final`);
    if (req.createKey) run.attemptKey = req.createKey;
    this.continued.add(id);
    run.addWriter(owner.ownerWriterId, owner.pid, owner.host, owner.rank);
    this.runs.set(id, run);
    this.adopt(run, req.sampleIntervalMs);
    this.touch();
    const prev = run.attempts[run.attempts.length - 2];
    const rewound = resumeFrom !== null ? `, rewound to step ${resumeFrom} (${run.supersededRows} rows of earlier attempts superseded)` : '';
    const from = run.log.checkpoint ? `; its log read on from the checkpoint at offset ${run.log.checkpoint.offset}` : '';
    this.log(`server: run ${id} continued as attempt ${run.attempts.length} by pid ${owner.pid} on ${owner.host} from step ${run.summary.lastStep + 1}${rewound} (it was ${prev?.state ?? 'final'})${from}`);
    return run;
  }

  /**
   * A run whose every CreateRun was cancelled by its caller (a deadline
   * passed) before any answer went out: nobody holds its token and nobody
   * knows its id, so it is removed rather than left as a phantom.
   */
  abandon(run: LiveRun, why = 'its creator gave up (CreateRun cancelled) before it was told of the run'): void {
    if (run.createsInFlight > 0 || run.createAnswered || this.runs.get(run.id) !== run) return;
    // Its finalisation may be under way (its process exited as the create was cancelled): finaliser.ts looks
    // again after each wait and leaves a run that is no longer here.
    this.runs.delete(run.id);
    if (run.crashTimer) clearTimeout(run.crashTimer);
    run.log.close();
    fs.rmSync(path.dirname(this.store.logPath(run.id)), { recursive: true, force: true });
    this.store.index.remove(run.id);
    this.system?.reconcile(this.localWriterPids());
    this.log(`server: run ${run.id} removed: ${why}`);
  }

  private refuseWhileStopping(): void {
    if (this.stopping) throw unavailable(`the daemon is stopping (${this.stopping}); try again: the next daemon takes over`);
  }

  /**
   * A live run, checked against its token. A run killed by a daemon stop is
   * resumed here when `writerId` is its owner's or its owner still lives.
   */
  authorizedRun(runId: string, runToken: string, writerId = ''): LiveRun {
    this.refuseWhileStopping();
    let run = this.runs.get(runId);
    if (!run && checkRunId(runId) === null && this.store.exists(runId)) run = this.resumeKilled(runId, runToken, writerId) ?? undefined;
    if (!run) {
      if (checkRunId(runId) === null && this.store.exists(runId)) {
        const row = this.store.index.get(runId);
        throw failedPrecondition(`run ${runId} is ${row?.state ?? 'final'}; it takes no more records (continue it as a new attempt: init with its id and resume 'allow')`);
      }
      throw notFound(`run ${JSON.stringify(runId.slice(0, 80))} does not exist on this daemon (data dir ${this.store.dataDir})`);
    }
    if (!sameSecret(runToken, run.meta.runToken)) throw denied(`wrong run token for run ${runId}; use the handle from run.handle()`);
    return run;
  }

  /**
   * A writer id given here makes the writer attached at once, watched by pid
   * like any other: a process that attaches and exits before its stream ever
   * opened (its records in a spill file) is then still one the owner's finish
   * waits for, and its spill is ingested when its process is gone.
   */
  attach(runId: string, runToken: string, writerId = '', client: ClientInfo | null = null): LiveRun {
    const run = this.authorizedRun(runId, runToken, writerId);
    if (run.final || run.state === 'finishing') throw failedPrecondition(`run ${runId} is ${run.state}; it takes no more writers`);
    if (writerId) {
      if (!/^[A-Za-z0-9_-]{1,64}$/.test(writerId)) throw invalid('writer_id must be 1-64 characters of A-Z a-z 0-9 _ -');
      const w = run.writers.get(writerId) ?? run.addWriter(writerId, client?.pid ?? 0, client?.host ?? '', rankOf(client));
      w.detached = false;
      w.lastSeen = Date.now();
    }
    this.touch();
    return run;
  }

  // ---- writers ----

  openWriter(call: WriteCall, open: OpenWriterMsg): { run: LiveRun; writer: Writer } {
    const run = this.authorizedRun(open.runId, open.runToken, open.writerId);
    if (run.final) throw failedPrecondition(`run ${run.id} is ${run.state}; it takes no more records`);
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(open.writerId)) throw invalid('writer_id must be 1-64 characters of A-Z a-z 0-9 _ -');
    // The names a reconnecting writer already uses go into the run's
    // dictionary as they are, so they pass the same check as new_keys.
    const badKey = open.keys.map(checkKey).find(Boolean);
    if (badKey) throw invalid(`open: ${badKey}`);
    let w = run.writers.get(open.writerId);
    if (!w) {
      if (run.state === 'finishing') throw failedPrecondition(`run ${run.id} is finishing; it takes no new writers`);
      w = run.addWriter(open.writerId, open.client?.pid ?? 0, open.client?.host ?? '', rankOf(open.client));
    }
    if (w.stream && w.stream !== call) {
      // A reconnect of the same writer: the old stream is dead or dying.
      w.stream.end();
    }
    w.stream = call;
    w.detached = false;
    w.lastSeen = Date.now();
    w.keyMap = run.intern(open.keys);
    this.system?.reconcile(this.localWriterPids());
    if (run.crashTimer && w.meta.writerId === run.meta.ownerWriterId) {
      clearTimeout(run.crashTimer);
      run.crashTimer = null;
    }
    this.touch();
    return { run, writer: w };
  }

  /** Handles one batch (runs/intake.ts); returns an error text when the batch is refused. */
  onBatch(run: LiveRun, w: Writer, b: RecordBatchMsg): string | null {
    return takeBatch(this, run, w, b);
  }

  // ---- the group commit (runs/commit.ts), as the rest of the daemon calls it ----

  scheduleCommit(): void {
    this.commits.schedule();
  }

  /** Resolves once every run's appended records are durable (or the deadline passes). */
  flushAll(deadlineMs: number, failFast = false): Promise<boolean> {
    return this.commits.flushAll(deadlineMs, failFast);
  }

  get storageProblem(): string | null {
    return this.commits.storageProblem;
  }

  notify(): void {
    this.commits.notify();
  }

  /** Called with each run's info once its final state is written (the composition root hands them on: alerts). */
  readonly finalListeners: Array<(info: RunInfo) => void> = [];
  /** run.alert() from training code (the composition root sets it when alerts are on): queued or why not. */
  userAlert: ((info: RunInfo, a: { title: string; text: string; level: string; id: string }) => { queued: boolean; message: string }) | null = null;
  /** The git facts of a writer's working directory (daemon/code, set by the composition root); null: not read. */
  gitFacts: ((cwd: string, withDiff: boolean) => Promise<Record<string, unknown> | null>) | null = null;
  /** A TypeScript trainer's installed packages, read from its working directory (daemon/code/packages.ts). */
  nodePackages: ((cwd: string) => Promise<string[] | null>) | null = null;

  waitFor(pred: () => boolean, timeoutMs: number): Promise<boolean> {
    return this.commits.waitFor(pred, timeoutMs);
  }

  /** A run became live here: it gets the node's system metrics. */
  adopt(run: LiveRun, sampleIntervalMs = 0): void {
    if (!this.system) return;
    run.system = this.system;
    run.sampleIntervalMs = sampleIntervalMs;
    const asked = this.openRuns().map((r) => r.sampleIntervalMs).filter((ms) => ms > 0);
    this.system.ensureRunning(Math.min(this.system.defaultIntervalMs, ...asked));
    // A sample as the run begins: a run shorter than the interval gets its start and its end, not two samples at
    // its end. After the answer to CreateRun, not before it.
    this.system.sampleSoon();
    this.system.reconcile(this.localWriterPids());
  }

  touch(): void {
    this.lastActivity = Date.now();
  }

  /** A crash journal that was refused, damaged or not deliverable: logged, kept for `logd status`, and in the run's metadata. */
  reportJournalProblem(line: string, run?: LiveRun): void {
    this.log(line);
    this.store.problems.noteJournal(line);
    if (run) run.journalProblems.push(line);
  }

  /** A run a daemon stop left `killed`, reopened and taken in again when its owner is back (runs/resume.ts). */
  private resumeKilled(id: string, runToken: string, writerId: string): LiveRun | null {
    const reopened = reopenKilledRun(this.store, id, runToken, writerId);
    if (!reopened) return null;
    const { run, why } = reopened;
    this.runs.set(id, run);
    this.adopt(run);
    this.store.index.upsert(rowFromLive(run));
    this.scheduleCommit();
    this.log(`finaliser: run ${id} resumed (${why})`);
    return run;
  }

  /** A process spoke (a call, a keep-alive): its writers in open runs are alive. */
  heardFrom(host: string, pid: number): void {
    const now = Date.now();
    for (const run of this.runs.values()) {
      if (run.final) continue;
      for (const w of run.writers.values()) if (w.meta.pid === pid && w.meta.host === host) w.lastSeen = now;
    }
  }

  /** The local processes that write to open runs: the ones the sampler watches. */
  localWriterPids(): Set<number> {
    const pids = new Set<number>();
    for (const run of this.runs.values()) {
      if (run.final) continue;
      for (const w of run.writers.values()) if (!w.detached && w.local && w.meta.pid > 0) pids.add(w.meta.pid);
    }
    return pids;
  }

  openRuns(): LiveRun[] {
    return [...this.runs.values()].filter((r) => !FINAL_STATES.includes(r.state));
  }
}

