// One writer's records on their way to the daemon. log() appends to the open
// batch (client/open-batch.ts) and returns; batches are sealed (encoded once)
// and kept (client/backlog.ts) until the daemon acknowledges them, re-sent
// after a reconnect (the daemon drops duplicates by seq), and written to a
// spill file if the process ends first. The stream itself (opening, sending,
// reconnecting) is client/stream.ts; what its answers mean is decided here.
import path from 'node:path';
import os from 'node:os';
import type { WriteResponseMsg, ServiceAddress, ClientInfo } from '../src/wire.js';
import { writeSpillFile, spillFallback, SpillError } from './spill-file.js';
import { spillFileName, deferredSpillFileName, type SpillHeader, type DeferredCreate } from '../src/spill.js';
import { OpenBatch, type Unsealed } from './open-batch.js';
import type { Connection } from './connection.js';
import { Backlog } from './backlog.js';
import { WriterStream, type StreamHost } from './stream.js';
import { Journal } from './journal.js';
import { registerStacks } from './stacks.js';

export { SpillError };

export interface WriterOptions {
  address: ServiceAddress;
  runId: string;
  runToken: string;
  writerId: string;
  client: ClientInfo;
  flushIntervalMs: number;
  maxBufferBytes: number;
  warn: (msg: string) => void;
  /**
   * Where spill and overflow files go: the spool of the daemon that owns the
   * run, as it said in its answer (not this process's own LOGD_DIR, which
   * another HOME or a scrubbed environment makes a different place).
   */
  spoolDir: string;
  /** The crash journal's size (LOGD_JOURNAL_MB); 0: none. */
  journalMb?: number;
  /**
   * A deferred run (no usable daemon at init()): nothing is sent until
   * undefer() names the daemon that created it; a spill carries this
   * request, so the daemon that ingests it creates the run.
   */
  deferred?: DeferredCreate | null;
}

export class BatchWriter {
  /** log()'s rows, columnar, until they are sealed into a batch. */
  readonly batch = new OpenBatch();
  // sealed, not yet acknowledged
  private seq = 0;
  /** Sealed and not yet acknowledged: in memory, then in the overflow file (client/backlog.ts). */
  private readonly backlog: Backlog;
  ackedSeq = 0;
  /** The stream to the daemon (client/stream.ts). */
  private readonly stream: WriterStream;
  private flushTimer: NodeJS.Timeout | null = null;
  private ackWaiters: Array<() => void> = [];
  closed = false;
  runFinal: string | null = null;
  lastProblem: string | null = null;
  /** Rows dropped because memory and disk were both full (sent to the daemon with every batch), and the count last sealed. */
  droppedRows = 0;
  private droppedSealed = 0;
  /** What dropping said last; stays once rows were dropped (run.problem falls back to it). */
  dropNote: string | null = null;
  /** The "records wait on disk" warning went out; again only once the overflow drained. */
  private bufferWarned = false;

  /** Every row not yet acknowledged, in a mapped file that outlives this process (client/journal.ts). */
  private journal: Journal | null;
  /** Why there is no journal, or what it could not hold (run.problem falls back to it). */
  journalNote: string | null = null;

  constructor(private o: WriterOptions) {
    // A deferred run has no daemon to connect to yet (undefer() makes the connection).
    this.stream = new WriterStream(this.streamHost(), o.deferred ? null : o.address);
    this.backlog = new Backlog(path.join(o.spoolDir, `${o.runId}--${o.writerId}.overflow`), o.maxBufferBytes);
    this.journal = null;
    if (!o.deferred) {
      this.openJournal();
      registerStacks(o.spoolDir); // the daemon may ask for this process's stacks when its group stalls
    }
  }

  /** What the stream asks of this writer, and what it tells it. */
  private streamHost(): StreamHost {
    return {
      openRequest: () => ({ runId: this.o.runId, runToken: this.o.runToken, writerId: this.o.writerId, client: this.o.client, keys: this.batch.sealedKeys() }),
      batches: () => this.backlog.batches,
      idle: () => this.backlog.empty && this.batch.rowCount === 0,
      nothingToSend: () => this.backlog.batches.length === 0 && this.batch.rowCount === 0,
      done: () => !!this.runFinal || (this.closed && this.backlog.batches.length === 0),
      final: () => !!this.runFinal,
      opened: (lastSeq) => {
        this.lastProblem = null;
        this.acked(lastSeq);
      },
      answer: (m) => this.onAnswer(m),
      refused: (why) => {
        this.runFinal = why;
        this.o.warn(`logd: run ${this.o.runId}: ${why}`);
        this.settleWaiters();
      },
      problem: () => this.lastProblem,
      setProblem: (p) => (this.lastProblem = p),
      warn: (msg) => this.o.warn(msg),
      who: () => ({ runId: this.o.runId, writerId: this.o.writerId }),
    };
  }

