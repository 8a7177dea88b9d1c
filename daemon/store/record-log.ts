// Writer stage, on disk: one append-only record log per run. Appends are
// buffered in memory; sync() writes them and fdatasyncs, and only then may the
// records be acknowledged. A failed write (a full disk) keeps the whole frames
// that reached the file (made durable) and cuts the half frame after them, so
// the log never keeps a half-written frame; the frames that did not fit stay
// queued for the next sync (the cut bytes are still in memory). With a backlog
// larger than the space freed, what fits is stored and the rest waits.
//
// Marks tie what the caller appended (a writer's batch) to a place in the
// log: takeDurable() hands back the marks whose frames are all durable.
import fs from 'node:fs';
import path from 'node:path';
import { frameHeader, scanFrames, type ScanResult } from '../../src/frames.js';

export class RecordLog<Mark = unknown> {
  private fd: number;
  private pending: Uint8Array[] = [];
  private pendingBytes = 0;
  /** File offset where each pending frame ends, in order. */
  private pendingEnds: number[] = [];
  /** File offset after every frame appended so far. */
  private appendedEnd: number;
  private marks: Array<{ end: number; mark: Mark }> = [];
  private syncing: Promise<void> | null = null;
  /** Bytes known to be on disk and fdatasynced. */
  durableBytes: number;
  closed = false;
  /**
   * The log's latest checkpoint that a replay checked and started from
   * (checkpoint.ts), and the length the log had when it ended with that
   * checkpoint's pointer; null when none is known (the replay read the whole log).
   */
  checkpoint: { offset: number; length: number; sealedAt: number } | null = null;

  private constructor(readonly file: string, fd: number, size: number) {
    this.fd = fd;
    this.durableBytes = size;
    this.appendedEnd = size;
  }

  /**
   * Opens (creating if needed) a log for appends, replays its frames through
   * `onFrame`, and cuts a torn tail: bytes with no valid frame after them. The
   * cut bytes are first kept aside, durably, in `<file>.cut-<offset>`; when
   * that fails the log is not opened (nothing is cut). Damaged regions in the
   * middle stay in the file; the scan reports them. `from`: frames before
   * this offset are known already (a checkpoint covers them) and not read.
   */
  static open(file: string, onFrame?: (type: number, payload: Uint8Array, offset: number) => void, from = 0): { log: RecordLog; scan: ScanResult } {
    const scan = scanFrames(file, (t, p, offset) => onFrame?.(t, p, offset), undefined, from);
    const fd = fs.openSync(file, fs.constants.O_RDWR | fs.constants.O_CREAT, 0o600);
    try {
      if (scan.tornBytes > 0) {
        keepAside(fd, file, scan.validBytes, scan.tornBytes);
        fs.ftruncateSync(fd, scan.validBytes);
        fs.fdatasyncSync(fd);
      }
    } catch (e) {
      fs.closeSync(fd);
      throw e;
    }
    return { log: new RecordLog(file, fd, scan.validBytes), scan };
  }

  append(type: number, parts: readonly Uint8Array[]): void {
    if (this.closed) throw new Error(`store: record log ${this.file} is closed`);
    const h = frameHeader(type, parts);
    this.pending.push(h, ...parts);
    let bytes = h.byteLength;
    for (const p of parts) bytes += p.byteLength;
    this.pendingBytes += bytes;
    this.appendedEnd += bytes;
    this.pendingEnds.push(this.appendedEnd);
  }

  /** Ties `mark` to everything appended so far: takeDurable() returns it once all of that is durable. */
  mark(mark: Mark): void {
    this.marks.push({ end: this.appendedEnd, mark });
  }

  /** The marks whose frames are durable now, in order (each is returned once). */
  takeDurable(): Mark[] {
    let n = 0;
    while (n < this.marks.length && this.marks[n].end <= this.durableBytes) n++;
    return n === 0 ? [] : this.marks.splice(0, n).map((m) => m.mark);
  }

