// Handler bookkeeping that must not block: per-key last/min/max/count over a
// run's history, kept in typed arrays indexed by run-global key id.
import type { HistoryBatch } from './store/format.js';
import { jsonNumber } from '../src/json.js';

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

  /** `{key: last value}` for every key seen, non-finite values as strings. */
  lastValues(names: readonly string[]): Record<string, number | string> {
    const out: Record<string, number | string> = {};
    for (let k = 0; k < this.size && k < names.length; k++) if (this.count[k] > 0) out[names[k]] = jsonNumber(this.last[k]);
    return out;
  }

  stats(names: readonly string[]): Record<string, { last: number | string; min: number | string | null; max: number | string | null; count: number }> {
    const out: Record<string, { last: number | string; min: number | string | null; max: number | string | null; count: number }> = {};
    for (let k = 0; k < this.size && k < names.length; k++) {
      if (this.count[k] === 0) continue;
      const finiteSeen = this.min[k] !== Infinity || this.max[k] !== -Infinity;
      out[names[k]] = {
        last: jsonNumber(this.last[k]),
        min: finiteSeen ? jsonNumber(this.min[k]) : null,
        max: finiteSeen ? jsonNumber(this.max[k]) : null,
        count: this.count[k],
      };
    }
    return out;
  }
}
