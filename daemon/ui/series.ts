// A run's history held by the dashboard server: rows in arrival order,
// columnar and growable, read once from the query source and then extended
// with only the new rows (a tail read) while the run logs. Charts, the live
// feed and group aggregates all read from here, so a million-row run is read
// from the store once, not once per chart.
import type { History, QuerySource } from '../query/index.js';

type Column = Float64Array | Uint32Array;
const f64 = (n: number) => new Float64Array(n);
const u32 = (n: number) => new Uint32Array(n);

/** A typed column that grows by doubling; `a` is valid up to `n`. */
export class Growable<T extends Column> {
  a: T;
  n = 0;
  constructor(private make: (n: number) => T, cap = 1024) {
    this.a = make(cap);
  }
  push(v: number): void {
    if (this.n === this.a.length) this.reserve(1);
    this.a[this.n++] = v;
  }
  /** Appends a whole column at once (a memcpy where the types match). */
  pushAll(v: ArrayLike<number>): void {
    this.reserve(v.length);
    this.a.set(v, this.n);
    this.n += v.length;
  }
  reserve(more: number): void {
    if (this.n + more <= this.a.length) return;
    let cap = Math.max(1, this.a.length * 2);
    while (cap < this.n + more) cap *= 2;
    const b = this.make(cap);
    b.set(this.a.subarray(0, this.n));
    this.a = b;
  }
}

/** One metric's points, in arrival order (row indices ascending). */
export interface KeySeries {
  rows: Growable<Uint32Array>;
  values: Growable<Float64Array>;
  /** Steps never go down along the series (the usual case: no sort needed). */
  sorted: boolean;
  lastStep: number;
}

export class RunSeries {
  readonly keys: string[] = [];
  private keyIndex = new Map<string, number>();
  readonly steps = new Growable(f64);
  readonly times = new Growable(f64);
  readonly writers = new Growable(u32);
  /** Row r's pairs are [start[r], start[r + 1]). */
  readonly start = new Growable(u32);
  readonly keyIds = new Growable(u32);
  readonly values = new Growable(f64);
  private perKey: KeySeries[] = [];
  /** Rows already split into perKey. */
  private indexedRows = 0;

  constructor() {
    this.start.push(0);
  }

  get rows(): number {
    return this.steps.n;
  }

  keyId(name: string): number | undefined {
    return this.keyIndex.get(name);
  }

  /** Appends rows of a History read from the store (its key ids are mapped by name). */
  append(h: History, fromRow = 0): void {
    const map = h.keys.map((k) => {
      let id = this.keyIndex.get(k);
      if (id === undefined) {
        id = this.keys.length;
        this.keys.push(k);
        this.keyIndex.set(k, id);
      }
      return id;
    });
    if (fromRow >= h.rows) return;
    this.steps.pushAll(h.steps.subarray(fromRow));
    this.times.pushAll(h.times.subarray(fromRow));
    this.writers.pushAll(h.writers.subarray(fromRow));
    const p0 = h.start[fromRow], p1 = h.start[h.rows];
    const ids = new Uint32Array(p1 - p0);
    for (let p = p0; p < p1; p++) ids[p - p0] = map[h.keyIds[p]];
    this.keyIds.pushAll(ids);
    this.values.pushAll(h.values.subarray(p0, p1));
    const base = this.start.a[this.start.n - 1] - p0;
    const starts = new Uint32Array(h.rows - fromRow);
    for (let r = fromRow; r < h.rows; r++) starts[r - fromRow] = h.start[r + 1] + base;
    this.start.pushAll(starts);
  }

  /** A metric's points (row indices and values), split out of the rows lazily: one counting pass, one filling pass. */
  series(keyId: number): KeySeries {
    if (this.indexedRows < this.rows) {
      const start = this.start.a, ids = this.keyIds.a, vals = this.values.a, steps = this.steps.a;
      const from = start[this.indexedRows], to = start[this.rows];
      const counts = new Uint32Array(this.keys.length);
      for (let p = from; p < to; p++) counts[ids[p]]++;
      for (let k = 0; k < counts.length; k++) {
        if (counts[k] === 0) continue;
        let s = this.perKey[k];
        if (!s) s = this.perKey[k] = { rows: new Growable(u32, 0), values: new Growable(f64, 0), sorted: true, lastStep: -Infinity };
        s.rows.reserve(counts[k]);
        s.values.reserve(counts[k]);
      }
      const perKey = this.perKey;
      for (let r = this.indexedRows; r < this.rows; r++) {
        const step = steps[r];
        for (let p = start[r]; p < start[r + 1]; p++) {
          const s = perKey[ids[p]];
          s.rows.a[s.rows.n++] = r;
          s.values.a[s.values.n++] = vals[p];
          if (step < s.lastStep) s.sorted = false;
          s.lastStep = step;
        }
      }
      this.indexedRows = this.rows;
    }
    return this.perKey[keyId] ?? { rows: new Growable(u32, 0), values: new Growable(f64, 0), sorted: true, lastStep: -Infinity };
  }

  /** Whether row r of the cache and row j of `h` look like the same stored row. */
  sameRow(r: number, h: History, j: number): boolean {
    return this.steps.a[r] === h.steps[j] && this.times.a[r] === h.times[j] && this.writers.a[r] === h.writers[j]
      && this.start.a[r + 1] - this.start.a[r] === h.start[j + 1] - h.start[j];
  }
}

interface Entry {
  id: string;
  series: RunSeries;
  /** The run's historyRows when last refreshed. */
  knownRows: number;
  lastUse: number;
  pending: Promise<RunSeries> | null;
  /** The run's supersededRows when its rows were read. */
  superseded: number;
}

