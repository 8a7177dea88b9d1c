// TensorBoard's smoothing, kept apart from the DOM so that it can be tested in Node.

/**
 * An exponential moving average with weight w, debiased as TensorBoard does:
 * the running value starts at 0 and is divided by 1 - w^n (n finite points
 * so far), so the first points are not pulled towards 0. Non-finite points
 * and gaps (null) pass through and do not move the average.
 */
export function ema(values: Array<number | null>, w: number): Array<number | null> {
  if (w <= 0) return values;
  let last = 0, weight = 0;
  return values.map((v) => {
    if (v === null || !Number.isFinite(v)) return v;
    last = last * w + (1 - w) * v;
    weight = weight * w + (1 - w);
    return last / weight;
  });
}
