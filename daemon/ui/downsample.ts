// Downsampling for charts: about N points per series, each bucket keeping its
// mean, min and max so that a spike inside a bucket still shows (as a band).
// The full data comes back, without min/max, when N covers the series.
import type { RunSeries } from './series.js';
import type { History } from '../query/index.js';

/** A chart series: parallel arrays; `min`/`max` only when downsampled. Non-finite values are null. */
export interface ChartSeries {
  step: number[];
  time: number[];
  value: Array<number | null>;
  min?: Array<number | null>;
  max?: Array<number | null>;
  /** Points in the stored series before downsampling. */
  points: number;
}

const fin = (v: number): number | null => (Number.isFinite(v) ? v : null);

/** One metric of a run, ordered by step (arrival order within a step). */
export function metricSeries(s: RunSeries, keyId: number, maxPoints: number): ChartSeries {
  const ks = s.series(keyId);
  const n = ks.rows.n;
  const rows = ks.rows.a, vals = ks.values.a;
  let order: Uint32Array | null = null;
  if (!ks.sorted) order = Uint32Array.from({ length: n }, (_, j) => j).sort((a, b) => s.steps.a[rows[a]] - s.steps.a[rows[b]] || a - b);
  if (!order && n > maxPoints) return bucketsInOrder(s, rows, vals, n, maxPoints);
  const at = (i: number) => (order ? order[i] : i);
  return bucketed(n, maxPoints, (i) => s.steps.a[rows[at(i)]], (i) => s.times.a[rows[at(i)]], (i) => vals[at(i)], (i) => vals[at(i)], (i) => vals[at(i)], false);
}

/**
 * Buckets n ordered points into at most maxPoints: a bucket's x is its first
 * point's, its value the mean of its finite values, min and max their extremes.
 */
export function bucketed(
  n: number, maxPoints: number,
  step: (i: number) => number, time: (i: number) => number,
  mean: (i: number) => number, lo: (i: number) => number, hi: (i: number) => number,
  /** Keep min and max even for full data (a group's spread across runs). */
  withBand: boolean,
): ChartSeries {
  if (n <= maxPoints) {
    const out: ChartSeries = { step: new Array(n), time: new Array(n), value: new Array(n), points: n };
    if (withBand) (out.min = new Array(n), out.max = new Array(n));
    for (let i = 0; i < n; i++) {
      out.step[i] = step(i);
      out.time[i] = time(i);
      out.value[i] = fin(mean(i));
      if (withBand) (out.min![i] = fin(lo(i)), out.max![i] = fin(hi(i)));
    }
    return out;
  }
  const b = Math.max(1, maxPoints);
  const out: ChartSeries = { step: new Array(b), time: new Array(b), value: new Array(b), min: new Array(b), max: new Array(b), points: n };
  for (let k = 0; k < b; k++) {
    const from = Math.floor((k * n) / b), to = Math.floor(((k + 1) * n) / b);
    let sum = 0, cnt = 0, mn = Infinity, mx = -Infinity;
    for (let i = from; i < to; i++) {
      const v = mean(i), l = lo(i), h = hi(i);
      if (Number.isFinite(v)) (sum += v, cnt++);
      if (Number.isFinite(l) && l < mn) mn = l;
      if (Number.isFinite(h) && h > mx) mx = h;
    }
    out.step[k] = step(from);
    out.time[k] = time(from);
    out.value[k] = cnt ? sum / cnt : null;
    out.min![k] = cnt ? mn : null;
    out.max![k] = cnt ? mx : null;
  }
  return out;
}

/** Per step across runs: the mean, min and max of one metric (steps a run lacks are left out of that step). */
export function acrossRuns(runs: RunSeries[], key: string, maxPoints: number): ChartSeries {
  const at = new Map<number, number>();
  const steps: number[] = [], times: number[] = [], sum: number[] = [], cnt: number[] = [], mn: number[] = [], mx: number[] = [];
  for (const s of runs) {
    const id = s.keyId(key);
    if (id === undefined) continue;
    const ks = s.series(id);
    for (let i = 0; i < ks.rows.n; i++) {
      const r = ks.rows.a[i], v = ks.values.a[i];
      if (!Number.isFinite(v)) continue;
      const st = s.steps.a[r];
      let j = at.get(st);
      if (j === undefined) {
        j = steps.length;
        at.set(st, j);
        steps.push(st), times.push(s.times.a[r]), sum.push(0), cnt.push(0), mn.push(Infinity), mx.push(-Infinity);
      }
      sum[j] += v, cnt[j]++;
      if (v < mn[j]) mn[j] = v;
      if (v > mx[j]) mx[j] = v;
    }
  }
  const order = Uint32Array.from({ length: steps.length }, (_, i) => i).sort((a, b) => steps[a] - steps[b]);
  return bucketed(order.length, maxPoints, (i) => steps[order[i]], (i) => times[order[i]],
    (i) => sum[order[i]] / cnt[order[i]], (i) => mn[order[i]], (i) => mx[order[i]], true);
}

/** bucketed() for the common case (points already in step order), without a call per point: a million points in a few ms. */
function bucketsInOrder(s: RunSeries, rows: Uint32Array, vals: Float64Array, n: number, b: number): ChartSeries {
  const out: ChartSeries = { step: new Array(b), time: new Array(b), value: new Array(b), min: new Array(b), max: new Array(b), points: n };
  const steps = s.steps.a, times = s.times.a;
  for (let k = 0; k < b; k++) {
    const from = Math.floor((k * n) / b), to = Math.floor(((k + 1) * n) / b);
    let sum = 0, cnt = 0, mn = Infinity, mx = -Infinity;
    for (let i = from; i < to; i++) {
      const v = vals[i];
      if (v - v !== 0) continue; // NaN or ±Infinity
      sum += v;
      cnt++;
      if (v < mn) mn = v;
      if (v > mx) mx = v;
    }
    out.step[k] = steps[rows[from]];
    out.time[k] = times[rows[from]];
    out.value[k] = cnt ? sum / cnt : null;
    out.min![k] = cnt ? mn : null;
    out.max![k] = cnt ? mx : null;
  }
  return out;
}

/** The chart series of a downsampled History (HistoryQuery.points): one per metric, min/max only where it was downsampled. */
export function seriesFromBuckets(h: History): Map<string, ChartSeries> {
  const out = new Map<string, ChartSeries>();
  const b = h.buckets;
  if (!b) throw new Error('seriesFromBuckets: the history answer is not downsampled (no buckets)');
  let r = 0;
  while (r < h.rows) {
    const k = h.keyIds[h.start[r]];
    let end = r;
    while (end < h.rows && h.keyIds[h.start[end]] === k) end++;
    const n = end - r, stored = b.stored[k] ?? n, banded = stored > n;
    const s: ChartSeries = { step: new Array(n), time: new Array(n), value: new Array(n), points: stored };
    if (banded) (s.min = new Array(n), s.max = new Array(n));
    for (let i = 0; i < n; i++) {
      const p = h.start[r + i];
      s.step[i] = h.steps[r + i];
      s.time[i] = h.times[r + i];
      s.value[i] = fin(h.values[p]);
      if (banded) (s.min![i] = fin(b.min[p]), s.max![i] = fin(b.max[p]));
    }
    out.set(h.keys[k], s);
    r = end;
  }
  return out;
}
