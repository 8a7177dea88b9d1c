// One rank's step progress, from the rows its run already logs: the last
// step and when it was first seen, and the recent seconds per step. Fed by
// the live run for every committed batch (a loop over the steps column, no
// allocation); nothing is added to the client's log().

/** How many recent step durations the median is taken over. */
const RING = 32;

export class StepProgress {
  /** The highest step seen, and the row time at which it first appeared (seconds since the epoch). */
  lastStep = -1;
  lastStepAt = 0;
  /** How many times the step moved forward. */
  advances = 0;
  private readonly ring = new Float64Array(RING);
  private filled = 0;
  private next = 0;

  /**
   * Rows of one batch: `steps[r]`, `times[r]` (the client's clock, seconds).
   * A row time ahead of `nowS` (another host's clock) counts as `nowS`.
   */
  observe(steps: Float64Array, times: Float64Array, rows: number, nowS: number): void {
    for (let r = 0; r < rows; r++) {
      const s = steps[r];
      if (s <= this.lastStep) continue; // the same step again, or a rewind: no progress
      const t = Math.min(times[r], nowS);
      if (this.lastStep >= 0 && t >= this.lastStepAt) {
        this.ring[this.next] = (t - this.lastStepAt) / (s - this.lastStep);
        this.next = (this.next + 1) % RING;
        if (this.filled < RING) this.filled++;
      }
      this.lastStep = s;
      this.lastStepAt = Math.max(t, this.lastStepAt);
      this.advances++;
    }
  }

  /**
   * Steps come at a steady pace: the 90th percentile of the recent step times
   * is at most 4 × their median. A training loop is steady; a run that logs in
   * bursts or now and then (steps never given, each log() its own step) is
   * not, and is never judged stalled on its pauses.
   */
  regular(): boolean {
    if (this.filled < 3) return false;
    const a = Array.from(this.ring.subarray(0, this.filled)).sort((x, y) => x - y);
    const med = a[a.length >> 1];
    const p90 = a[Math.min(a.length - 1, Math.floor(a.length * 0.9))];
    return p90 <= 4 * med && med > 0;
  }

  /** Median seconds per step over the recent steps; null with fewer than 3 measured. */
  medianStepS(): number | null {
    if (this.filled < 3) return null;
    const a = Array.from(this.ring.subarray(0, this.filled)).sort((x, y) => x - y);
    const m = a.length >> 1;
    return a.length % 2 ? a[m] : (a[m - 1] + a[m]) / 2;
  }
}

export function median(values: readonly number[]): number | null {
  if (values.length === 0) return null;
  const a = [...values].sort((x, y) => x - y);
  const m = a.length >> 1;
  return a.length % 2 ? a[m] : (a[m - 1] + a[m]) / 2;
}
