// The uploader stage: copies what is durable in this node's record logs into
// the shared store, run by run, slice by slice, and never blocks anything
// else in the daemon (it only reads the logs). While the store is unreachable
// or refuses us it backs off (500 ms doubling, capped at backoffMaxMs) and
// tries again, forever: nothing is dropped, the logs keep everything. An open
// run with nothing new still says it lives, and sends its health (live-news.ts).
import type { RunRow } from '../store/index-db.js';
import { PgSink, RunOfAnotherNode, type Cursor } from './pg-sink.js';
import { SliceEncoder } from './encoder.js';
import type { EncodedSlice } from './encode.js';
import { STREAM_HISTORY, STREAM_SYSTEM } from './pg-sink.js';
import { SYNC_REQUEST, type LocalRuns } from './local-runs.js';
import type { StoreUrl } from './url.js';
import { StoreContinueRefused, type StoredRun } from '../store/from-store.js';
import { writeStatus, type UploadStatus } from './status.js';
import { storeIdentity } from './store-identity.js';
import { LiveNews } from './live-news.js';
import { describeUploadError } from './errors.js';

const FINAL = ['finished', 'crashed', 'killed'];
/** Runs the store refused shown in the status (the log has every one). */
const MAX_LEFT_LOCAL_SHOWN = 20;

export interface UploaderOptions {
  url: StoreUrl;
  node: string;
  runs: LocalRuns;
  log: (line: string) => void;
  pollMs: number;
  backoffMaxMs: number;
  /** Log bytes per transaction: big enough for throughput, small enough to retry cheaply (default 32 MiB). */
  sliceBytes?: number;
  /** Where the status file goes (the daemon's data dir); null: none. */
  statusDir: string | null;
  /** Offline runs too (`logd sync`); otherwise only those with a sync request. */
  includeOffline?: boolean;
  /** Only these runs (`logd sync RUN…`). */
  only?: Set<string>;
  /** Apply missing migrations (the daemon does; `logd sync` too). */
  migrate?: boolean;
  /**
   * The share of wall time (0-1] the loop may spend uploading while there is a
   * backlog; it sleeps the rest, so a burst of ingest keeps the CPU and the
   * backlog drains in the pauses (default 1: `logd sync` runs flat out).
   */
  duty?: number;
  /** Encode slices on a worker thread (the daemon does, so that its main thread stays with the trainers). */
  encoderThread?: boolean;
  /** Continuing runs from the store (the daemon's SharedRuns): the longest a claim may take, and the takeover lease. */
  claim?: { deadlineMs: number; takeoverAfterMs: number };
  /**
   * Runs whose slices go up in one transaction (default 64; 1: one transaction per run). A node's ranks each have
   * a small slice every pass: one transaction for all of them costs one round trip per statement for the lot,
   * which is what a node far from the store, and a store taking a thousand ranks, pay for.
   */
  batchRuns?: number;
  /**
   * Merge a run's small chunks in the store (daemon/compaction/) when it ends, and every COMPACT_EVERY slices of
   * it while it runs (default true).
   */
  compact?: boolean;
}

/** A live run's small chunks are merged after this many of its slices went up (about a minute of passes). */
export const COMPACT_EVERY = 256;

interface Pending { since: number }

/** A run's next slice, encoded, with what the uploader knew when it read it. */
interface SliceWork { id: string; cur: Cursor; end: number; row: RunRow; slice: EncodedSlice }

/** Encoded bytes in one batch of runs' slices at most (one slice bigger than this goes alone). */
const BATCH_BYTES = 16 << 20;

const encodedBytes = (s: EncodedSlice): number =>
  (s.keys?.byteLength ?? 0) + (s.chunkRows?.byteLength ?? 0) + (s.values?.byteLength ?? 0) + (s.console?.byteLength ?? 0) + (s.media?.byteLength ?? 0) + s.images.reduce((n, i) => n + i.data.byteLength, 0);

export class Uploader {
  private sink: PgSink;
  private encoder: SliceEncoder;
  /** The store's cursors as last read and since moved by us; re-read after every failure. */
  private cursors = new Map<string, Cursor>();
  private cursorsFresh = false;
  private pending = new Map<string, Pending>();
  private refusedRuns = new Set<string>();
  private stopped = false;
  private loop: Promise<void> | null = null;
  private wake: (() => void) | null = null;
  private backoffMs = 0;
  private status: UploadStatus;
  private lastStatusWrite = 0;
  private failingSince = 0;
  /** Open runs' health and heartbeats. */
  private news: LiveNews;
  /** Slices of each run uploaded since its chunks were last merged. */
  private slicesSinceCompact = new Map<string, number>();
  /** Runs whose compaction failed and was said (once each). */
  private compactSaid = new Set<string>();

