// Downsampling of metric series for charts, shared by every place that holds
// the data: the daemon's history reader (ReadHistoryRequest.points), the
// shared PostgreSQL source and the dashboard's own cache. A metric's points,
// ordered by step (arrival order within a step), fall into `points` equal
// buckets by index; a bucket keeps its first point's step and time, the mean
// of its finite values, and their min and max, so a spike inside a bucket
// survives as the bucket's max. With no more than `points` points the series
// comes back whole, min = max = value.

/** One metric, downsampled or whole. `stored`: its points before downsampling. */
export interface Buckets {
  step: Float64Array;
  time: Float64Array;
  /** Mean of the bucket's finite values; NaN when it has none (or the point itself, whole). */
  mean: Float64Array;
  min: Float64Array;
  max: Float64Array;
  stored: number;
}

/** The points of one metric as they arrive, in growable columns. */
export class PointColumns {
  step = new Float64Array(256);
  time = new Float64Array(256);
  value = new Float64Array(256);
  n = 0;
  /** Steps never go down so far (the usual case: no sort needed). */
  sorted = true;

  push(step: number, time: number, value: number): void {
    if (this.n === this.step.length) this.grow();
    if (this.n > 0 && step < this.step[this.n - 1]) this.sorted = false;
    this.step[this.n] = step;
    this.time[this.n] = time;
    this.value[this.n++] = value;
  }

  private grow(): void {
    const cap = this.step.length * 2;
    const more = (a: Float64Array) => {
      const b = new Float64Array(cap);
      b.set(a);
      return b;
    };
    this.step = more(this.step);
    this.time = more(this.time);
    this.value = more(this.value);
  }
}

/** Buckets the collected points of one metric into at most `points` (≥ 1). */
export function bucketPoints(c: PointColumns, points: number): Buckets {
  const n = c.n;
  let { step, time, value } = c;
  if (!c.sorted) {
    const order = Uint32Array.from({ length: n }, (_, i) => i).sort((a, b) => c.step[a] - c.step[b] || a - b);
    step = Float64Array.from(order, (i) => c.step[i]);
    time = Float64Array.from(order, (i) => c.time[i]);
    value = Float64Array.from(order, (i) => c.value[i]);
  }
  if (n <= points) {
    const v = value.slice(0, n);
    return { step: step.slice(0, n), time: time.slice(0, n), mean: v, min: v, max: v, stored: n };
  }
  const b = Math.max(1, Math.floor(points));
  const out: Buckets = { step: new Float64Array(b), time: new Float64Array(b), mean: new Float64Array(b), min: new Float64Array(b), max: new Float64Array(b), stored: n };
  for (let k = 0; k < b; k++) {
    const from = Math.floor((k * n) / b), to = Math.floor(((k + 1) * n) / b);
    let sum = 0, cnt = 0, mn = Infinity, mx = -Infinity;
    for (let i = from; i < to; i++) {
      const v = value[i];
      if (v - v !== 0) continue; // NaN or ±Infinity
      sum += v;
      cnt++;
      if (v < mn) mn = v;
      if (v > mx) mx = v;
    }
    out.step[k] = step[from];
    out.time[k] = time[from];
    out.mean[k] = cnt ? sum / cnt : NaN;
    out.min[k] = cnt ? mn : NaN;
    out.max[k] = cnt ? mx : NaN;
  }
  return out;
}

/**
 * Collects the points of the wanted metrics (all when `wanted` is empty) from
 * columnar row batches: `keyNames` maps a batch's key ids to names.
 */
export class MetricCollector {
  readonly byKey = new Map<string, PointColumns>();
  private cols: Array<PointColumns | null> = [];

  constructor(private readonly wanted: ReadonlySet<string>) {}

  add(rows: number, steps: ArrayLike<number>, times: ArrayLike<number>, counts: ArrayLike<number>, keyIds: ArrayLike<number>, values: ArrayLike<number>, keyNames: readonly string[]): void {
    for (let k = this.cols.length; k < keyNames.length; k++) {
      const name = keyNames[k];
      if (this.wanted.size > 0 && !this.wanted.has(name)) {
        this.cols.push(null);
        continue;
      }
      let c = this.byKey.get(name);
      if (!c) this.byKey.set(name, (c = new PointColumns()));
      this.cols.push(c);
    }
    const cols = this.cols;
    let p = 0;
    for (let r = 0; r < rows; r++) {
      const s = steps[r], t = times[r];
      for (const end = p + counts[r]; p < end; p++) cols[keyIds[p]]?.push(s, t, values[p]);
    }
  }
}
