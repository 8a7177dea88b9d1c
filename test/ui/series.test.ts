// The dashboard's data shaping, as pure functions: smoothing, tail alignment,
// step order, downsampling and group aggregates.
import { describe, expect, it } from 'vitest';
import { RunSeries, SeriesCache, alignTail } from '../../daemon/ui/series.js';
import type { QuerySource } from '../../daemon/query/index.js';
import { metricSeries, acrossRuns } from '../../daemon/ui/downsample.js';
import { ema } from '../../web/smoothing.js';
import type { History } from '../../client/history.js';

/** A History of one metric `k`: row i has step steps[i], time 100 + i, value values[i]. */
function history(steps: number[], values: number[], keys = ['k'], firstTime = 100): History {
  const n = steps.length;
  return {
    keys, rows: n, steps: Float64Array.from(steps), times: Float64Array.from(steps.map((_, i) => firstTime + i)),
    writers: new Uint32Array(n), start: Uint32Array.from({ length: n + 1 }, (_, i) => i), keyIds: new Uint32Array(n), values: Float64Array.from(values),
  };
}
const range = (a: number, b: number) => Array.from({ length: b - a }, (_, i) => a + i);

describe('ema (TensorBoard smoothing)', () => {
  it('is debiased: a constant stays that constant from the first point on', () => {
    expect(ema([5, 5, 5, 5], 0.9)).toEqual([5, 5, 5, 5].map(() => expect.closeTo(5, 12)));
  });
  it('follows last = w·last + (1-w)·v, divided by 1 - w^n', () => {
    const [a, b, c] = ema([0, 1, 1], 0.5) as number[];
    expect(a).toBe(0);
    expect(b).toBeCloseTo(0.5 / 0.75, 12);
    expect(c).toBeCloseTo((0.25 + 0.5) / 0.875, 12);
  });
  it('passes gaps and non-finite points through without moving the average; weight 0 is the raw series', () => {
    expect(ema([1, null, NaN, 1], 0.6)).toEqual([1, null, NaN, expect.closeTo(1, 12)]);
    const raw = [3, 1, 2];
    expect(ema(raw, 0)).toBe(raw);
  });
});

describe('alignTail (new rows of a running run)', () => {
  it('finds where the held rows end inside a tail that overlaps them, so no row is taken twice', () => {
    const s = new RunSeries();
    s.append(history(range(0, 10), range(0, 10)));
    const tail = history(range(6, 15), range(6, 15), ['k'], 106);
    const from = alignTail(s, tail, 4);
    expect(from).toBe(4);
    s.append(tail, from!);
    expect(Array.from(s.steps.a.subarray(0, s.rows))).toEqual(range(0, 15));
  });
  it('says so (null) when the tail does not reach back to the held rows', () => {
    const s = new RunSeries();
    s.append(history(range(0, 10), range(0, 10)));
    expect(alignTail(s, history(range(12, 15), range(12, 15), ['k'], 112), 4)).toBeNull();
  });
  it('maps key ids by name when a later read numbers the keys differently', () => {
    const s = new RunSeries();
    s.append(history([0], [1], ['a']));
    const h = history([1], [2], ['b', 'a']);
    h.keyIds[0] = 1; // 'a' is id 1 in this read
    s.append(h);
    expect(s.keys).toEqual(['a', 'b']);
    expect(Array.from(s.series(0).values.a.subarray(0, 2))).toEqual([1, 2]);
  });
});

describe('metricSeries', () => {
  it('orders points by step when they arrived out of order, and gives non-finite values as null', () => {
    const s = new RunSeries();
    s.append(history([3, 1, 2, 4], [30, 10, NaN, Infinity]));
    expect(metricSeries(s, 0, 100)).toEqual({ step: [1, 2, 3, 4], time: [101, 102, 100, 103], value: [10, null, 30, null], points: 4 });
  });
  it('downsamples to N buckets of mean, min and max; a bucket of only NaN is null', () => {
    const s = new RunSeries();
    s.append(history(range(0, 8), [1, 3, NaN, NaN, 5, -5, 0, 100]));
    const d = metricSeries(s, 0, 4);
    expect(d).toEqual({ step: [0, 2, 4, 6], time: [100, 102, 104, 106], value: [2, null, 0, 50], min: [1, null, -5, 0], max: [3, null, 5, 100], points: 8 });
  });
});

describe('acrossRuns', () => {
  it('gives per-step mean, min and max over the runs that logged that step', () => {
    const a = new RunSeries(), b = new RunSeries(), c = new RunSeries();
    a.append(history([0, 1, 2], [1, 2, 3]));
    b.append(history([0, 1], [3, 4]));
    c.append(history([0], [7], ['other']));
    const g = acrossRuns([a, b, c], 'k', 100);
    expect(g).toEqual({ step: [0, 1, 2], time: [100, 101, 102], value: [2, 3, 3], min: [1, 2, 3], max: [3, 4, 3], points: 3 });
  });
});

describe('SeriesCache and a rewound run (resume_from)', () => {
  it('reads the run anew when its supersededRows changes, even with no more rows than it holds', async () => {
    // Attempt 1 logged steps 0..9; attempt 2 resumed from step 4 and logged 5..7 (values + 100): 8 current rows.
    let now = history(range(0, 10), range(0, 10));
    let reads = 0;
    const source = { history: async () => ((reads++), now) } as unknown as QuerySource;
    const cache = new SeriesCache(source);
    expect((await cache.get('r', 10, 0)).rows).toBe(10);
    now = history(range(0, 8), [...range(0, 5), 105, 106, 107], ['k'], 200);
    expect(cache.peek('r', 8, 3)).toBeNull();
    const s = await cache.get('r', 8, 3);
    expect(reads).toBe(2);
    expect(Array.from(s.values.a.subarray(0, s.rows))).toEqual([0, 1, 2, 3, 4, 105, 106, 107]);
    expect(cache.peek('r', 8, 3)).toBe(s);
  });
});
