// Some metrics of many runs: a group page's ranks, the compare page's lines. A page of 1 024 ranks draws a few
// of their 100 metrics; reading every metric of every rank into the whole-run cache (series.ts) to draw three is
// most of its first view. Here a run is held metric by metric: each metric asked is read for all the runs that
// lack it in one call of the source (QuerySource.histories with `keys`), and the list of a group's metrics comes
// from the key dictionaries alone (QuerySource.metricNames). A run the whole-run cache already holds (its run
// page was open) is served from there. Sources without those reads (the node's daemon) go through the whole-run
// cache as before.
import type { QuerySource } from '../query/source.js';
import { RunSeries, type SeriesCache } from './series.js';

export interface RunRef { id: string; historyRows: number; superseded: number }

/** A run as a page sees it: its metric names, and the series that holds a metric (undefined: not asked, or none). */
export interface HeldRun { names: string[]; of(key: string): RunSeries | undefined }

interface Part {
  series: RunSeries;
  /** The run's historyRows and supersededRows when read: older than the listing's, the part is read again. */
  rows: number;
  superseded: number;
  pending: Promise<void> | null;
}

interface Entry {
  names: string[];
  namesRows: number;
  namesSuperseded: number;
  parts: Map<string, Part>;
  lastUse: number;
  points: number;
}

const stale = (rows: number, superseded: number, r: RunRef) => rows < r.historyRows || superseded !== r.superseded;

export class GroupSeries {
  private entries = new Map<string, Entry>();

  /**
   * At most `maxRuns` runs and about `maxPoints` points held (each about 30 bytes with its split): least recently
   * used first out. A call's answer keeps what it holds whatever is evicted after.
   */
  constructor(private source: QuerySource, private whole: SeriesCache, private maxRuns = 8192, private maxPoints = 10_000_000) {}

  /** `keys` of `runs` (none: their names only), each run up to its listed rows. */
  async get(runs: RunRef[], keys: string[]): Promise<HeldRun[]> {
    const src = this.source;
    if (!src.histories || !src.metricNames) {
      const held = await this.whole.getMany(runs);
      return held.map((s) => ({ names: s.keys, of: (k: string) => (s.keyId(k) === undefined ? undefined : s) }));
    }
    const now = Date.now();
    const out: Array<HeldRun | null> = runs.map((r) => {
      const s = this.whole.peek(r.id, r.historyRows, r.superseded);
      return s ? { names: s.keys, of: (k: string) => (s.keyId(k) === undefined ? undefined : s) } : null;
    });
    const mine = runs.filter((_, i) => out[i] === null);
    const entry = (id: string): Entry => {
      let e = this.entries.get(id);
      if (!e) this.entries.set(id, (e = { names: [], namesRows: -1, namesSuperseded: 0, parts: new Map(), lastUse: now, points: 0 }));
      e.lastUse = now;
      return e;
    };
    const waits: Promise<void>[] = [];
    for (const k of new Set(keys)) {
      const reading: RunRef[] = [];
      for (const r of mine) {
        const part = entry(r.id).parts.get(k);
        if (part?.pending) waits.push(part.pending);
        else if (!part || stale(part.rows, part.superseded, r)) reading.push(r);
      }
      if (reading.length > 0) waits.push(this.read(reading, k));
    }
    await Promise.all(waits);
    // Names: from the reads above when they were fresh enough, else from the key dictionaries.
    const unnamed = mine.filter((r) => stale(entry(r.id).namesRows, entry(r.id).namesSuperseded, r));
    if (unnamed.length > 0) {
      const names = await src.metricNames(unnamed.map((r) => r.id));
      for (const r of unnamed) this.name(entry(r.id), names.get(r.id) ?? [], r);
    }
    const answer = runs.map((r, i) => {
      if (out[i]) return out[i]!;
      const e = entry(r.id);
      const parts = new Map([...e.parts].filter(([k]) => keys.includes(k)).map(([k, p]) => [k, p.series]));
      return { names: e.names, of: (k: string) => { const s = parts.get(k); return s && s.keyId(k) !== undefined ? s : undefined; } };
    });
    this.evict();
    return answer;
  }

  /** One metric of these runs, in one call of the source. */
  private read(runs: RunRef[], key: string): Promise<void> {
    const got = this.source.histories!(runs.map((r) => ({ id: r.id, rows: r.historyRows })), { keys: [key] });
    const pending = got.then((hs) => {
      for (const r of runs) {
        const e = this.entries.get(r.id);
        const part = e?.parts.get(key);
        if (!e || !part || part.pending !== pending) continue; // evicted, or read again meanwhile
        const h = hs.get(r.id);
        const s = new RunSeries();
        if (h) s.append(h);
        e.points += s.keyIds.n + s.rows - (part.series.keyIds.n + part.series.rows);
        Object.assign(part, { series: s, rows: r.historyRows, superseded: r.superseded, pending: null });
        this.name(e, h?.keys ?? [], r);
      }
    }, (err) => {
      for (const r of runs) {
        const part = this.entries.get(r.id)?.parts.get(key);
        if (part?.pending === pending) this.entries.get(r.id)!.parts.delete(key); // the next call reads it again
      }
      throw err;
    });
    for (const r of runs) {
      const e = this.entries.get(r.id)!;
      const part = e.parts.get(key);
      if (part) part.pending = pending;
      else e.parts.set(key, { series: new RunSeries(), rows: -1, superseded: r.superseded, pending });
    }
    return pending;
  }

  private name(e: Entry, names: string[], r: RunRef): void {
    if (!stale(e.namesRows, e.namesSuperseded, r)) return;
    e.names = names;
    e.namesRows = r.historyRows;
    e.namesSuperseded = r.superseded;
  }

  private evict(): void {
    let total = 0;
    for (const e of this.entries.values()) total += e.points;
    if (this.entries.size <= this.maxRuns && total <= this.maxPoints) return;
    const oldest = [...this.entries].filter(([, e]) => ![...e.parts.values()].some((p) => p.pending)).sort((a, b) => a[1].lastUse - b[1].lastUse);
    for (const [id, e] of oldest) {
      if (this.entries.size <= this.maxRuns && total <= this.maxPoints) break;
      this.entries.delete(id);
      total -= e.points;
    }
  }
}