/**
 * The cache of RunSeries, within a memory budget (least recently used go first).
 * refresh() brings a run up to `historyRows` rows: the first read takes the
 * whole history; later ones take a tail of the new rows plus an overlap, and
 * align it on the rows already held, because the daemon counts a row before
 * its batch reaches the log file that a tail read sees.
 */
export class SeriesCache {
  private entries = new Map<string, Entry>();
  /**
   * At most `maxRuns` runs (a group page holds all its ranks at once) and
   * about `maxPoints` stored points in all (a point costs about 30 bytes here,
   * its per-metric split included: 20 M is some 600 MB). The run in use always
   * stays, however large.
   */
  constructor(private source: QuerySource, private maxRuns = 1024, private maxPoints = 20_000_000) {}

  /** The run's series when the cache already holds it up to `historyRows` rows (no read); null otherwise. */
  peek(id: string, historyRows: number, superseded = 0): RunSeries | null {
    const e = this.entries.get(id);
    if (!e || e.pending || e.superseded !== superseded || e.knownRows < historyRows || e.series.rows < historyRows) return null;
    e.lastUse = Date.now();
    return e.series;
  }

  /** `superseded`: the run's metadata.supersededRows; when it changes, a rewind replaced rows the cache holds. */
  async get(id: string, historyRows: number, superseded = 0): Promise<RunSeries> {
    let e = this.entries.get(id);
    if (!e) {
      e = { id, series: new RunSeries(), knownRows: -1, lastUse: Date.now(), pending: null, superseded };
      this.entries.set(id, e);
      this.evict();
    }
    e.lastUse = Date.now();
    if (superseded !== e.superseded && !e.pending) {
      // A rewind (resume_from) superseded rows the cache may hold: read the run anew.
      e.series = new RunSeries();
      e.knownRows = -1;
      e.superseded = superseded;
    }
    if (e.knownRows >= historyRows && e.series.rows >= historyRows) return e.series;
    if (e.pending) return e.pending;
    const entry = e;
    const pending = this.load(entry, historyRows).finally(() => (entry.pending = null));
    entry.pending = pending;
    return pending;
  }

  /**
   * Several runs at once (a group page's ranks): those not held at all are read together where the source can
   * (QuerySource.histories: a few statements for the lot instead of a few per run), the rest as get() reads them.
   */
  async getMany(runs: Array<{ id: string; historyRows: number; superseded: number }>): Promise<RunSeries[]> {
    const seen = new Set<string>();
    const fresh = runs.filter((r) => !this.entries.has(r.id) && !seen.has(r.id) && seen.add(r.id));
    const source = this.source;
    if (fresh.length > 1 && source.histories) {
      const read = source.histories(fresh.map((r) => ({ id: r.id, rows: r.historyRows })));
      read.catch(() => {}); // each entry's pending answers for it
      for (const r of fresh) {
        const e: Entry = { id: r.id, series: new RunSeries(), knownRows: -1, lastUse: Date.now(), pending: null, superseded: r.superseded };
        e.pending = read.then((got) => {
          const h = got.get(r.id);
          if (!h) return this.load(e, r.historyRows); // not in the answer (removed meanwhile?): as get() would
          e.series.append(h);
          e.knownRows = Math.max(e.knownRows, r.historyRows);
          return e.series;
        }).finally(() => (e.pending = null));
        this.entries.set(r.id, e);
      }
      this.evict();
    }
    return Promise.all(runs.map((r) => this.get(r.id, r.historyRows, r.superseded)));
  }

  private async load(e: Entry, historyRows: number): Promise<RunSeries> {
    const s = e.series;
    if (s.rows === 0) {
      s.append(await this.source.history(e.id, {}));
    } else {
      const overlap = Math.min(s.rows, 64);
      let want = historyRows - s.rows + overlap;
      for (let attempt = 0; attempt < 4; attempt++) {
        const h = await this.source.history(e.id, { tailRows: want });
        const from = alignTail(s, h, overlap);
        if (from !== null) {
          s.append(h, from);
          break;
        }
        want *= 4; // the log grew past the overlap between the two reads: read more
      }
      if (s.rows < historyRows) {
        // Could not align (rows rewritten?): read it all again rather than show a gap.
        e.series = new RunSeries();
        e.series.append(await this.source.history(e.id, {}));
      }
    }
    e.knownRows = Math.max(e.knownRows, historyRows);
    // Evicted while loading? The caller still gets its answer; the next call reads again.
    setImmediate(() => this.evict());
    return e.series;
  }

  private evict(): void {
    const size = (e: Entry) => e.series.keyIds.n + e.series.rows;
    let total = 0;
    for (const e of this.entries.values()) total += size(e);
    const oldest = [...this.entries].filter(([, e]) => !e.pending).sort((a, b) => a[1].lastUse - b[1].lastUse);
    for (const [id, e] of oldest) {
      if (this.entries.size <= 1 || (this.entries.size <= this.maxRuns && total <= this.maxPoints)) break;
      this.entries.delete(id);
      total -= size(e);
    }
  }
}

/** Index in `h` of its first row that the cache does not hold, or null when the tail does not reach back to the cache's last rows. */
export function alignTail(s: RunSeries, h: History, overlap: number): number | null {
  const last = s.rows - 1;
  const probe = Math.min(overlap, 4);
  for (let j = h.rows - 1; j >= probe - 1; j--) {
    let ok = true;
    for (let d = 0; d < probe && ok; d++) ok = s.sameRow(last - d, h, j - d);
    if (ok) return j + 1;
  }
  return h.rows === 0 ? 0 : null;
}