  constructor(private o: UploaderOptions) {
    this.sink = new PgSink(o.url, o.node, { migrate: o.migrate ?? true }, storeIdentity(o.runs.dataDir));
    this.encoder = new SliceEncoder(o.encoderThread ?? false, o.log);
    this.status = {
      pid: process.pid, node: o.node, target: o.url.shown, state: 'connecting', backlog: { runs: 0, rows: 0, bytes: 0 }, lagMs: 0,
      lastError: null, lastErrorAt: null, retryAt: null, uploadedRows: 0, uploadedPoints: 0, updatedAt: new Date().toISOString(),
    };
    this.news = new LiveNews({
      uploadRow: (row) => this.sink.uploadRow(row), isOpen: (id) => o.runs.isOpen?.(id) ?? false,
      refused: (id, e) => this.refuseRun(id, e), takeoverAfterMs: o.claim?.takeoverAfterMs ?? 3600_000,
    });
  }

  start(): void {
    this.o.log(`upload: uploading this node's runs (node "${this.o.node}") to ${this.o.url.shown}`);
    this.loop = this.run();
  }

  /** Stops after the transaction in flight (an unfinished one rolls back: the next daemon redoes it). */
  async stop(timeoutMs = 5000): Promise<void> {
    this.stopped = true;
    this.wake?.();
    if (this.loop) await Promise.race([this.loop, new Promise((r) => setTimeout(r, timeoutMs).unref())]);
    this.status.state = 'stopped';
    this.flushStatus(true);
    await this.sink.close();
    await this.encoder.close();
  }

  /** Whether anything durable locally is not in the store yet (as of the last pass). */
  get hasBacklog(): boolean {
    return this.status.backlog.runs > 0;
  }

  get current(): UploadStatus {
    return this.status;
  }

  private async run(): Promise<void> {
    const duty = this.o.duty ?? 1;
    while (!this.stopped) {
      let worked = false;
      const t0 = performance.now();
      try {
        worked = await this.pass();
        this.recovered();
      } catch (e) {
        this.failed(e);
        await this.sleep(this.backoffMs);
        continue;
      }
      if (!worked) await this.sleep(this.o.pollMs);
      else if (duty < 1) await this.sleep(((performance.now() - t0) * (1 - duty)) / duty);
    }
  }

  /** The store, for messages (no password). */
  get where(): string {
    return this.o.url.shown;
  }

  /**
   * SharedRuns.claim (store/from-store.ts): continues on this node a run the
   * store has from another node (continue.ts). The cursor it leaves is this
   * uploader's at once, so the new attempt's rows follow without a re-read.
   */
  async claim(id: string, owner: { host: string; pid: number }, materialize: (s: StoredRun) => Promise<number>): Promise<'claimed' | 'absent'> {
    const c = this.o.claim ?? { deadlineMs: 5000, takeoverAfterMs: 3600_000 };
    let got;
    try {
      got = await this.sink.continueRun(id, { node: this.o.node, owner, takeoverAfterMs: c.takeoverAfterMs, statementMs: c.deadlineMs }, c.deadlineMs, materialize);
    } catch (e) {
      if (e instanceof StoreContinueRefused) throw e;
      this.sink.reset();
      throw new StoreContinueRefused('unreachable', this.describe(e));
    }
    if (!got) return 'absent';
    this.refusedRuns.delete(id);
    this.cursors.set(id, { offset: got.offset, systemDone: true, done: false, rows: got.rows });
    this.o.log(`upload: run ${id} continued on this node from the shared store; its new rows go up from offset ${got.offset} of its log here`);
    this.wake?.();
    return 'claimed';
  }

