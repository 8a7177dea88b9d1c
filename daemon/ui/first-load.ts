// First loads: a run's chart series and metric names asked of the query
// source, downsampled where the data is (HistoryQuery.points), rather than
// reading the whole history (a million points) into the series cache first.
// The cache still serves every run it holds (a live run, once its feed has
// read it). Charts of one run asked for together — a run page opens a
// handful at once — share one read of the source.
import type { QuerySource } from '../query/index.js';
import { seriesFromBuckets, type ChartSeries } from './downsample.js';

/** How long a read waits for more charts of the same run to join it. */
const BATCH_MS = 4;
/** Answers of finished runs kept (they never change); about 40 kB each at 1000 points. */
const KEEP_ANSWERS = 256;
const KEEP_KEY_LISTS = 64;
/**
 * A run with at most this many metrics is read whole (every metric
 * downsampled) by the first chart that asks: its other charts, asking a
 * moment later, then share that read instead of starting another.
 */
const READ_ALL_UP_TO = 64;
/** The metrics a run page draws when it names none. */
const FIRST_METRICS = 100;

interface Batch {
  /** Every metric of the run (READ_ALL_UP_TO), or only `keys`. */
  all: boolean;
  keys: Set<string>;
  answer: Promise<Map<string, ChartSeries>>;
}

export class FirstLoads {
  private open = new Map<string, Batch>();
  /** Reads of every metric under way, which any chart of that run can wait on. */
  private reading = new Map<string, Batch>();
  private answers = new Map<string, ChartSeries>();
  private keyLists = new Map<string, Promise<string[] | null>>();
  /** How many metrics a run had at `${id}\0${rows}`, once known. */
  private keyCounts = new Map<string, number>();

  constructor(private readonly source: QuerySource) {}

  /**
   * These metrics of a run (none: its first 100), about `points` each. `final`:
   * the run has ended, so its answers can be kept. `rows` (its historyRows)
   * tells one state of a live run from the next.
   */
  async series(id: string, rows: number, keys: string[], points: number, final: boolean): Promise<Map<string, ChartSeries>> {
    if (keys.length === 0) {
      // Its first 100 metrics, named: a read of every metric of a run with 200 000 would hold them all at once.
      keys = ((await this.keyNames(id, rows)) ?? []).slice(0, FIRST_METRICS);
      if (keys.length === 0) return new Map();
    }
    const tag = `${id}\0${rows}\0${points}`;
    const out = new Map<string, ChartSeries>();
    const missing = final ? keys.filter((k) => {
      const hit = this.answers.get(`${tag}\0${k}`);
      if (hit) out.set(k, hit);
      return !hit;
    }) : keys;
    if (missing.length === 0) return out;
    let batch = this.reading.get(tag) ?? this.open.get(tag);
    if (!batch) {
      const count = this.keyCounts.get(`${id}\0${rows}`);
      const b: Batch = { all: count !== undefined && count <= READ_ALL_UP_TO, keys: new Set(), answer: null as unknown as Batch['answer'] };
      b.answer = new Promise<void>((r) => setTimeout(r, BATCH_MS)).then(async () => {
        this.open.delete(tag); // later charts start the next read, or wait on this one when it reads all
        if (b.all) this.reading.set(tag, b);
        try {
          return seriesFromBuckets(await this.source.history(id, { keys: b.all ? [] : [...b.keys], points }));
        } finally {
          if (this.reading.get(tag) === b) this.reading.delete(tag);
        }
      });
      this.open.set(tag, (batch = b));
    }
    for (const k of missing) batch.keys.add(k);
    const got = await batch.answer;
    for (const k of missing) {
      const s = got.get(k);
      if (s) out.set(k, s);
    }
    if (final) for (const [k, s] of got) this.keep(`${tag}\0${k}`, s);
    return out;
  }

  /**
   * A run's metric names without reading its history: the key dictionary
   * comes with a read of its last row. Null when that says nothing (no row
   * readable): the caller reads the history instead.
   */
  keyNames(id: string, rows: number): Promise<string[] | null> {
    const tag = `${id}\0${rows}`;
    let p = this.keyLists.get(tag);
    if (!p) {
      p = this.source.history(id, { tailRows: 1 }).then((h) => {
        this.keyCounts.set(tag, h.keys.length);
        if (this.keyCounts.size > KEEP_KEY_LISTS) this.keyCounts.delete(this.keyCounts.keys().next().value!);
        return h.keys.length > 0 || rows === 0 ? h.keys : null;
      });
      p.catch(() => this.keyLists.delete(tag));
      this.keyLists.set(tag, p);
      if (this.keyLists.size > KEEP_KEY_LISTS) this.keyLists.delete(this.keyLists.keys().next().value!);
    }
    return p;
  }

  private keep(k: string, s: ChartSeries): void {
    this.answers.set(k, s);
    if (this.answers.size > KEEP_ANSWERS) this.answers.delete(this.answers.keys().next().value!);
  }
}
