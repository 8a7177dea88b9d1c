// The rows a rewind (resume_from) superseded, for the run page's "show
// superseded rows" (GET /api/runs/{id}/history?superseded=1). The charts'
// own reads stay the latest timeline; these rows come from one read of the
// run with allAttempts, kept per run while its metadata.supersededRows (the
// rewind's generation) stays the same, only the superseded rows held, one
// RunSeries per attempt that logged them (two attempts may have logged the
// same steps, so they are never one line).
import type { QuerySource } from '../query/index.js';
import { RunNotFound } from '../query/index.js';
import { pickRows } from '../query/latest-timeline.js';
import { RunSeries } from './series.js';
import { metricSeries, type ChartSeries } from './downsample.js';
import { HttpError } from './params.js';

/** One earlier attempt's superseded points of a metric. */
export type SupersededSeries = ChartSeries & { attempt: number };

/** Runs whose superseded rows are held at once (a page shows one run's). */
const KEEP_RUNS = 8;

interface Held {
  generation: number;
  byAttempt: Promise<Map<number, RunSeries>>;
}

export class SupersededRows {
  private held = new Map<string, Held>();

  constructor(private readonly source: QuerySource) {}

  /**
   * Per metric of `keys`, a series per attempt whose rows of it a later
   * rewind superseded (none: the metric is left out). `generation`: the run's
   * metadata.supersededRows; 0 reads nothing.
   */
  async series(id: string, generation: number, keys: string[], points: number): Promise<Record<string, SupersededSeries[]>> {
    const out: Record<string, SupersededSeries[]> = Object.create(null);
    if (generation === 0) return out;
    const byAttempt = await this.rows(id, generation);
    for (const k of keys) {
      for (const [attempt, s] of byAttempt) {
        const kid = s.keyId(k);
        if (kid === undefined || s.series(kid).rows.n === 0) continue;
        (out[k] ??= []).push({ attempt, ...metricSeries(s, kid, points) });
      }
    }
    return out;
  }

  private rows(id: string, generation: number): Promise<Map<number, RunSeries>> {
    const hit = this.held.get(id);
    if (hit && hit.generation === generation) return hit.byAttempt;
    const byAttempt: Promise<Map<number, RunSeries>> = this.source.history(id, { allAttempts: true }).then((h) => {
      const rowsOf = new Map<number, number[]>();
      if (h.superseded && h.attempts) {
        for (let r = 0; r < h.rows; r++) {
          if (h.superseded[r]) (rowsOf.get(h.attempts[r]) ?? rowsOf.set(h.attempts[r], []).get(h.attempts[r])!).push(r);
        }
      }
      const out = new Map<number, RunSeries>();
      for (const [attempt, rows] of [...rowsOf].sort((a, b) => a[0] - b[0])) {
        const s = new RunSeries();
        s.append(pickRows(h, rows));
        out.set(attempt, s);
      }
      return out;
    }, (e: Error) => {
      if (this.held.get(id)?.byAttempt === byAttempt) this.held.delete(id);
      if (e instanceof RunNotFound) throw new HttpError(404, e.message);
      throw e;
    });
    this.held.delete(id);
    this.held.set(id, { generation, byAttempt });
    if (this.held.size > KEEP_RUNS) this.held.delete(this.held.keys().next().value!);
    return byAttempt;
  }
}