  private openJournal(): void {
    const j = Journal.open(this.o.spoolDir, { runId: this.o.runId, runToken: this.o.runToken, writerId: this.o.writerId }, this.o.journalMb ?? 0);
    this.journal = j.journal;
    this.journalNote = j.problem;
    this.batch.journal = j.journal;
  }

  /** Still waiting for a daemon to create the run (deferred)? */
  get deferred(): boolean {
    return !!this.o.deferred;
  }

  /**
   * A daemon created the deferred run: from now on this writer is its owner
   * there, and what waited goes out. The journal starts now (rows kept
   * before stay in memory or the overflow file until acknowledged).
   */
  undefer(address: ServiceAddress, runToken: string, writerId: string, spoolDir: string): void {
    if (!this.o.deferred) return;
    this.o.deferred = null;
    this.o.runToken = runToken;
    this.o.writerId = writerId;
    this.o.spoolDir = spoolDir;
    this.stream.use(address);
    this.openJournal();
    this.lastProblem = null;
    this.flush();
  }

  /** Rows log() accepted that did not fit the journal (the daemon was away long enough to fill it). */
  get notJournaled(): number {
    return this.journal?.notJournaled ?? 0;
  }

  get writerId(): string {
    return this.o.writerId;
  }

  /** The connection in use now (it changes when the daemon was restarted). */
  get connection(): Connection {
    return this.stream.connection as Connection;
  }

  get address(): ServiceAddress {
    return this.stream.connection?.address ?? this.o.address;
  }

  get lastSeq(): number {
    return this.seq;
  }

  get pendingRows(): number {
    return this.batch.rowCount;
  }

  /** Appends one row. Synchronous; never touches the network. */
  add(data: Record<string, unknown>, step: number, time: number): void {
    if (this.closed) throw new Error(`logd: run ${this.o.runId} is finished; log() after finish() is not stored`);
    this.batch.add(data, step, time);
    if (this.batch.full) this.flush();
    else if (this.flushTimer === null) this.armFlush();
  }

  summary(obj: Record<string, unknown>): void {
    this.batch.summary(obj);
    if (this.flushTimer === null) this.armFlush();
  }

  config(obj: Record<string, unknown>): void {
    this.batch.config(obj);
    if (this.flushTimer === null) this.armFlush();
  }

  /** Console output of this process (client/console-capture.ts): rides with the next batch; nothing after close. */
  console(entryJson: string, chars: number): void {
    if (this.closed) return;
    this.batch.console(entryJson, chars);
    if (this.flushTimer === null) this.armFlush();
  }

  /** Console characters in the open batch (the capture bounds them per flush interval). */
  get consoleChars(): number {
    return this.batch.consoleChars;
  }

  private armFlush(): void {
    this.flushTimer = setTimeout(() => {
      this.flushTimer = null;
      this.flush();
    }, this.o.flushIntervalMs);
    this.flushTimer.unref();
  }

  /** The stream to the daemon opens (again) if it is not open: what waits goes out. */
  ensureStream(): void {
    if (!this.o.deferred) this.stream.ensure();
  }

  /** The daemon said (FinishRun answered) that every record up to `seq` is durable: as good as its acknowledgement. */
  durableUpTo(seq: number): void {
    this.acked(seq);
  }

  /** Seals the open batch and sends what can be sent. */
  flush(): void {
    if (this.flushTimer) {
      clearTimeout(this.flushTimer);
      this.flushTimer = null;
    }
    this.seal();
    this.pump();
  }

