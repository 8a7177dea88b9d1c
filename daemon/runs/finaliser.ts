// Finaliser: finish, crash detection and shutdown. `finish` puts a run into
// `finishing`, waits (with a deadline) for its other writers to detach and for
// everything acknowledged to be durable, then writes the final summary and
// state. Final writes go through one queue in the order runs became ready.
// Nothing here waits without a deadline.
import { FrameType, jsonFrame, type FinalStateName } from '../store/format.js';
import { rowFromLive } from './index-rows.js';
import type { LiveRun, Writer } from './run.js';
import type { Registry } from './registry.js';
import { isAlive } from './liveness.js';
import { procState, endFromStatus, oomSince, OomWatch } from './process-end.js';
import { describeEnd, END_EXCEPTION_CHARS, signalName, type RunEnd } from '../../src/story/end.js';
import { ingestSpool, ingestRunSpool, ingestDeferredSpool, ingestDeferredOf, type FinaliseRun } from './spool.js';
import { ingestRunJournals, ingestWriterJournal } from './journal.js';
import { bytesSinceCheckpoint } from '../store/seal.js';
import { THREAD_READ_BYTES } from '../store/seal-read.js';

/** At a daemon stop, a run gets a new checkpoint only when it takes at most this much of its log to read (about 0.1 s). */
const STOP_CHECKPOINT_READ_BYTES = 64 * 1024 * 1024;
/**
 * At a finish, the most of a run's log read for its checkpoint (about 5 s of a thread, 30 M rows of 10 metrics;
 * store/seal-read.ts). A longer log gets no new checkpoint (a pointer to its last one, if any): continuing it
 * replays the log from there, as before checkpoints.
 */
const FINISH_CHECKPOINT_READ_BYTES = 4 * 1024 * 1024 * 1024;

export interface FinishOutcome {
  run: LiveRun;
  message: string;
  timedOut: boolean;
}

/** What the owner's client said of its process's end in FinishRun. */
export interface EndSaid {
  exceptionType?: string;
  exceptionMessage?: string;
  /** Seconds since the epoch; 0 or absent: now. */
  endedAt?: number;
}

/** How long a run whose owner is gone (its exit status collected by its parent) waits for the parent's ReportExit. */
const PARENT_REPORT_MS = 400;
/** The longest a run's end waits for the daemon's read of its code (daemon/code: git, 2 s per call at most). */
const ENVIRONMENT_WAIT_MS = 3000;
/** Sampling goes on this long after the last open run ended. */
const SAMPLER_IDLE_MS = 10_000;

/** What one look at /proc saw of each process (pid and start time), so that runs sharing a process read it once. */
type ProcLooks = Map<string, ReturnType<typeof procState>>;
function lookOnce(seen: ProcLooks, pid: number, startTime: number | null): ReturnType<typeof procState> {
  const key = `${pid}:${startTime}`;
  let st = seen.get(key);
  if (!st) seen.set(key, (st = procState(pid, startTime)));
  return st;
}

export class Finaliser {
  private queue: Promise<void> = Promise.resolve();
  /** Runs whose owner was seen gone without an exit status, and when: waiting PARENT_REPORT_MS for ReportExit. */
  private readonly goneSeen = new Map<string, number>();
  private liveness: NodeJS.Timeout;
  private exitWatch: NodeJS.Timeout | null = null;
  /** The kernel's OOM-kill count as the exit watch saw it (process-end.ts). */
  private readonly oomWatch = new OomWatch();

  constructor(private reg: Registry) {
    // Local writers are watched by pid: a process can close its stream while
    // idle (so it can exit) and still be attached.
    let ticks = 0;
    this.liveness = setInterval(() => {
      this.checkWriters();
      reg.system?.reconcile(reg.localWriterPids());
      // Deferred runs handed over while the daemon runs (`logd sync --ingest`), every 2 s.
      if (++ticks % 4 === 0) ingestDeferredSpool(reg, this.finaliseRun);
    }, 500);
    this.liveness.unref();
    // The exit watch (process-end.ts): the local writers' processes looked at every LOGD_EXIT_WATCH_MS, so that a
    // process that died is seen while the kernel still keeps its exit status, and its end time is close.
    const every = reg.tunables.exitWatchMs;
    if (every > 0) {
      this.exitWatch = setInterval(() => this.watchExits(), every);
      this.exitWatch.unref();
    }
  }

