// One rank's step rate over time: its last step, sampled by the monitor
// every `everyS` seconds (the daemon's clock), in bounded memory. The newest
// RECENT samples are kept as taken; older ones move to a second list spaced
// at least `olderEveryS` apart, which doubles (dropping samples closer than
// that) whenever the list is full: the whole run stays covered, evenly, at a
// resolution that coarsens as it grows (a day at 12 min, in 120 samples). The
// rate between two kept samples is still exact: the steps made over the
// seconds between them, so a stall reads 0 and a slowdown shows at any age.
// Nothing here is fed by the client's log(): the step is the one the live run
// already keeps (progress.ts).
import type { StepRateSeries } from '../../src/health.js';

/** Seconds between two samples of a rank's step. */
export const RATE_EVERY_S = 5;
/** Samples kept per rank at most (two numbers each): RECENT as taken (10 min at 5 s), the rest older and spaced. */
export const RATE_MAX = 240;
const RECENT = 120;

const tenth = (x: number) => Math.round(x * 10) / 10;

interface Sample {
  at: number;
  step: number;
}

export class RateHistory {
  private older: Sample[] = [];
  private recent: Sample[] = [];
  private olderEveryS: number;
  /** The stored form, built again only when a sample was added (metadata is set every tick). */
  private encoded: StepRateSeries | null = null;

  constructor(private readonly everyS = RATE_EVERY_S, private readonly max = RATE_MAX, private readonly recentMax = RECENT) {
    this.olderEveryS = everyS;
  }

  get length(): number {
    return this.older.length + this.recent.length;
  }

  /** Takes a sample when `everyS` has passed since the last one; true when it did. A step of -1 (none yet) is not sampled. */
  sample(nowS: number, step: number): boolean {
    if (step < 0) return false;
    const last = this.recent[this.recent.length - 1] ?? null;
    if (last && nowS - last.at < this.everyS) return false;
    // The step never goes back (progress.ts keeps the highest seen), but a sample must not either.
    this.recent.push({ at: tenth(nowS), step: last ? Math.max(step, last.step) : step });
    if (this.recent.length > this.recentMax) this.age(this.recent.shift()!);
    this.encoded = null;
    return true;
  }

  /** A sample leaves the recent window: kept when far enough from the older one before it. */
  private age(s: Sample): void {
    const prev = this.older[this.older.length - 1];
    if (prev && s.at - prev.at < this.olderEveryS) return;
    this.older.push(s);
    if (this.older.length <= this.max - this.recentMax) return;
    this.olderEveryS *= 2;
    const kept: Sample[] = [this.older[0]];
    for (const x of this.older.slice(1)) if (x.at - kept[kept.length - 1].at >= this.olderEveryS) kept.push(x);
    this.older = kept;
  }

  /** The stored form (src/health.ts StepRateSeries), or null before the first sample. */
  series(): StepRateSeries | null {
    if (this.length === 0) return null;
    if (this.encoded) return this.encoded;
    const all = this.older.concat(this.recent);
    const dt: number[] = [];
    const ds: number[] = [];
    for (let i = 1; i < all.length; i++) {
      dt.push(tenth(all[i].at - all[i - 1].at));
      ds.push(all[i].step - all[i - 1].step);
    }
    this.encoded = { everyS: this.everyS, t0: all[0].at, s0: all[0].step, dt, ds };
    return this.encoded;
  }
}