  /** One look at every run; uploads one slice of each that has work. True when something was uploaded. */
  async pass(): Promise<boolean> {
    if (!this.cursorsFresh) {
      this.status.state = 'connecting';
      await this.sink.ready();
      this.cursors = await this.sink.cursors();
      this.cursorsFresh = true;
    }
    const cursors = this.cursors;
    let worked = false;
    this.measureBacklog();
    // Runs with new rows: their slices are encoded and go up together (uploadBatch), up to batchRuns runs or
    // BATCH_BYTES at a time.
    const most = Math.max(1, this.o.batchRuns ?? 64);
    let batch: SliceWork[] = [];
    let batchBytes = 0;
    const flush = async () => {
      if (!batch.length) return;
      const b = batch;
      batch = [];
      batchBytes = 0;
      if (await this.uploadBatch(b)) worked = true;
    };
    for (const { id, cur, end } of this.candidates()) {
      if (this.stopped) break;
      if (this.reopened.delete(id)) await this.sink.reopen(id);
      if (end > cur.offset) {
        const work = await this.encodeSlice(id, cur, end);
        if (!work) continue;
        const bytes = encodedBytes(work.slice);
        if (batch.length && (batch.length >= most || batchBytes + bytes > BATCH_BYTES)) await flush();
        batch.push(work);
        batchBytes += bytes;
        continue;
      }
      this.pending.delete(id);
      const row = this.o.runs.row(id);
      if (row && !FINAL.includes(row.state) && (await this.news.send(id, row))) worked = true;
      if (row && FINAL.includes(row.state)) {
        // The whole log is in: the final state shows, and the system metrics of the run's lifetime follow.
        try {
          const sysLog = this.o.runs.systemLog();
          await this.sink.uploadSystem(row, sysLog ? await this.encoder.encodeSystem({ systemLog: sysLog, row, stream: STREAM_SYSTEM }) : null);
        } catch (e) {
          if (!this.refuseRun(id, e)) throw e;
        }
        cur.systemDone = true;
        cur.done = true;
        cursors.set(id, cur);
        this.news.forget(id);
        worked = true;
        await this.compact(id);
      }
    }
    await flush();
    for (const [id, n] of this.slicesSinceCompact) if (n >= COMPACT_EVERY && !this.stopped) await this.compact(id, true);
    this.status.state = this.status.backlog.runs > 0 ? 'uploading' : 'idle';
    this.flushStatus(false);
    return worked;
  }

  /** Runs found open again after they were done: the store's cursor is told before their next slice. */
  private reopened = new Set<string>();

  /** Runs this uploader is meant to upload that are not done, with the cursor known for each and their durable end. */
  private *candidates(): Generator<{ id: string; cur: Cursor; end: number }> {
    for (const id of this.o.runs.ids()) {
      if (this.o.only && !this.o.only.has(id)) continue;
      if (this.refusedRuns.has(id)) continue;
      const cur = this.cursors.get(id) ?? { offset: 0, systemDone: false, done: false, rows: 0 };
      if (cur.done) {
        if (!this.o.runs.isOpen?.(id)) continue;
        cur.done = false; // continued (init(resume=...)) after it was uploaded whole: the new attempt follows
        this.reopened.add(id);
      }
      const mode = this.o.runs.mode(id);
      if (mode === null) continue;
      if (mode === 'offline' && !this.o.includeOffline && !this.o.runs.syncRequested(id)) continue;
      yield { id, cur, end: this.o.runs.durableBytes(id) };
    }
  }

  /** Backlog and lag from the local logs and the cursors as last known (also while the store is away). */
  private measureBacklog(): void {
    const now = Date.now();
    let runs = 0, rows = 0, bytes = 0;
    const seen = new Set<string>();
    for (const { id, cur, end } of this.candidates()) {
      runs++; // pending bytes, or a final state and system metrics still to send
      if (end <= cur.offset) continue;
      seen.add(id);
      if (!this.pending.has(id)) this.pending.set(id, { since: now });
      bytes += end - cur.offset;
      rows += Math.max(0, this.o.runs.historyRows(id) - cur.rows);
    }
    let lag = 0;
    for (const [id, p] of this.pending) {
      if (!seen.has(id)) this.pending.delete(id);
      else lag = Math.max(lag, now - p.since);
    }
    this.status.backlog = { runs, rows, bytes };
    this.status.lagMs = lag;
  }

  /** The run's next slice, read and encoded; null when there is none yet (the next frame is not whole). */
  private async encodeSlice(id: string, cur: Cursor, end: number): Promise<SliceWork | null> {
    const row = this.o.runs.row(id);
    if (!row) return null;
    const slice = await this.encoder.encode({
      file: this.o.runs.logFile(id), runId: id, stream: STREAM_HISTORY, from: cur.offset, to: end, maxBytes: this.o.sliceBytes ?? 32 * 1024 * 1024,
      offsetBase: this.o.runs.offsetBase(id),
    });
    if (slice.end === cur.offset) return null; // the next frame is not whole yet
    return { id, cur, end, row, slice };
  }

  /**
   * Runs' slices in one transaction; one at a time when the store says a run is another node's (that run is then
   * refused alone, as before). True when something went up.
   */
  private async uploadBatch(batch: SliceWork[]): Promise<boolean> {
    const results = batch.length > 1 ? await this.sink.uploadSlices(batch.map((w) => ({ row: w.row, slice: w.slice, caughtUp: w.slice.end >= w.end }))) : null;
    if (results) {
      batch.forEach((w, i) => this.landed(w, results[i]));
      return true;
    }
    let any = false;
    for (const w of batch) {
      let res;
      try {
        res = await this.sink.uploadSlice(w.row, w.slice, w.slice.end >= w.end);
      } catch (e) {
        if (this.refuseRun(w.id, e)) continue;
        throw e;
      }
      this.landed(w, res);
      any = true;
    }
    return any;
  }