  stop(): void {
    clearInterval(this.liveness);
    if (this.exitWatch) clearInterval(this.exitWatch);
  }

  /** An end record of the run's owner (src/story/end.ts), with what the daemon knows of its last step and lines. */
  endRecord(run: LiveRun, w: Writer | undefined, part: Partial<RunEnd> & Pick<RunEnd, 'source'>): RunEnd {
    return {
      at: Date.now() / 1000, atWithinS: 0, pid: w?.meta.pid ?? run.meta.pid, host: w?.meta.host ?? run.meta.host, rank: run.meta.rank?.rank ?? null,
      exitCode: null, signal: null, lastStep: run.progress.lastStep, lastStepAt: run.progress.lastStepAt, lastLines: run.lastLines.get(), ...part,
    };
  }

  private watchExits(): void {
    let watched = false;
    // One read of /proc per process per look: many runs can share an owner (500 runs of one process took 2.4 s
    // of the daemon's CPU in a burst when each read its own).
    const seen: ProcLooks = new Map();
    for (const run of this.reg.runs.values()) {
      if (run.final || run.state !== 'running') continue;
      const owner = run.writers.get(run.meta.ownerWriterId);
      if (!owner || !owner.local || owner.meta.pid <= 0) continue;
      if (owner.detached && run.meta.ownerWriterId !== owner.meta.writerId) continue;
      watched = true;
      const st = lookOnce(seen, owner.meta.pid, owner.startTime);
      if (!st.alive) this.ownerDied(run, owner, st.status, this.reg.tunables.exitWatchMs / 1000);
    }
    if (watched) this.oomWatch.look(); // idle (no local owner): not read
  }

  /**
   * A local process's parent says how it ended (ReportExit, from `logd launch`): the runs it owned and left open
   * record it and end. A process still alive is not taken at its word (its runs go on); the signal must be one
   * Linux has.
   */
  exitReported(pid: number, exitCode: number, signal: string, endedAt: number): number {
    if (!(pid > 0)) return 0;
    const sig = /^SIG[A-Z0-9+]{2,12}$/.test(signal) ? signal : '';
    let n = 0;
    for (const run of this.reg.runs.values()) {
      if (run.final || run.state !== 'running' || run.pendingEnd) continue;
      const owner = run.writers.get(run.meta.ownerWriterId);
      if (!owner || !owner.local || owner.meta.pid !== pid || procState(pid, owner.startTime).alive) continue;
      const now = Date.now() / 1000;
      const at = endedAt > 0 && endedAt <= now + 1 && endedAt > now - 3600 ? endedAt : now;
      run.pendingEnd = this.endRecord(run, owner, {
        at, atWithinS: 0, source: 'parent', exitCode: sig ? null : exitCode, signal: sig || null,
        ...(sig === 'SIGKILL' ? { oom: oomSince(owner.oom, this.oomWatch) } : {}),
      });
      if (!run.pendingEnd.oom) delete run.pendingEnd.oom;
      this.writerGone(run, owner, '');
      n++;
    }
    return n;
  }

  /** The owner's process is gone: record how (its wait status, if the kernel still kept it), then deliver and finalise. */
  private ownerDied(run: LiveRun, w: Writer, status: number | null, withinS: number): void {
    if (run.pendingEnd || run.final) return;
    if (status === null) {
      // Gone, its exit status collected by its parent: `logd launch` reports it (ReportExit) right after; wait for
      // that a moment, then end the run with what is known.
      if (this.goneSeen.has(run.id)) return;
      const seenAt = Date.now() / 1000;
      this.goneSeen.set(run.id, seenAt);
      setTimeout(() => {
        this.goneSeen.delete(run.id);
        if (run.pendingEnd || run.final) return;
        // How is not known, but an OOM kill counted where this process's memory is (its cgroup, or the kernel's count
        // within OOM_WINDOW_MS) still says what ended it: under load the parent collects the status before a look.
        run.pendingEnd = this.endRecord(run, w, { at: seenAt, atWithinS: withinS, ...endFromStatus(null, oomSince(w.oom, this.oomWatch)) });
        this.writerGone(run, w, '');
      }, PARENT_REPORT_MS).unref();
      return;
    }
    run.pendingEnd = this.endRecord(run, w, { atWithinS: withinS, ...endFromStatus(status, oomSince(w.oom, this.oomWatch)) });
    this.writerGone(run, w, '');
  }

