// A run's latest timeline: which stored rows a later attempt's rewind
// superseded. An attempt started with init(resume_from=(run, S)) records S in
// its ATTEMPT frame (`resumedFromStep`); a row is superseded when it was
// written by an earlier attempt and its step is above S. Nothing is removed
// from the log: readers leave superseded rows out, or mark them.
//
// A row's attempt is its writer's: the attempt in force where the writer's
// first WRITER frame stands in the log. So a dead writer's rows ingested late
// (its spill file, its crash journal) still count as its own attempt's.
// Ingest is untouched: the decision is made when the log is read.
import { FrameType, parseFrameJson, type HistoryBatch, type WriterMeta } from './format.js';
import { rewindCutoffs } from '../../src/attempts.js';

/** What an attempt says about rewinding: its number, and the step it resumed from (absent: it rewound nothing). */
export interface AttemptRewind { n: number; resumedFromStep?: number }

/**
 * Where a log's frames so far placed its writers: per writer index the
 * attempt it belongs to (null: none yet), and the attempt in force. A
 * checkpoint keeps it, so the frames after it are placed as a whole read would.
 */
export interface WriterPlacement { writerAttempt: Array<number | null>; attemptNow: number }

export class Timeline {
  /** cutoff[n]: rows of attempt n with a step above it are superseded (Infinity: none). */
  private readonly cutoff: number[];
  private readonly writerAttempt: number[] = [];
  private attemptNow = 1;

  private constructor(attempts: readonly AttemptRewind[]) {
    this.cutoff = rewindCutoffs(attempts);
  }

  /**
   * A timeline for these attempts, or null when none of them rewound (every
   * row is current); with `always`, one anyway (it tells each row's attempt).
   */
  static of(attempts: readonly AttemptRewind[] | undefined | null, always = false, placed: WriterPlacement | null = null): Timeline | null {
    if (!always && !Timeline.rewinds(attempts)) return null;
    const t = new Timeline(attempts ?? []);
    if (placed) {
      placed.writerAttempt.forEach((n, idx) => {
        if (n !== null) t.writerAttempt[idx] = n;
      });
      t.attemptNow = placed.attemptNow;
    }
    return t;
  }

  /** Whether a later attempt rewound (some rows may be superseded). */
  static rewinds(attempts: readonly AttemptRewind[] | undefined | null): boolean {
    return !!attempts && attempts.some((a, i) => i > 0 && typeof a.resumedFromStep === 'number');
  }

  /** Where the frames read so far placed the writers (a checkpoint keeps it). */
  placement(): WriterPlacement {
    return { writerAttempt: Array.from(this.writerAttempt, (n) => n ?? null), attemptNow: this.attemptNow };
  }

  /** Follows the log's frames in order (RUN, ATTEMPT and WRITER frames place each writer in its attempt). */
  onFrame(type: number, p: Uint8Array): void {
    if (type === FrameType.RUN) this.attemptNow = 1;
    else if (type === FrameType.ATTEMPT) this.attemptNow = parseFrameJson<{ n: number }>(p).n;
    else if (type === FrameType.WRITER) {
      const w = parseFrameJson<WriterMeta>(p);
      this.writerAttempt[w.idx] ??= this.attemptNow;
    }
  }

  /** Rows of attempt `n` with a step above this are superseded (Infinity: none are). */
  cutoffOf(n: number): number {
    return this.cutoff[n] ?? Infinity;
  }

  attemptOf(writerIdx: number): number {
    return this.writerAttempt[writerIdx] ?? 1;
  }

  /** Per row of the batch, 1 where it is superseded; null when none is. */
  supersededRows(b: HistoryBatch): Uint8Array | null {
    if (b.writerIdx === 0xffffffff) return null; // not a writer's rows
    const cut = this.cutoff[this.attemptOf(b.writerIdx)] ?? Infinity;
    if (cut === Infinity) return null;
    let mask: Uint8Array | null = null;
    for (let r = 0; r < b.rows; r++) {
      if (b.steps[r] > cut) (mask ??= new Uint8Array(b.rows))[r] = 1;
    }
    return mask;
  }
}

/** The batch's rows split into runs of rows that are all superseded or all current, in order. */
export function splitBySuperseded(b: HistoryBatch, mask: Uint8Array | null): Array<{ batch: HistoryBatch; superseded: boolean }> {
  if (!mask) return [{ batch: b, superseded: false }];
  const out: Array<{ batch: HistoryBatch; superseded: boolean }> = [];
  let pair = 0;
  for (let r = 0; r < b.rows;) {
    let e = r;
    let pairs = 0;
    while (e < b.rows && mask[e] === mask[r]) pairs += b.counts[e++];
    out.push({
      superseded: mask[r] === 1,
      batch: {
        ...b, rows: e - r, steps: b.steps.subarray(r, e), times: b.times.subarray(r, e), counts: b.counts.subarray(r, e),
        keyIds: b.keyIds.subarray(pair, pair + pairs), values: b.values.subarray(pair, pair + pairs),
      },
    });
    pair += pairs;
    r = e;
  }
  return out;
}

/** The batch without its superseded rows (the same batch when none is). */
export function currentRows(b: HistoryBatch, mask: Uint8Array | null): HistoryBatch {
  if (!mask) return b;
  const parts = splitBySuperseded(b, mask).filter((p) => !p.superseded).map((p) => p.batch);
  if (parts.length === 1) return parts[0];
  const rows = parts.reduce((n, p) => n + p.rows, 0);
  const pairs = parts.reduce((n, p) => n + p.keyIds.length, 0);
  const out: HistoryBatch = { ...b, rows, steps: new Float64Array(rows), times: new Float64Array(rows), counts: new Uint32Array(rows), keyIds: new Uint32Array(pairs), values: new Float64Array(pairs) };
  let r = 0, p = 0;
  for (const x of parts) {
    out.steps.set(x.steps, r); out.times.set(x.times, r); out.counts.set(x.counts, r);
    out.keyIds.set(x.keyIds, p); out.values.set(x.values, p);
    r += x.rows; p += x.keyIds.length;
  }
  return out;
}