  /** What the store answered for a run's slice: its cursor, rows and lag as they are now. */
  private landed({ id, cur, end, slice }: SliceWork, res: { offset: number; moved: boolean }): void {
    if (!res.moved) {
      if (slice.missingImages.length) {
        this.o.log(`upload: run ${id}: ${slice.missingImages.length} image(s) its media entries name are missing from its media dir or do not match their sha256 (${slice.missingImages[0].slice(0, 12)}…); their entries are uploaded without them`);
      }
      cur.rows += slice.rows;
      if (slice.rows > 0) this.slicesSinceCompact.set(id, (this.slicesSinceCompact.get(id) ?? 0) + 1);
      this.status.uploadedRows += slice.rows;
      this.status.uploadedPoints += slice.points;
    }
    cur.offset = res.offset;
    this.cursors.set(id, cur);
    this.news.sent(id);
    if (cur.offset >= end) this.pending.delete(id);
  }

  /**
   * Merges the run's small chunks in the store. A failure loses nothing (the chunks stay as they were, the
   * transaction rolled back): it is said once per run, and the next compaction (or `logd store compact`) does it.
   */
  private async compact(id: string, live = false): Promise<void> {
    if (this.o.compact === false) return;
    this.slicesSinceCompact.delete(id);
    try {
      await this.sink.compact(id, { live });
    } catch (e) {
      if (this.compactSaid.has(id)) return;
      this.compactSaid.add(id);
      this.o.log(`upload: run ${id}: its small chunks in the store could not be merged (${this.describe(e)}); they stay as they are, every row there, and are merged later (or by \`logd store compact\`)`);
    }
  }

  /** A run the store will not take from us (another node's id): left local, said once. */
  private refuseRun(id: string, e: unknown): boolean {
    if (!(e instanceof RunOfAnotherNode)) return false;
    this.refusedRuns.add(id);
    this.o.log(`upload: ${e.message}`);
    // `logd status` shows it (the newest few), with what to do.
    const left = (this.status.leftLocal ?? []).filter((x) => x.run !== id);
    this.status.leftLocal = [...left, { run: id, why: e.message }].slice(-MAX_LEFT_LOCAL_SHOWN);
    this.pending.delete(id);
    this.measureBacklog();
    this.flushStatus(true);
    return true;
  }

  private failed(e: unknown): void {
    const message = this.describe(e);
    const first = this.failingSince === 0;
    if (first) this.failingSince = Date.now();
    this.backoffMs = Math.min(this.o.backoffMaxMs, this.backoffMs ? this.backoffMs * 2 : 500);
    if (first || message !== this.status.lastError) {
      this.o.log(`upload: ${message}; nothing is lost (the runs stay in the local store), retrying every ${Math.round(this.backoffMs / 100) / 10}-${this.o.backoffMaxMs / 1000} s`);
    }
    this.cursorsFresh = false; // re-read after reconnecting: another uploader may have moved them
    this.sink.reset();
    this.measureBacklog();
    this.status.state = 'retrying';
    this.status.lastError = message;
    this.status.lastErrorAt = new Date().toISOString();
    this.status.retryAt = new Date(Date.now() + this.backoffMs).toISOString();
    this.flushStatus(true);
  }

  private recovered(): void {
    if (this.failingSince === 0) return;
    this.o.log(`upload: the shared store answers again after ${((Date.now() - this.failingSince) / 1000).toFixed(1)} s; uploading the backlog`);
    this.failingSince = 0;
    this.backoffMs = 0;
    this.status.retryAt = null;
  }

  /** The error for people: what happened and what to do, with the password cut out. */
  describe(e: unknown): string {
    return describeUploadError(e, this.o.url);
  }

  private sleep(ms: number): Promise<void> {
    if (this.stopped) return Promise.resolve();
    return new Promise((resolve) => {
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        resolve();
      }
      this.wake = done;
    });
  }

  private flushStatus(force: boolean): void {
    if (!this.o.statusDir) return;
    const now = Date.now();
    if (!force && now - this.lastStatusWrite < 1000) return;
    this.lastStatusWrite = now;
    this.status.updatedAt = new Date(now).toISOString();
    writeStatus(this.o.statusDir, this.status);
  }
}

export { unreachable } from './errors.js';
export { SYNC_REQUEST };