  /** The owner's finish finalises the run; anyone else's detaches that writer. */
  async finish(run: LiveRun, writerId: string, exitCode: number, timeoutMs: number, lastSeq: number, said: EndSaid = {}): Promise<FinishOutcome> {
    const reg = this.reg;
    const w = run.writers.get(writerId);
    const deadline = Date.now() + timeoutMs;
    if (run.final) return { run, message: `run ${run.id} was already ${run.state}`, timedOut: false };
    let waiting = '';
    if (w && lastSeq > 0) {
      const durable = await reg.waitFor(() => w.durableSeq >= lastSeq, Math.max(0, deadline - Date.now()));
      if (!durable && !(w.appendedSeq >= lastSeq && reg.storageProblem)) {
        return { run, message: `finish: records up to seq ${lastSeq} of writer ${writerId} did not arrive within ${timeoutMs} ms (daemon has ${w.appendedSeq}); try finish again`, timedOut: true };
      }
      // Everything arrived but the disk is full: the finish goes on. The final
      // state is appended after the records, so both become durable together
      // once space is freed; until then the daemon keeps them in memory.
      if (!durable) waiting = `finish: ${run.log.waitingBytes} bytes of records (writer ${writerId} up to seq ${lastSeq}) arrived but are not stored yet: ${reg.storageProblem}; they and the final state are stored once space is freed`;
    }
    if (writerId !== run.meta.ownerWriterId) {
      if (w) w.detached = true;
      reg.notify();
      return { run, message: `writer ${writerId} detached; the run stays open until its owner finishes`, timedOut: false };
    }
    run.state = 'finishing';
    run.finishArrivedAt = Date.now();
    if (w) w.detached = true;
    const others = () => run.attachedWriters().filter((x) => x !== w);
    const allLeft = await reg.waitFor(() => others().length === 0, Math.max(0, deadline - Date.now()));
    let message = '';
    if (!allLeft) {
      const left = others().map((x) => `pid ${x.meta.pid} (writer ${x.meta.writerId})`).join(', ');
      message = `finish: gave up waiting after ${timeoutMs} ms for ${others().length} writer(s) still attached: ${left}; the run is finalised and their further records are refused`;
      reg.log(`finaliser: run ${run.id}: ${message}`);
    }
    // Whatever any writer of this run spilled (one that exited before its
    // stream opened, one the daemon never heard of) goes in before the end.
    ingestRunSpool(reg, this.finaliseRun, run.id);
    ingestRunJournals(reg, run.id); // writers that died before they finished: what their log() accepted
    const state: FinalStateName = exitCode === 0 ? 'finished' : 'crashed';
    const endedAt = said.endedAt && said.endedAt > 0 && Math.abs(said.endedAt - Date.now() / 1000) < 3600 ? said.endedAt : Date.now() / 1000;
    const exception = said.exceptionType ? { type: said.exceptionType.slice(0, 200), message: (said.exceptionMessage ?? '').slice(0, END_EXCEPTION_CHARS) } : undefined;
    const end = this.endRecord(run, w, { source: 'client', at: endedAt, exitCode, ...(exception ? { exception } : {}) });
    await this.finalise(run, state, exitCode === 0 ? '' : `its process ${describeEnd(end)}`, exitCode,
      // With a full disk the final state cannot be durable now: do not wait past the finish's deadline for it.
      { flushMs: reg.storageProblem ? Math.max(0, deadline - Date.now()) : reg.tunables.shutdownTimeoutMs, end });
    if (waiting) reg.log(`finaliser: run ${run.id}: ${waiting}`);
    return { run, message: [waiting, message].filter(Boolean).join('; '), timedOut: !allLeft || waiting !== '' };
  }

  /**
   * Writes the final state once; later calls are no-ops. Waits up to
   * `flushMs` for it to be durable; when the disk is full it is retried with
   * the run's other pending frames, and the run stays in memory until then.
   * `resumable`: a daemon stop, which the run's owner may come back from.
   */
  /** finalise() as the spool's callback: a run its owner's spill file ends. */
  /** A run this daemon does not have yet, made now from its deferred spill files if there are any (see spool.ts). */
  ingestDeferred(runId: string): number {
    return ingestDeferredOf(this.reg, this.finaliseRun, runId);
  }

