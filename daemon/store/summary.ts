// Handler bookkeeping that must not block: per-key last/min/max/count over a
// run's history, kept in typed arrays indexed by run-global key id.
import type { BaseFrame, HistoryBatch } from './format.js';
import { jsonNumber, ownRecord } from '../../src/json.js';

export class RunSummary {
  private last = new Float64Array(16);
  private min = new Float64Array(16);
  private max = new Float64Array(16);
  private count = new Float64Array(16);
  private size = 0;
  rows = 0;
  lastStep = -1;
  stepsBackwards = 0;

  private grow(n: number): void {
    if (n <= this.last.length) return;
    let cap = this.last.length;
    while (cap < n) cap *= 2;
    const g = (a: Float64Array) => {
      const b = new Float64Array(cap);
      b.set(a);
      return b;
    };
    this.last = g(this.last);
    this.min = g(this.min);
    this.max = g(this.max);
    this.count = g(this.count);
  }

  ensureKeys(n: number): void {
    if (n <= this.size) return;
    this.grow(n);
    for (let k = this.size; k < n; k++) {
      this.last[k] = NaN;
      this.min[k] = Infinity;
      this.max[k] = -Infinity;
      this.count[k] = 0;
    }
    this.size = n;
  }

  add(b: HistoryBatch): void {
    const { keyIds, values, steps } = b;
    const { last, min, max, count } = this;
    for (let i = 0; i < keyIds.length; i++) {
      const k = keyIds[i];
      const v = values[i];
      last[k] = v;
      count[k]++;
      // NaN never wins a comparison, so min/max stay over the real numbers.
      if (v < min[k]) min[k] = v;
      if (v > max[k]) max[k] = v;
    }
    for (let r = 0; r < steps.length; r++) {
      if (steps[r] < this.lastStep) this.stepsBackwards++;
      else this.lastStep = steps[r];
    }
    this.rows += b.rows;
  }

  /** Starts from the summary of rows this log does not hold (a BASE frame: rows another node logged). */
  restoreBase(b: BaseFrame): void {
    const num = (v: number | string | null, none: number) => (v === null ? none : typeof v === 'number' ? v : Number(v));
    for (const k of b.stats) {
      this.ensureKeys(k.id + 1);
      this.last[k.id] = num(k.last, NaN);
      this.min[k.id] = num(k.min, Infinity);
      this.max[k.id] = num(k.max, -Infinity);
      this.count[k.id] = k.count;
    }
    this.rows += b.rows;
    this.lastStep = Math.max(this.lastStep, b.lastStep);
  }

  /**
   * Its whole state, for a checkpoint (checkpoint.ts): the totals, and per
   * key id below `size` its last, min, max and count (views, not copies).
   */
  snapshot(): SummarySnapshot {
    const n = this.size;
    return {
      size: n, rows: this.rows, lastStep: this.lastStep, stepsBackwards: this.stepsBackwards,
      last: this.last.subarray(0, n), min: this.min.subarray(0, n), max: this.max.subarray(0, n), count: this.count.subarray(0, n),
    };
  }

  /** A summary in the state a snapshot() holds (the same capacity as the one that took it). */
  static restore(s: SummarySnapshot): RunSummary {
    const r = new RunSummary();
    r.ensureKeys(s.size);
    r.last.set(s.last.subarray(0, s.size));
    r.min.set(s.min.subarray(0, s.size));
    r.max.set(s.max.subarray(0, s.size));
    r.count.set(s.count.subarray(0, s.size));
    r.rows = s.rows;
    r.lastStep = s.lastStep;
    r.stepsBackwards = s.stepsBackwards;
    return r;
  }

  /** The last value logged for key `id`, or undefined before any. */
  lastOf(id: number): number | undefined {
    return id < this.size && this.count[id] > 0 ? this.last[id] : undefined;
  }

