// The uploader stage: copies what is durable in this node's record logs into
// the shared store, run by run, slice by slice, and never blocks anything
// else in the daemon (it only reads the logs). While the store is unreachable
// or refuses us it backs off (500 ms doubling, capped at backoffMaxMs) and
// tries again, forever: nothing is dropped, the logs keep everything.
//
// A run open on this daemon that logs nothing for a while (an evaluation, a
// checkpoint, a hang) still says it lives: its row is sent again every
// heartbeat (a quarter of the takeover lease, at most 15 s), so the store's
// `uploaded_at` of a live run never ages past the lease and no other node
// takes it over (continue.ts). A node that is gone sends nothing.
import type { RunRow } from '../store/index-db.js';
import { PgSink, RunOfAnotherNode, type Cursor } from './pg-sink.js';
import { SliceEncoder } from './encoder.js';
import type { EncodedSlice } from './encode.js';
import { STREAM_HISTORY, STREAM_SYSTEM } from './pg-sink.js';
import { SYNC_REQUEST, type LocalRuns } from './local-runs.js';
import { redact, type StoreUrl } from './url.js';
import { StoreContinueRefused, type StoredRun } from '../store/from-store.js';
import { writeStatus, type UploadStatus } from './status.js';
import { storeIdentity } from './store-identity.js';
import { StoreRefused } from './schema.js';
import { lacksPassword, NO_PASSWORD } from './pgpass.js';

const FINAL = ['finished', 'crashed', 'killed'];
/** The longest an open run's row goes unsent while it lives (a shorter lease sends it every quarter lease). */
const HEARTBEAT_MAX_MS = 15_000;

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
  /** When each run was last sent to the store (a slice, or its row): an open run quiet for a heartbeat is sent again. */
  private sentAt = new Map<string, number>();
  /** Slices of each run uploaded since its chunks were last merged. */
  private slicesSinceCompact = new Map<string, number>();
  /** Runs whose compaction failed and was said (once each). */
  private compactSaid = new Set<string>();
  private readonly heartbeatMs: number;

  constructor(private o: UploaderOptions) {
    this.sink = new PgSink(o.url, o.node, { migrate: o.migrate ?? true }, storeIdentity(o.runs.dataDir));
    this.encoder = new SliceEncoder(o.encoderThread ?? false, o.log);
    this.status = {
      pid: process.pid, node: o.node, target: o.url.shown, state: 'connecting', backlog: { runs: 0, rows: 0, bytes: 0 }, lagMs: 0,
      lastError: null, lastErrorAt: null, retryAt: null, uploadedRows: 0, uploadedPoints: 0, updatedAt: new Date().toISOString(),
    };
    this.heartbeatMs = Math.max(250, Math.min(HEARTBEAT_MAX_MS, (o.claim?.takeoverAfterMs ?? 3600_000) / 4));
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
      if (row && !FINAL.includes(row.state) && (await this.sendHealth(id, row))) worked = true;
      else if (row && !FINAL.includes(row.state)) await this.heartbeat(id, row);
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
        this.sentAt.delete(id);
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

  /** What of each open run's health was last sent: its events, and a 15 s clock for its progress. */
  private healthSent = new Map<string, string>();

  /**
   * An open run whose log is all in still has news when its rank health moved
   * (daemon/health/): a new event at once, its progress every 15 s. Sends the
   * row alone; true when it did.
   */
  private async sendHealth(id: string, row: RunRow): Promise<boolean> {
    if (!row.metadata_json.includes('"health":')) return false;
    let sig = '';
    try {
      const h = (JSON.parse(row.metadata_json) as { health?: { events?: Array<{ at: number }> } }).health;
      const ev = h?.events ?? [];
      sig = `${ev.length}:${ev[ev.length - 1]?.at ?? 0}:${Math.floor(Date.now() / 15_000)}`;
    } catch {
      return false;
    }
    if (this.healthSent.get(id) === sig) return false;
    try {
      await this.sink.uploadRow(row);
    } catch (e) {
      if (this.refuseRun(id, e)) return false;
      throw e;
    }
    this.healthSent.set(id, sig);
    this.sentAt.set(id, Date.now());
    return true;
  }

  /**
   * A run open on this daemon (its owner lives, or may still come back) whose
   * log is all in and that was not sent for a heartbeat: its row goes again,
   * which moves the store's `uploaded_at`. Not `logd sync`'s: it holds no run.
   */
  private async heartbeat(id: string, row: RunRow): Promise<void> {
    const now = Date.now();
    if (now - (this.sentAt.get(id) ?? 0) < this.heartbeatMs || !(this.o.runs.isOpen?.(id) ?? false)) return;
    try {
      await this.sink.uploadRow(row);
    } catch (e) {
      if (this.refuseRun(id, e)) return;
      throw e;
    }
    this.sentAt.set(id, now);
  }

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
    this.sentAt.set(id, Date.now());
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
    const err = e as Error & { code?: string };
    const where = this.o.url.shown;
    let text: string;
    if (e instanceof StoreRefused) text = `the shared store at ${where} is refused: ${err.message}`;
    else if (lacksPassword(e)) text = `the shared store at ${where} asks for a password and ${NO_PASSWORD}. The daemon reads ~/.pgpass again on each try; a new environment or file takes a restart`;
    else if (err.code === '28P01' || err.code === '28000') text = `the shared store at ${where} refused the login (${err.message}); fix the user or password where the daemon gets them: LOGD_UPLOAD_URL, the --upload-url-file or ~/.pgpass`;
    else if (err.code === '3D000') text = `the shared store at ${where}: ${err.message}; create it (createdb) or fix the database name in the upload URL`;
    else if (unreachable(err)) {
      text = `cannot reach the shared store at ${where} (${err.code ?? err.message}); uploads resume when it answers`;
    } else if (['42703', '42P01', '42804', '42P10'].includes(err.code ?? '')) {
      // A column or table missing, or of another type: the store's tables were altered by hand.
      text = `uploading to ${where} failed: ${err.message}: the store's tables are not as logd writes them; \`logd store migrate\` checks every table and column, repairs what it can and says what differs`;
    } else text = `uploading to ${where} failed: ${err.message}`;
    return redact(text, this.o.url);
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

/** A store that is away for now: not listening, restarting, shutting down or cut off. Uploads resume by themselves. */
export function unreachable(err: Error & { code?: string }): boolean {
  const code = err.code ?? '';
  // 57P01-03: the server is shutting down, crashed, or not yet accepting connections; class 08: the connection failed.
  if (['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNRESET', 'ENOENT', '57P01', '57P02', '57P03'].includes(code)) return true;
  if (code.startsWith('08')) return true;
  return /timeout|terminat|Connection/i.test(err.message);
}

export { SYNC_REQUEST };
