// Some metrics of many runs: a group page's ranks, the compare page's lines. A page of 1 024 ranks draws a few
// of their 100 metrics; reading every metric of every rank into the whole-run cache (series.ts) to draw three is
// most of its first view. Here a run is held metric by metric: the metrics a call asks are read for all the runs
// that lack one of them in one call of the source (QuerySource.histories with `keys`), and the list of a group's metrics comes
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
}

/** Points an entry holds (a series that holds several of its metrics counted once). */
const pointsOf = (e: Entry) => {
  let n = 0;
  for (const s of new Set([...e.parts.values()].map((p) => p.series))) n += s.keyIds.n + s.rows;
  return n;
};

/** How long a read waits for more calls' metrics to join it (a page opens its charts together). */
const BATCH_MS = 10;

interface Batch { runs: Map<string, RunRef>; keys: Set<string>; done: Promise<void> }

const stale = (rows: number, superseded: number, r: RunRef) => rows < r.historyRows || superseded !== r.superseded;

export class GroupSeries {
  private entries = new Map<string, Entry>();
  /** The read that calls are joining now (read()). */
  private batch: Batch | null = null;

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
      if (!e) this.entries.set(id, (e = { names: [], namesRows: -1, namesSuperseded: 0, parts: new Map(), lastUse: now }));
      e.lastUse = now;
      return e;
    };
    // The runs lacking any asked metric (or holding it older than listed), read in one call for every metric one
    // of them lacks: however many metrics a call asks, one read of the source. Metrics under way are waited for.
    const waits = new Set<Promise<void>>();
    const asked = new Set(keys);
    const wanted = [...asked];
    const need = new Set<string>();
    const reading: RunRef[] = [];
    for (const r of mine) {
      const e = entry(r.id);
      let lacks = false;
      for (const k of wanted) {
        const part = e.parts.get(k);
        if (part?.pending) waits.add(part.pending);
        else if (!part || stale(part.rows, part.superseded, r)) (need.add(k), (lacks = true));
      }
      if (lacks) reading.push(r);
    }
    if (reading.length > 0) waits.add(this.read(reading, [...need]));
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
      const parts = new Map([...e.parts].filter(([k]) => asked.has(k)).map(([k, p]) => [k, p.series]));
      return { names: e.names, of: (k: string) => { const s = parts.get(k); return s && s.keyId(k) !== undefined ? s : undefined; } };
    });
    this.evict();
    return answer;
  }

  /**
   * These metrics of these runs, in the next read of the source: reads asked within BATCH_MS of each other (a
   * page's charts, each its own call) are one call, for every run and metric any of them asked.
   */
  private read(runs: RunRef[], keys: string[]): Promise<void> {
    let b = this.batch;
    if (!b) {
      const nb: Batch = (b = this.batch = { runs: new Map(), keys: new Set(), done: null as unknown as Promise<void> });
      nb.done = new Promise<void>((r) => setTimeout(r, BATCH_MS)).then(() => {
        if (this.batch === nb) this.batch = null;
        return this.readNow([...nb.runs.values()], [...nb.keys], nb.done);
      });
    }
    for (const r of runs) b.runs.set(r.id, r);
    for (const k of keys) b.keys.add(k);
    for (const r of runs) {
      const e = this.entries.get(r.id)!;
      for (const k of keys) {
        const part = e.parts.get(k);
        if (part) part.pending = b.done;
        else e.parts.set(k, { series: new RunSeries(), rows: -1, superseded: r.superseded, pending: b.done });
      }
    }
    return b.done;
  }

  /** One call of the source; a run's series holds every metric read, each a part of it. */
  private async readNow(runs: RunRef[], keys: string[], pending: Promise<void>): Promise<void> {
    const got = this.source.histories!(runs.map((r) => ({ id: r.id, rows: r.historyRows })), { keys });
    await got.then((hs) => {
      for (const r of runs) {
        const e = this.entries.get(r.id);
        if (!e) continue; // evicted meanwhile
        const h = hs.get(r.id);
        const s = new RunSeries();
        if (h) s.append(h);
        for (const k of keys) {
          const part = e.parts.get(k);
          if (!part || part.pending !== pending) continue; // read again meanwhile
          Object.assign(part, { series: s, rows: r.historyRows, superseded: r.superseded, pending: null });
        }
        this.name(e, h?.keys ?? [], r);
      }
    }, (err) => {
      for (const r of runs) {
        const e = this.entries.get(r.id);
        for (const k of keys) if (e?.parts.get(k)?.pending === pending) e.parts.delete(k); // the next call reads it again
      }
      throw err;
    });
  }

  private name(e: Entry, names: string[], r: RunRef): void {
    if (!stale(e.namesRows, e.namesSuperseded, r)) return;
    e.names = names;
    e.namesRows = r.historyRows;
    e.namesSuperseded = r.superseded;
  }

  private evict(): void {
    const sizes = new Map<string, number>();
    let total = 0;
    for (const [id, e] of this.entries) {
      const n = pointsOf(e);
      sizes.set(id, n);
      total += n;
    }
    if (this.entries.size <= this.maxRuns && total <= this.maxPoints) return;
    const oldest = [...this.entries].filter(([, e]) => ![...e.parts.values()].some((p) => p.pending)).sort((a, b) => a[1].lastUse - b[1].lastUse);
    for (const [id] of oldest) {
      if (this.entries.size <= this.maxRuns && total <= this.maxPoints) break;
      this.entries.delete(id);
      total -= sizes.get(id)!;
    }
  }
}