  private seal(): void {
    if (!this.batch.hasContent && this.droppedSealed === this.droppedRows) return;
    const seq = ++this.seq;
    const { bytes, rows, taken } = this.batch.seal(seq, this.droppedRows);
    const droppedBefore = this.droppedSealed;
    this.droppedSealed = this.droppedRows;
    if (this.backlog.wouldOverflow(bytes.byteLength)) {
      if (this.backlog.onDisk === 0 && !this.bufferWarned) {
        this.bufferWarned = true;
        this.lastProblem = `buffer: ${(this.backlog.bytes / 1048576).toFixed(0)} MB not yet acknowledged by the daemon`;
        this.o.warn(`logd: run ${this.o.runId}: ${this.lastProblem}; further records wait on disk until it catches up (the daemon is stopped or slow, or this process has not yielded to its event loop for a while)`);
      }
      const failed = this.backlog.keepOnDisk({ seq, bytes });
      this.journal?.seal(seq, failed !== null);
      if (failed) this.drop(seq, rows, taken, droppedBefore, failed);
      else this.noteJournalFull();
      return;
    }
    this.journal?.seal(seq);
    this.backlog.keep({ seq, bytes });
    this.checkJournal();
  }

  /**
   * A journal whose file was truncated under it (its stores no longer reach any file) is given up, said once:
   * rows stay in this process's memory and spool until the daemon acknowledges them, as without a journal.
   */
  private checkJournal(): void {
    if (!this.journal?.lost()) return;
    const file = this.journal.file;
    this.journal.close(true);
    this.journal = null;
    this.batch.journal = null;
    this.journalNote = `crash journal lost: ${file} was truncated by another process; logging goes on without a journal (rows wait for the daemon in this process's memory and spool, and those of the last flush interval are lost if it is killed)`;
    this.o.warn(`logd: run ${this.o.runId}: ${this.journalNote}`);
  }

  /** Says once that rows outgrew the journal: they are safe from a daemon restart, not from a kill of this process. */
  private noteJournalFull(): void {
    const n = this.notJournaled;
    if (n === 0 || this.journalNote !== null) return;
    this.journalNote = `crash journal full (LOGD_JOURNAL_MB): ${n}+ rows wait for the daemon only in this process's memory and spool, and are lost if it is killed before the daemon takes them`;
    this.o.warn(`logd: run ${this.o.runId}: ${this.journalNote}`);
  }

  /**
   * Memory is at its bound and the spool cannot take the batch (a full
   * disk): its rows are dropped, counted exactly, and the count goes to the
   * daemon with the next batch (it lands in the run's metadata). Logging
   * never throws an I/O error into training. The batch's dictionary entries
   * are sealed again with the next batch, so later rows stay readable.
   */
  private drop(seq: number, rows: number, taken: Unsealed, droppedBefore: number, why: Error): void {
    this.seq = seq - 1; // the seq is reused: the daemon never sees a gap
    this.batch.unseal(taken); // only rows are dropped
    this.droppedSealed = droppedBefore;
    if (rows === 0) return;
    const first = this.droppedRows === 0;
    this.droppedRows += rows;
    this.lastProblem = this.dropNote = `${this.droppedRows} rows dropped: ${(this.backlog.bytes / 1048576).toFixed(0)} MB wait for the daemon (LOGD_MAX_BUFFER_MB) and the spool cannot hold more (${(why as NodeJS.ErrnoException).code ?? why.message}); the count is recorded in the run's metadata (droppedRows)`;
    if (first) this.o.warn(`logd: run ${this.o.runId}: ${this.lastProblem}. Free disk space under ${path.dirname(this.backlog.overflowFile)}, or raise LOGD_MAX_BUFFER_MB; further drops are counted without more warnings`);
  }

  // ---- the stream's answers ----

  private pump(): void {
    if (this.runFinal || this.o.deferred) return;
    this.stream.pump();
  }

  /** An ack or a control message from the daemon. */
  private onAnswer(m: WriteResponseMsg): void {
    if (m.ack) {
      // An ack means the daemon stores again: a storage problem it reported is over.
      if (this.backlog.onDisk === 0) this.lastProblem = null;
      this.acked(m.ack.seq);
      this.stream.touched();
    } else if (m.control) {
      const c = m.control;
      if (c.kind === 'rejected') {
        this.o.warn(`logd: run ${this.o.runId}: ${c.message}`);
        this.dropSeq(c.seq);
      } else if (c.kind === 'run_final') {
        this.runFinal = c.message;
        this.settleWaiters();
      } else if (c.kind === 'storage') {
        if (this.lastProblem !== c.message) this.o.warn(`logd: daemon: ${c.message}`);
        this.lastProblem = c.message;
      }
    }
  }

