// Downsampled history answers (HistoryQuery.points) in the query layer: the
// shape every source returns, and the bucketing of a whole History for the
// sources (or an older daemon) that read rows rather than buckets.
import { MetricCollector, bucketPoints } from '../../src/downsample.js';
import type { History } from './source.js';

/** Buckets each wanted metric of `h` (all when `keys` is empty) into about `points`, as a source answers `points`. */
export function downsampleHistory(h: History, keys: readonly string[], points: number): History {
  const c = new MetricCollector(new Set(keys));
  const counts = new Uint32Array(h.rows);
  for (let r = 0; r < h.rows; r++) counts[r] = h.start[r + 1] - h.start[r];
  c.add(h.rows, h.steps, h.times, counts, h.keyIds, h.values, h.keys);
  const parts = [...c.byKey].filter(([, cols]) => cols.n > 0).map(([name, cols]) => ({ name, b: bucketPoints(cols, points) }));
  let n = 0;
  for (const p of parts) n += p.b.step.length;
  const out: History = {
    keys: parts.map((p) => p.name), rows: n, steps: new Float64Array(n), times: new Float64Array(n), writers: new Uint32Array(n),
    start: Uint32Array.from({ length: n + 1 }, (_, i) => i), keyIds: new Uint32Array(n), values: new Float64Array(n),
    buckets: { min: new Float64Array(n), max: new Float64Array(n), stored: parts.map((p) => p.b.stored) },
  };
  let o = 0;
  parts.forEach((p, k) => {
    out.steps.set(p.b.step, o);
    out.times.set(p.b.time, o);
    out.values.set(p.b.mean, o);
    out.buckets!.min.set(p.b.min, o);
    out.buckets!.max.set(p.b.max, o);
    out.keyIds.fill(k, o, o + p.b.step.length);
    o += p.b.step.length;
  });
  return out;
}