  /** Bytes appended and not yet durable. */
  get waitingBytes(): number {
    return this.appendedEnd - this.durableBytes;
  }

  get dirty(): boolean {
    return this.pendingBytes > 0;
  }

  /** Writes and fdatasyncs everything appended so far. Concurrent calls share work. */
  async sync(): Promise<void> {
    while (this.syncing) await this.syncing;
    if (this.pendingBytes === 0) return;
    const parts = this.pending;
    const bytes = this.pendingBytes;
    const ends = this.pendingEnds;
    this.pending = [];
    this.pendingBytes = 0;
    this.pendingEnds = [];
    this.syncing = this.writeOut(parts, bytes, ends).finally(() => {
      this.syncing = null;
    });
    return this.syncing;
  }

  private async writeOut(parts: Uint8Array[], bytes: number, ends: number[]): Promise<void> {
    const start = this.durableBytes;
    const progress = { written: 0 };
    try {
      await writevAll(this.fd, parts, start, progress);
      await fdatasync(this.fd);
      this.durableBytes = start + bytes;
    } catch (e) {
      // Keep the whole frames that reached the file, cut the half one after them.
      let whole = 0;
      while (whole < ends.length && ends[whole] - start <= progress.written) whole++;
      let keep = whole > 0 ? ends[whole - 1] : start;
      try {
        fs.ftruncateSync(this.fd, keep);
        if (keep > start) await fdatasync(this.fd);
      } catch {
        keep = start; // the next sync rewrites from `start` anyway
      }
      this.durableBytes = keep;
      // Put the frames that are not durable back in front.
      this.pending = dropPrefix(parts, keep - start).concat(this.pending);
      this.pendingBytes += bytes - (keep - start);
      this.pendingEnds = ends.filter((end) => end > keep).concat(this.pendingEnds);
      throw e;
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    fs.closeSync(this.fd);
  }
}

/** Copies `bytes` from `offset` to `<file>.cut-<offset>` and makes the copy durable. */
function keepAside(fd: number, file: string, offset: number, bytes: number): void {
  const aside = `${file}.cut-${offset}`;
  const buf = Buffer.allocUnsafe(bytes);
  fs.readSync(fd, buf, 0, bytes, offset);
  try {
    const out = fs.openSync(aside, 'w', 0o600);
    try {
      fs.writeFileSync(out, buf);
      fs.fsyncSync(out);
    } finally {
      fs.closeSync(out);
    }
    const dir = fs.openSync(path.dirname(file), 'r');
    try {
      fs.fsyncSync(dir);
    } finally {
      fs.closeSync(dir);
    }
  } catch (e) {
    throw new Error(`store: cannot keep the ${bytes} torn bytes at the end of ${file} aside in ${aside} (${(e as Error).message}); the log is left as it is and not opened for writing`);
  }
}

function fdatasync(fd: number): Promise<void> {
  return new Promise<void>((resolve, reject) => fs.fdatasync(fd, (e) => (e ? reject(e) : resolve())));
}

async function writevAll(fd: number, parts: Uint8Array[], position: number, progress: { written: number }): Promise<void> {
  // writev takes at most IOV_MAX (1024) buffers per call.
  let pos = position;
  for (let i = 0; i < parts.length; i += 1024) {
    let chunk = parts.slice(i, i + 1024);
    let want = chunk.reduce((n, p) => n + p.byteLength, 0);
    while (want > 0) {
      const written = await new Promise<number>((resolve, reject) =>
        fs.writev(fd, chunk as NodeJS.ArrayBufferView[], pos, (e, n) => (e ? reject(e) : resolve(n))),
      );
      pos += written;
      progress.written += written;
      want -= written;
      if (want > 0) chunk = dropPrefix(chunk, written);
    }
  }
}

function dropPrefix(parts: Uint8Array[], n: number): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (const p of parts) {
    if (n >= p.byteLength) {
      n -= p.byteLength;
      continue;
    }
    out.push(n > 0 ? p.subarray(n) : p);
    n = 0;
  }
  return out;
}