  private acked(seq: number): void {
    if (seq > this.ackedSeq) this.ackedSeq = seq;
    const fromDisk = this.backlog.onDisk > 0;
    const n = this.backlog.acked(seq); // brings batches back from disk as memory frees
    this.journal?.acked(this.ackedSeq);
    if (n > 0) {
      this.stream.shifted(n);
      if (fromDisk) this.pump();
      else if (this.backlog.bytes <= this.o.maxBufferBytes / 2) this.bufferWarned = false;
    }
    this.settleWaiters();
  }

  private dropSeq(seq: number): void {
    this.stream.removedAt(this.backlog.remove(seq));
    if (seq > this.ackedSeq && this.backlog.allAfter(seq)) this.ackedSeq = seq;
    this.journal?.acked(this.ackedSeq);
    this.settleWaiters();
  }

  /**
   * Looks for the daemon again, which may have been restarted (a new token)
   * or replaced by a sidecar, and uses it from now on. False when none was
   * found: the old address is kept and the caller tries again later.
   */
  rediscover(): Promise<boolean> {
    return this.stream.rediscover();
  }

  /** The last stream events, oldest first, for a message that says why rows did not reach the daemon. */
  get streamHistory(): string {
    return this.stream.history;
  }

  // ---- waiting for acknowledgements, with a deadline ----

  private settleWaiters(): void {
    const w = this.ackWaiters;
    this.ackWaiters = [];
    for (const f of w) f();
  }

  /** Resolves true once everything sealed so far is acknowledged, false at the deadline. */
  async waitAcked(timeoutMs: number): Promise<boolean> {
    this.flush();
    if (this.o.deferred) return false; // no daemon created the run yet: nothing can be acknowledged
    const target = this.seq;
    const deadline = Date.now() + timeoutMs;
    while (this.ackedSeq < target && !this.runFinal) {
      const left = deadline - Date.now();
      if (left <= 0) return false;
      this.stream.ensure();
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(left, 250));
        this.ackWaiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
    return this.ackedSeq >= target;
  }

  close(): void {
    this.closed = true;
    const delivered = this.backlog.empty && this.batch.rowCount === 0;
    if (this.backlog.batches.length === 0) this.backlog.clearDisk();
    // Everything acknowledged: the journal goes. Otherwise it stays for the daemon, which reads it once this process is gone.
    if (delivered) this.journal?.close(true);
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = null;
    this.stream.close();
  }

  /**
   * Writes everything not yet acknowledged to a spill file, synchronously (for
   * process exit). `exitCode` non-null asks the daemon to finish the run with it.
   */
  spill(exitCode: number | null, exception: SpillHeader['exception'] = null): string | null {
    this.seal();
    const pending = this.backlog.takeAll();
    if (pending.length === 0 && exitCode === null) {
      this.journal?.close(true); // everything was acknowledged
      return null;
    }
    const header: SpillHeader = {
      runId: this.o.runId, runToken: this.o.runToken, writerId: this.o.writerId, pid: process.pid, host: os.hostname(),
      keys: this.batch.keys, exitCode, ...(this.o.deferred ? { create: this.o.deferred } : {}), ...(exception && exitCode !== null ? { exception } : {}),
    };
    const name = (this.o.deferred ? deferredSpillFileName : spillFileName)(this.o.runId, this.o.writerId);
    let file: string;
    try {
      file = writeSpillFile(this.o.spoolDir, name, header, pending, this.droppedRows);
    } catch (e) {
      // A deferred run's spool (this process chose it, for its own data dir) is full or refuses files: the user's
      // private fallback for that data dir, which its daemon also reads (at start, and every few seconds while it
      // runs). A run a daemon created spills to that daemon's spool only: another user or HOME may own it.
      const other = this.o.deferred ? spillFallback(this.o.spoolDir) : null;
      if (!other) throw e;
      file = writeSpillFile(other, name, header, pending, this.droppedRows);
      this.o.warn(`logd: run ${this.o.runId}: ${(e as Error).message.replace(/ and are lost.*$/, '')}; written to ${file} instead, which the daemon of this data dir stores`);
    }
    this.backlog.clearDisk();
    this.journal?.close(true); // the spill file holds all of it now
    return file;
  }
}