  readonly finaliseRun: FinaliseRun = (run, state, reason, exitCode, exception) => {
    // The owner's spill says how it ended (its exit code; 128 + n from the client's handler of signal n) where the
    // kernel's status was already collected: that goes in its end record.
    const had = run.pendingEnd;
    if ((!had || had.source === 'gone') && exitCode >= 0) {
      const owner = run.writers.get(run.meta.ownerWriterId);
      const sig = exitCode > 128 && exitCode < 160 ? signalName(exitCode - 128) : null;
      run.pendingEnd = this.endRecord(run, owner, { ...(had ? { at: had.at, atWithinS: had.atWithinS } : {}), source: sig ? 'signal-handler' : 'client', exitCode: sig ? null : exitCode, signal: sig });
    }
    if (exception && run.pendingEnd && !run.pendingEnd.exception) {
      run.pendingEnd = { ...run.pendingEnd, exception: { type: exception.type, message: exception.message }, ...(exception.at > 0 && run.pendingEnd.source !== 'wait-status' ? { at: exception.at, atWithinS: 0 } : {}) };
    }
    void this.finalise(run, state, reason, exitCode);
  };

  finalise(run: LiveRun, state: FinalStateName, reason: string, exitCode: number, opts: { resumable?: boolean; flushMs?: number; end?: RunEnd } = {}): Promise<void> {
    const resumable = opts.resumable ?? false;
    const flushMs = opts.flushMs ?? this.reg.tunables.shutdownTimeoutMs;
    const step = async () => {
      if (run.final || this.reg.runs.get(run.id) !== run) return; // final already, or removed (Registry.abandon)
      if (run.crashTimer) clearTimeout(run.crashTimer);
      run.crashTimer = null;
      await this.reg.system?.sampleNow(); // the run's last system sample
      await run.environmentsSettled(ENVIRONMENT_WAIT_MS); // its code, when the daemon is still reading it (daemon/code)
      // Removed meanwhile (Registry.abandon: its creator gave up on the CreateRun before it was told of the run).
      if (run.final || this.reg.runs.get(run.id) !== run) return;
      run.state = state;
      run.reason = reason;
      run.exitCode = exitCode;
      run.finishedAt = Date.now() / 1000;
      const end = resumable ? null : (opts.end ?? run.pendingEnd ?? null);
      // Its last step and lines as of now: a dead writer's journal and spill went in after its end was read.
      run.end = end && { ...end, lastStep: Math.max(run.summary.lastStep, run.progress.lastStep), lastStepAt: run.progress.lastStepAt, lastLines: run.lastLines.get() };
      run.pendingEnd = null;
      run.log.append(FrameType.STATE, jsonFrame({ state, reason, exitCode, finishedAt: run.finishedAt, ...(resumable ? { resumable } : {}), ...(run.end ? { end: run.end } : {}) }));
      const durable = await this.reg.flushAll(flushMs);
      // Removed while its final state was written (Registry.abandon): the index must not bring it back.
      if (this.reg.runs.get(run.id) !== run) return;
      if (!durable) this.reg.log(`finaliser: run ${run.id}: the final state is not durable yet (${this.reg.storageProblem ?? 'slow disk'}); it is retried`);
      let indexed = true;
      try {
        this.reg.store.index.upsert(rowFromLive(run));
      } catch (e) {
        // The index is derived data (rebuilt from the logs); a full disk must not stop a finish.
        indexed = false;
        this.reg.log(`finaliser: run ${run.id}: cannot update the index (${(e as Error).message}); retried when storage works again`);
      }
      if (!resumable) {
        const info = run.info();
        for (const f of this.reg.finalListeners) {
          try {
            f(info);
          } catch (e) {
            this.reg.log(`finaliser: run ${run.id}: a listener failed: ${(e as Error).message}`);
          }
        }
      }
      for (const w of run.writers.values()) {
        w.detached = true;
        if (w.stream && !w.stream.cancelled && !w.stream.writableEnded) {
          if (resumable) {
            // Not the run's end: the writer keeps what is unacknowledged and
            // takes it to the next daemon, where the run goes on.
            w.stream.emit('error', { code: 14 /* UNAVAILABLE */, details: `the daemon is stopping (${reason}); run ${run.id} goes on with the next daemon` });
          } else {
            w.stream.write({ control: { kind: 'run_final', seq: w.durableSeq, message: `run ${run.id} is ${state}` } });
            w.stream.end();
          }
        }
        w.stream = null;
      }
      if (durable && indexed) {
        // The log gets its checkpoint as it closes (store/seal.ts). A long read for it goes to a thread, and the
        // finish does not wait for that: the final state is durable, and the owner is told. A new attempt of the run
        // waits for it (Store.sealed), as does a daemon stop, which reads less for it: every other open run waits.
        const threaded = !resumable && bytesSinceCheckpoint(run.log) > THREAD_READ_BYTES;
        this.reg.runs.delete(run.id);
        const closing = this.reg.store.closeLog(run.id, run.log, { maxReadBytes: resumable ? STOP_CHECKPOINT_READ_BYTES : FINISH_CHECKPOINT_READ_BYTES });
        if (!threaded) await closing;
        else this.reg.log(`finaliser: run ${run.id}: its checkpoint is read on a thread (${(bytesSinceCheckpoint(run.log) / 1048576).toFixed(0)} MB of log); a new attempt waits for it`);
      } else run.finalNotDurable = true; // the registry closes it once its commit succeeds
      this.reg.log(`finaliser: run ${run.id} ${state}${reason ? ` (${reason})` : ''}, ${run.summary.rows} rows`);
      this.reg.notify();
      // Sampling runs while runs are open, and a few seconds more (the next run of a sweep or a suite finds it
      // running); the finish is not held up by its stop.
      if (this.reg.openRuns().length === 0) this.reg.system?.stopWhenIdle(SAMPLER_IDLE_MS);
    };
    const p = this.queue.then(step, step);
    this.queue = p.catch((e) => this.reg.log(`finaliser: run ${run.id}: ${(e as Error).message}`));
    return p;
  }

