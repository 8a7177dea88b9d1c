// Where a time starts in the node's system log (LOGD_DIR/system/records.log): a mark every MARK_BYTES (the
// offset of a sample frame, its time, and how many key names the log had defined before it), and the key table
// itself, built as the log grows. A run's samples are then read from the mark before its start to a little past
// its end, not from the log's first byte: the log holds every sample of the node's life (about 40 MB a day at
// 2 s), and a node that runs ten thousand short runs reads it once per run (its upload, its dashboard chart).
import fs from 'node:fs';
import { scanFrames } from '../../src/frames.js';
import { FrameType, decodeHistory, parseFrameJson } from '../store/format.js';

/** Bytes of log between two marks. */
const MARK_BYTES = 256 * 1024;
/**
 * Samples are appended about in time order: a run's start sample, taken a moment before it is written, can land
 * after a periodic one by some milliseconds (22 ms seen). A sample may be this much older than the newest before
 * it; the index then still finds every sample of a window (a read starts at a mark older than the window by this
 * much, and stops at the first sample this much past its end). A sample older by more (the clock set back) turns
 * reads into whole-log reads.
 */
export const STOP_AFTER_S = 5;

interface Mark { offset: number; time: number; keys: number }

export class SystemLogIndex {
  private scanned = 0;
  private ino = -1;
  private born = -1;
  private names: string[] = [];
  private marks: Mark[] = [];
  private lastMark = -Infinity;
  private newest = -Infinity;
  /** False once a sample was older than the newest before it by more than STOP_AFTER_S: reads then take the whole log. */
  ordered = true;

  constructor(readonly file: string) {}

  private reset(): void {
    this.scanned = 0;
    this.names = [];
    this.marks = [];
    this.lastMark = -Infinity;
    this.newest = -Infinity;
    this.ordered = true;
  }

  /** Indexes what was appended since the last look; a log that shrank or was replaced is indexed again. */
  refresh(): void {
    let st: fs.Stats;
    try {
      st = fs.statSync(this.file);
    } catch {
      return this.reset();
    }
    // Another file in its place (removed and made again: the same inode number can come back, its birth time not).
    if (st.ino !== this.ino || st.birthtimeMs !== this.born || st.size < this.scanned) {
      this.reset();
      this.ino = st.ino;
      this.born = st.birthtimeMs;
    }
    if (st.size === this.scanned) return;
    const r = scanFrames(this.file, (type, p, offset) => this.see(type, p, offset), 8 * 1024 * 1024, this.scanned);
    this.scanned = r.validBytes;
  }

  /**
   * The log's frames read from its first byte by someone else (the daemon's opening scan, which reads it anyway):
   * indexed as they pass (`frame`), then `done` with where valid frames end, so the first read after a daemon's
   * start does not read the whole log again on its main thread.
   */
  fromScan(): { frame: (type: number, p: Uint8Array, offset: number) => void; done: (validBytes: number) => void } {
    this.reset();
    return {
      frame: (type, p, offset) => this.see(type, p, offset),
      done: (validBytes) => {
        try {
          const st = fs.statSync(this.file);
          this.ino = st.ino;
          this.born = st.birthtimeMs;
          this.scanned = validBytes;
        } catch {
          this.reset();
        }
      },
    };
  }

  private see(type: number, p: Uint8Array, offset: number): void {
    if (type === FrameType.KEYS) {
      const k = parseFrameJson<{ first: number; names: string[] }>(p);
      for (let i = 0; i < k.names.length; i++) this.names[k.first + i] = k.names[i];
      return;
    }
    if (type !== FrameType.HISTORY) return;
    const t = sampleTime(p);
    if (t < this.newest - STOP_AFTER_S) this.ordered = false;
    if (t > this.newest) this.newest = t;
    if (offset - this.lastMark >= MARK_BYTES) {
      this.marks.push({ offset, time: t, keys: this.names.length });
      this.lastMark = offset;
    }
  }

  /**
   * Where to read from for the samples taken at `from` or later: a frame boundary, and the key names the log
   * defined before it (ids 0..n-1), which a read starting there has not seen.
   */
  startFor(from: number): { offset: number; names: string[] } {
    this.refresh();
    if (!this.ordered) return { offset: 0, names: [] };
    // The last mark older than `from` by more than STOP_AFTER_S: every sample before it is older than `from`
    // (no sample is older than the newest before it by more than that).
    const before = from - STOP_AFTER_S;
    let lo = 0, hi = this.marks.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.marks[mid].time < before) lo = mid + 1;
      else hi = mid;
    }
    if (lo === 0) return { offset: 0, names: [] };
    const m = this.marks[lo - 1];
    return { offset: m.offset, names: this.names.slice(0, m.keys) };
  }
}

/** A sample frame's time: its first row's. */
function sampleTime(p: Uint8Array): number {
  const b = decodeHistory(p); // views of the payload, nothing copied
  return b.rows > 0 ? b.times[0] : -Infinity;
}

const indexes = new Map<string, SystemLogIndex>();

/** The index of a system log, kept for this thread's later reads. */
export function systemLogIndex(file: string): SystemLogIndex {
  let ix = indexes.get(file);
  if (!ix) indexes.set(file, (ix = new SystemLogIndex(file)));
  return ix;
}

/** Thrown from a frame callback to end a read early (a sample past the window). */
export class StopRead extends Error {}
