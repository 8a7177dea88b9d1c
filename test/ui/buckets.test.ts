// Downsampling where the data is (src/downsample.ts, shared by the daemon's
// history reader and the shared source), as pure functions: buckets of mean,
// min and max that keep a spike, whole series when N covers them, the same
// answer as the dashboard cache's own downsampling.
import { describe, expect, it } from 'vitest';
import { PointColumns, MetricCollector, bucketPoints } from '../../src/downsample.js';
import { downsampleHistory } from '../../daemon/query/downsampled.js';
import { metricSeries, seriesFromBuckets } from '../../daemon/ui/downsample.js';
import { RunSeries } from '../../daemon/ui/series.js';
import type { History } from '../../client/history.js';

function columns(steps: number[], values: number[]): PointColumns {
  const c = new PointColumns();
  steps.forEach((s, i) => c.push(s, 100 + i, values[i]));
  return c;
}
const arr = (a: Float64Array) => [...a];

/** Two metrics interleaved: `a` on every row, `b` on odd steps only. */
function twoMetrics(n: number, a: (s: number) => number, b: (s: number) => number): History {
  const steps: number[] = [], start = [0], keyIds: number[] = [], values: number[] = [];
  for (let s = 0; s < n; s++) {
    steps.push(s);
    keyIds.push(0), values.push(a(s));
    if (s % 2) keyIds.push(1), values.push(b(s));
    start.push(keyIds.length);
  }
  return {
    keys: ['a', 'b'], rows: n, steps: Float64Array.from(steps), times: Float64Array.from(steps, (s) => 1000 + s), writers: new Uint32Array(n),
    start: Uint32Array.from(start), keyIds: Uint32Array.from(keyIds), values: Float64Array.from(values),
  };
}

describe('bucketPoints', () => {
  it('gives N buckets of first step and time, mean, min and max; a spike survives as its bucket max, NaN-only buckets are NaN', () => {
    const b = bucketPoints(columns([0, 1, 2, 3, 4, 5, 6, 7], [1, 3, NaN, Infinity, 5, -5, 0, 100]), 4);
    expect(arr(b.step)).toEqual([0, 2, 4, 6]);
    expect(arr(b.time)).toEqual([100, 102, 104, 106]);
    expect(arr(b.mean)).toEqual([2, NaN, 0, 50]);
    expect(arr(b.min)).toEqual([1, NaN, -5, 0]);
    expect(arr(b.max)).toEqual([3, NaN, 5, 100]);
    expect(b.stored).toBe(8);
  });

  it('gives the whole series, min = max = value, when N covers it', () => {
    const b = bucketPoints(columns([0, 1, 2], [7, NaN, 9]), 3);
    expect(arr(b.step)).toEqual([0, 1, 2]);
    expect(arr(b.mean)).toEqual([7, NaN, 9]);
    expect(arr(b.min)).toEqual(arr(b.mean));
    expect(arr(b.max)).toEqual(arr(b.mean));
  });

  it('orders points by step first (arrival order within a step)', () => {
    const b = bucketPoints(columns([3, 1, 1, 2], [30, 10, 11, 20]), 10);
    expect(arr(b.step)).toEqual([1, 1, 2, 3]);
    expect(arr(b.mean)).toEqual([10, 11, 20, 30]);
    expect(arr(b.time)).toEqual([101, 102, 103, 100]);
  });

  it('keeps one spike among 100 000 points in exactly one bucket of 100', () => {
    const c = new PointColumns();
    for (let s = 0; s < 100_000; s++) c.push(s, s, s === 77_777 ? 1e9 : Math.sin(s));
    const b = bucketPoints(c, 100);
    expect(b.step.length).toBe(100);
    expect(arr(b.max).filter((v) => v === 1e9)).toHaveLength(1);
    expect(Math.max(...arr(b.mean))).toBeLessThan(1e9);
  });
});

describe('MetricCollector and downsampleHistory', () => {
  it('collects only the wanted metrics from row batches', () => {
    const h = twoMetrics(10, (s) => s, (s) => -s);
    const c = new MetricCollector(new Set(['b']));
    const counts = Uint32Array.from({ length: h.rows }, (_, r) => h.start[r + 1] - h.start[r]);
    c.add(h.rows, h.steps, h.times, counts, h.keyIds, h.values, h.keys);
    expect([...c.byKey.keys()]).toEqual(['b']);
    expect(arr(c.byKey.get('b')!.value.subarray(0, c.byKey.get('b')!.n))).toEqual([-1, -3, -5, -7, -9]);
  });

  it('answers what the dashboard cache answers for the same rows (same buckets, band only when downsampled)', () => {
    const h = twoMetrics(1001, (s) => Math.cos(s) + (s === 500 ? 50 : 0), (s) => s * 2);
    const cache = new RunSeries();
    cache.append(h);
    for (const points of [10, 333, 5000]) {
      const at = seriesFromBuckets(downsampleHistory(h, [], points));
      expect([...at.keys()]).toEqual(['a', 'b']);
      expect(at.get('a')).toEqual(metricSeries(cache, cache.keyId('a')!, points));
      expect(at.get('b')).toEqual(metricSeries(cache, cache.keyId('b')!, points));
    }
    const few = seriesFromBuckets(downsampleHistory(h, ['a'], 10));
    expect([...few.keys()]).toEqual(['a']);
    expect(Math.max(...(few.get('a')!.max as number[]))).toBe(Math.cos(500) + 50);
  });
});
