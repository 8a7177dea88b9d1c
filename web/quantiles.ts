// A histogram's quantiles, for the distribution chart (TensorBoard's
// "distributions"): per step, the values below which 0, 7, 16, 31, 50, 69,
// 84, 93 and 100 % of the counts lie, read off the cumulative counts with the
// values spread evenly inside each bin. No DOM: tested in Node.

/** The quantiles drawn, outermost band first; the median is the line. */
export const QUANTILES = [0, 0.0668, 0.1587, 0.3085, 0.5, 0.6915, 0.8413, 0.9332, 1];

/**
 * The values at `qs` (ascending, 0..1) of a histogram, written into `out`
 * at `at`, `at + stride`, …. An empty histogram gives NaN. One pass over the bins.
 */
export function quantilesInto(counts: ArrayLike<number>, edges: ArrayLike<number>, qs: readonly number[], out: Float64Array, at: number, stride: number): void {
  const n = counts.length;
  let total = 0;
  let first = -1, last = -1;
  for (let i = 0; i < n; i++) {
    const c = counts[i];
    if (c > 0) {
      total += c;
      if (first < 0) first = i;
      last = i;
    }
  }
  if (total <= 0) {
    for (let j = 0; j < qs.length; j++) out[at + j * stride] = NaN;
    return;
  }
  let bin = first, below = 0; // counts in bins before `bin`
  for (let j = 0; j < qs.length; j++) {
    const q = qs[j];
    let v: number;
    if (q <= 0) v = edges[first];
    else if (q >= 1) v = edges[last + 1];
    else {
      const target = q * total;
      while (bin < last && below + counts[bin] < target) below += counts[bin++];
      const c = counts[bin];
      const f = c > 0 ? Math.min(1, Math.max(0, (target - below) / c)) : 0;
      v = edges[bin] + f * (edges[bin + 1] - edges[bin]);
    }
    out[at + j * stride] = v;
  }
}

export interface HistogramAt { step: number; counts: ArrayLike<number>; edges: ArrayLike<number> }

/** The distribution over steps: steps ascending (one histogram per step, the last stored kept) and `values[s * qs.length + j]`. */
export interface Distribution { steps: Float64Array; values: Float64Array; qs: readonly number[]; min: number; max: number }

export function distribution(hists: readonly HistogramAt[], qs: readonly number[] = QUANTILES): Distribution {
  const byStep = new Map<number, HistogramAt>();
  for (const x of hists) byStep.set(x.step, x);
  const ordered = [...byStep.values()].sort((a, b) => a.step - b.step);
  const k = qs.length;
  const steps = new Float64Array(ordered.length);
  const values = new Float64Array(ordered.length * k);
  let min = Infinity, max = -Infinity;
  for (let s = 0; s < ordered.length; s++) {
    steps[s] = ordered[s].step;
    quantilesInto(ordered[s].counts, ordered[s].edges, qs, values, s * k, 1);
    const lo = values[s * k], hi = values[s * k + k - 1];
    if (lo < min) min = lo;
    if (hi > max) max = hi;
  }
  return { steps, values, qs, min, max };
}