  /** A writer's stream ended. `abrupt`: cancelled or broken rather than closed by the client. */
  streamEnded(run: LiveRun, w: Writer, abrupt: boolean): void {
    w.stream = null;
    w.lastSeen = Date.now();
    if (abrupt && !w.local) this.writerGone(run, w, 'its connection dropped');
    else if (abrupt) this.checkWriter(run, w, 0.05); // a process that died closes its stream as it ends
  }

  private checkWriters(): void {
    const seen: ProcLooks = new Map();
    for (const run of this.reg.runs.values()) {
      if (run.final) continue;
      for (const w of run.writers.values()) if (!w.detached && !w.stream) this.checkWriter(run, w, 0.5, seen);
      const owner = run.writers.get(run.meta.ownerWriterId);
      // An owner that never opened its stream (or never re-attached after a
      // daemon restart) is watched by pid too. The recovery grace is for
      // owners that may still come back: a local one whose process is gone
      // cannot, so it does not wait for the grace to run out.
      if (owner && owner.detached && run.state === 'running' && owner.local) {
        const st = lookOnce(seen, owner.meta.pid, owner.startTime);
        if (!st.alive) this.ownerDied(run, owner, st.status, 0.5);
      }
      // An owner on another host cannot be watched by pid: its client's keep-alive (a Hello every
      // LOGD_KEEPALIVE_MS, 15 s) and its calls and batches say it lives. Silence past the lease: it is gone.
      const lease = this.reg.tunables.ownerLeaseMs;
      if (owner && !owner.local && run.state === 'running' && lease > 0 && Date.now() - owner.lastSeen > lease) {
        const quiet = ((Date.now() - owner.lastSeen) / 1000).toFixed(1);
        void this.finalise(run, 'crashed', `lost contact: its owner on ${owner.meta.host} (pid ${owner.meta.pid}) sent nothing, not even a keep-alive, for ${quiet} s (LOGD_OWNER_LEASE_MS ${lease})`, -1);
      }
    }
  }

  private checkWriter(run: LiveRun, w: Writer, withinS = 0.5, seen: ProcLooks = new Map()): void {
    if (!w.local) return;
    if (w.meta.writerId === run.meta.ownerWriterId) {
      const st = lookOnce(seen, w.meta.pid, w.startTime);
      if (!st.alive) this.ownerDied(run, w, st.status, withinS);
    } else if (!isAlive(w.meta.pid, w.startTime)) this.writerGone(run, w, `its process ${w.meta.pid} exited`); // a zombie still counts: its journal is read once it is reaped (runs/journal.ts)
  }

