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
 * Samples are appended in time order; a read stops at the first one this long after the window's end (a clock
 * set back by less keeps its samples in the read).
 */
export const STOP_AFTER_S = 60;

interface Mark { offset: number; time: number; keys: number }

export class SystemLogIndex {
  private scanned = 0;
  private ino = -1;
  private born = -1;
  private names: string[] = [];
  private marks: Mark[] = [];
  private lastMark = -Infinity;
  private lastTime = -Infinity;
  /** False once a sample was older than the one before (the clock went back): reads then start at 0, read to the end. */
  ordered = true;

  constructor(readonly file: string) {}

  private reset(): void {
    this.scanned = 0;
    this.names = [];
    this.marks = [];
    this.lastMark = -Infinity;
    this.lastTime = -Infinity;
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
    const r = scanFrames(this.file, (type, p, offset) => {
      if (type === FrameType.KEYS) {
        const k = parseFrameJson<{ first: number; names: string[] }>(p);
        for (let i = 0; i < k.names.length; i++) this.names[k.first + i] = k.names[i];
        return;
      }
      if (type !== FrameType.HISTORY) return;
      const t = sampleTime(p);
      if (t < this.lastTime) this.ordered = false;
      this.lastTime = t;
      if (offset - this.lastMark >= MARK_BYTES) {
        this.marks.push({ offset, time: t, keys: this.names.length });
        this.lastMark = offset;
      }
    }, 8 * 1024 * 1024, this.scanned);
    this.scanned = r.validBytes;
  }

  /**
   * Where to read from for the samples taken at `from` or later: a frame boundary, and the key names the log
   * defined before it (ids 0..n-1), which a read starting there has not seen.
   */
  startFor(from: number): { offset: number; names: string[] } {
    this.refresh();
    if (!this.ordered) return { offset: 0, names: [] };
    // The last mark strictly before `from`: every sample at `from` or later is at or after it.
    let lo = 0, hi = this.marks.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.marks[mid].time < from) lo = mid + 1;
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