  /** How many keys have at least one value. */
  keyCount(): number {
    let n = 0;
    for (let k = 0; k < this.size; k++) if (this.count[k] > 0) n++;
    return n;
  }

  /** `{key: last value}` for keys seen, ids `from` up to `to`, at most `limit`; non-finite values as strings. */
  lastValues(names: readonly string[], limit = Infinity, from = 0, to = Infinity): Record<string, number | string> {
    const out = ownRecord<number | string>();
    let n = 0;
    for (let k = from; k < this.size && k < names.length && k < to && n < limit; k++) {
      if (this.count[k] > 0) (out[names[k]] = jsonNumber(this.last[k])), n++;
    }
    return out;
  }

  stats(names: readonly string[], limit = Infinity, from = 0, to = Infinity): Record<string, KeyStats> {
    const out = ownRecord<KeyStats>();
    let n = 0;
    for (let k = from; k < this.size && k < names.length && k < to && n < limit; k++) {
      if (this.count[k] === 0) continue;
      const finiteSeen = this.min[k] !== Infinity || this.max[k] !== -Infinity;
      out[names[k]] = {
        last: jsonNumber(this.last[k]),
        min: finiteSeen ? jsonNumber(this.min[k]) : null,
        max: finiteSeen ? jsonNumber(this.max[k]) : null,
        count: this.count[k],
      };
      n++;
    }
    return out;
  }
}

export interface SummarySnapshot {
  size: number; rows: number; lastStep: number; stepsBackwards: number;
  last: Float64Array; min: Float64Array; max: Float64Array; count: Float64Array;
}

export interface KeyStats { last: number | string; min: number | string | null; max: number | string | null; count: number }

/**
 * A run's summary and per-key stats as every RunInfo carries them: at most
 * SUMMARY_CAP keys each, so one run with a million metric names never makes a
 * message (or a `logd runs` listing) too big. `capped` says how many there are
 * in all; `logd show` streams the whole of both (ReadSummary).
 */
export const SUMMARY_CAP = 1000;

export function cappedSummary(summary: RunSummary, keys: readonly string[], userSummary: Record<string, unknown>): {
  summary: Record<string, unknown>; stats: Record<string, KeyStats>; capped: { shown: number; total: number } | null;
} {
  const userKeys = Object.keys(userSummary);
  let total = summary.keyCount() + userKeys.length;
  if (total > SUMMARY_CAP && userKeys.length > 0) {
    const logged = new Set(keys);
    total -= userKeys.filter((k) => logged.has(k)).length; // a key both logged and updated counts once
  }
  if (total <= SUMMARY_CAP) return { summary: { ...summary.lastValues(keys), ...userSummary }, stats: summary.stats(keys), capped: null };
  const user = ownRecord();
  for (const k of userKeys.slice(0, SUMMARY_CAP / 2)) user[k] = userSummary[k];
  const out = { ...summary.lastValues(keys, SUMMARY_CAP - Object.keys(user).length), ...user };
  return { summary: out, stats: summary.stats(keys, SUMMARY_CAP), capped: { shown: Object.keys(out).length, total } };
}

/** The whole summary and stats in parts of `perChunk` keys (ReadSummary); user summary entries come last. */
export function* summaryChunks(summary: RunSummary, keys: readonly string[], userSummary: Record<string, unknown>, perChunk = 20_000): Generator<{ summary: Record<string, unknown>; stats: Record<string, KeyStats> }> {
  for (let from = 0; from < keys.length; from += perChunk) {
    yield { summary: summary.lastValues(keys, Infinity, from, from + perChunk), stats: summary.stats(keys, Infinity, from, from + perChunk) };
  }
  const userKeys = Object.keys(userSummary);
  for (let i = 0; i < userKeys.length; i += perChunk) {
    const part = ownRecord();
    for (const k of userKeys.slice(i, i + perChunk)) part[k] = userSummary[k];
    yield { summary: part, stats: {} };
  }
}