  /** A writer's process is gone: deliver what it spilled, then detach it or crash the run. */
  writerGone(run: LiveRun, w: Writer, why: string): void {
    if (w.detached && w.meta.writerId !== run.meta.ownerWriterId) return;
    w.detached = true;
    // The owner gone: every spill of the run goes in, a deferred one too (its client gave up on a CreateRun that
    // completed here late: same run, its rows and its exit under another writer id; runs/spool.ts).
    const isOwner = w.meta.writerId === run.meta.ownerWriterId;
    const spilled = ingestSpool(this.reg, this.finaliseRun, run.id, w.meta.writerId);
    if (isOwner && !run.final && !spilled.finished && run.meta.createKey) {
      ingestRunSpool(this.reg, this.finaliseRun, run.id);
      spilled.finished = run.state !== 'running'; // a deferred spill's exit ended it
    }
    if (!run.final) ingestWriterJournal(this.reg, run.id, w.meta.writerId);
    this.reg.notify();
    if (run.final || spilled.finished) return;
    if (w.meta.writerId !== run.meta.ownerWriterId || run.state !== 'running') return;
    if (w.local) {
      const end = run.pendingEnd ?? this.endRecord(run, w, { source: 'gone', atWithinS: 0.5 });
      const code = end.exitCode ?? -1;
      const state: FinalStateName = end.exitCode === 0 ? 'finished' : 'crashed';
      void this.finalise(run, state, `its process ${w.meta.pid} ${describeEnd(end)} without calling finish()`, code, { end });
      return;
    }
    // A remote owner may come back: give it the grace period to re-attach.
    run.crashTimer ??= setTimeout(() => {
      run.crashTimer = null;
      if (!w.stream && run.state === 'running') void this.finalise(run, 'crashed', `owner ${why} and did not re-attach within ${this.reg.tunables.crashGraceMs} ms`, -1);
    }, this.reg.tunables.crashGraceMs);
  }

  /**
   * An owner that gave no pid cannot be watched by pid, so its stream is the
   * only sign of it: if it has not opened one within the recovery grace after
   * CreateRun, it died before it did, and the run is crashed instead of
   * staying `running` for ever. (logd's clients always give their pid; an
   * owner on another host is judged by its stream as before.)
   */
  armOwnerWithoutPid(run: LiveRun): void {
    if (run.meta.pid > 0 || run.crashTimer) return; // a retried create arms it once
    run.crashTimer = setTimeout(() => {
      run.crashTimer = null;
      const owner = run.writers.get(run.meta.ownerWriterId);
      if (run.state === 'running' && owner && !owner.stream) {
        void this.finalise(run, 'crashed', `its owner gave no pid and did not open its record stream within ${this.reg.tunables.recoveryGraceMs} ms of creating the run`, -1);
      }
    }, this.reg.tunables.recoveryGraceMs);
    run.crashTimer.unref();
  }

  /** After a daemon restart, runs that were open wait a while for their writers. */
  armRecoveryTimer(run: LiveRun): void {
    run.crashTimer = setTimeout(() => {
      run.crashTimer = null;
      const owner = run.writers.get(run.meta.ownerWriterId);
      if (run.state === 'running' && (!owner || owner.detached)) {
        const spilled = owner ? ingestSpool(this.reg, this.finaliseRun, run.id, owner.meta.writerId) : { finished: false };
        if (!run.final) ingestRunJournals(this.reg, run.id);
        if (!spilled.finished && !run.final) void this.finalise(run, 'crashed', `the daemon restarted and the owner did not re-attach within ${this.reg.tunables.recoveryGraceMs} ms`, -1);
      }
    }, this.reg.tunables.recoveryGraceMs);
    run.crashTimer.unref();
  }

  /**
   * Graceful stop: every open run becomes `killed` after its data is durable.
   * A run whose owner still lives is marked resumable: the owner's client
   * takes it to the next daemon (see resume.ts).
   */
  async killAll(reason: string): Promise<number> {
    const open = this.reg.openRuns();
    await Promise.all(open.map((r) => this.finalise(r, 'killed', reason, -1, { resumable: true })));
    // Runs finished just before: their checkpoints (a thread may be reading for one), within the stop's time.
    if (!(await this.reg.store.allSealed(this.reg.tunables.shutdownTimeoutMs))) this.reg.log('finaliser: a finished run\'s checkpoint was not written before the stop; its next replay reads more of its log');
    return open.length;
  }
}
