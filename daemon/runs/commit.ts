// The group commit: one fsync round for every batch appended meanwhile,
// over all runs (store.commit), then each writer's stream is acknowledged up
// to the batch its frames made durable. A round that fails (a full disk)
// keeps the records in memory, tells the writers, and is tried again; the
// backpressure bounds widen meanwhile (runs/backpressure.ts). Also the
// daemon's waits with deadlines, which each round wakes.
import type { Store } from '../store/store.js';
import type { LiveRun, Writer } from './run.js';
import type { Backpressure } from './backpressure.js';
import { rowFromLive } from './index-rows.js';

/** What a run's log is told for each appended batch: that writer's seq is durable with these frames. */
export interface BatchMark { w: Writer; seq: number; bytes: number }

/** Acknowledges `seq` on the writer's stream, if it still has one that takes messages. */
export function ack(w: Writer, seq: number): void {
  if (w.stream && !w.stream.cancelled && !w.stream.writableEnded) w.stream.write({ ack: { seq } });
}

export class GroupCommit {
  private committing = false;
  private commitAgain = false;
  private storageError: string | null = null;
  /** Commit rounds that failed, ever (flushAll's failFast watches it move). */
  private failedRounds = 0;
  private retryTimer: NodeJS.Timeout | null = null;
  private waiters = new Set<() => void>();

  constructor(
    private readonly runs: Map<string, LiveRun>,
    private readonly store: Store,
    private readonly backpressure: Backpressure,
    private readonly log: (line: string) => void,
  ) {}

  schedule(): void {
    if (this.committing) {
      this.commitAgain = true;
      return;
    }
    this.committing = true;
    setImmediate(() => void this.round());
  }

  private async round(): Promise<void> {
    const dirty = [...this.runs.values()].filter((r) => r.log.dirty);
    let failure: unknown = null;
    try {
      await this.store.commit(dirty.map((r) => r.log));
    } catch (e) {
      failure = e;
    }
    // Batches are acknowledged as their frames become durable: after a failed
    // round (a full disk) too, for what fitted before the failure.
    const acked = new Set<Writer>();
    for (const run of this.runs.values()) {
      for (const { w, seq, bytes } of run.log.takeDurable() as BatchMark[]) {
        this.backpressure.durable(w, bytes);
        if (seq > w.durableSeq) {
          w.durableSeq = seq;
          ack(w, seq);
          acked.add(w);
        }
      }
      if (run.finalNotDurable && run.log.waitingBytes === 0 && !run.log.closed) {
        // Finalised while the disk was full: its final state is durable now.
        try {
          this.store.index.upsert(rowFromLive(run));
          run.log.close();
          this.runs.delete(run.id);
          this.log(`writer: run ${run.id}: its last records and final state (${run.state}) are stored now`);
        } catch {
          /* the index is still full: next round */
        }
      }
    }
    this.backpressure.setDiskProblem(failure !== null);
    this.backpressure.release();
    try {
      if (failure === null) {
        if (this.storageError) {
          this.log(`writer: storage works again; ${dirty.length} run(s) flushed`);
          this.storageError = null;
        }
        return;
      }
      this.failedRounds++;
      const msg = `cannot write to ${this.store.dataDir}: ${(failure as Error).message}; records are kept in memory and retried (free space or fix permissions)`;
      // A client clears its problem on an ack, so a writer acked for the part
      // that fitted is told again that the rest still waits.
      const changed = this.storageError !== msg;
      if (changed) this.log(`writer: ${msg}`);
      for (const run of dirty) {
        for (const w of run.writers.values()) if (changed || acked.has(w)) w.stream?.write({ control: { kind: 'storage', seq: 0, message: msg } });
      }
      this.storageError = msg;
      this.retryTimer ??= setTimeout(() => {
        this.retryTimer = null;
        this.schedule();
      }, 500);
    } finally {
      this.committing = false;
      this.notify();
      if (this.commitAgain) {
        this.commitAgain = false;
        this.schedule();
      }
    }
  }

  /**
   * Resolves once every run's appended records are durable (or the deadline passes). `failFast`: false as soon
   * as a commit round fails (a full disk), for a caller that must answer now rather than wait for space.
   */
  async flushAll(deadlineMs: number, failFast = false): Promise<boolean> {
    const failedBefore = this.failedRounds;
    this.schedule();
    let failed = false;
    const durable = await this.waitFor(() => {
      if (failFast && this.failedRounds > failedBefore) return (failed = true);
      return !this.committing && [...this.runs.values()].every((r) => !r.log.dirty);
    }, deadlineMs);
    return durable && !failed;
  }

  get storageProblem(): string | null {
    return this.storageError;
  }

  // ---- waiting with deadlines (any change the daemon makes calls notify()) ----

  notify(): void {
    for (const w of [...this.waiters]) w();
  }

  waitFor(pred: () => boolean, timeoutMs: number): Promise<boolean> {
    if (pred()) return Promise.resolve(true);
    return new Promise((resolve) => {
      const check = () => {
        if (pred()) done(true);
      };
      const timer = setTimeout(() => done(false), timeoutMs);
      const poll = setInterval(check, 100);
      const done = (v: boolean) => {
        clearTimeout(timer);
        clearInterval(poll);
        this.waiters.delete(check);
        resolve(v);
      };
      this.waiters.add(check);
    });
  }
}
