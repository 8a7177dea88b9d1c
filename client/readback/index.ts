// Reading runs back from TypeScript (issue 33): the node's runs as plain
// objects, and a run's full history as columns (typed arrays, NaN where a
// row has no value), every stored row, unsampled. The Python side is
// logd.Api (python/logd/readback/); docs/api.md, "Reading runs back".
//
//   import { api } from 'logd';
//   const runs = await api.runs({ project: 'sweep' });
//   const h = await api.history(runs[0].id, { keys: ['loss'] });   // h.step, h.time, h.columns.loss
import type { Connection } from '../connection.js';
import { connectionFor } from '../connection.js';
import { checkedDaemon } from '../stale-service.js';
import { readHistory } from '../history.js';
import type { RunInfo } from '../../src/wire.js';
import { startReadsServer } from './shared.js';

/** A run as the daemon lists it, its JSON fields parsed. */
export interface RunRecord {
  id: string; name: string; project: string; group: string; jobType: string; tags: string[]; notes: string;
  state: string; stateReason: string; exitCode: number | null;
  /** Seconds since the epoch; finishedAt 0 while it runs. */
  createdAt: number; finishedAt: number;
  rows: number; rank: number | null; node: string | null;
  config: Record<string, unknown>; summary: Record<string, unknown>; metadata: Record<string, unknown>;
}

/** A run's history as columns: row i is step[i], time[i] and columns[key][i] (NaN: the row has no value for key). */
export interface HistoryColumns {
  rows: number;
  keys: string[];
  step: Float64Array;
  time: Float64Array;
  columns: Record<string, Float64Array>;
}

let conn: Connection | null = null;

async function connection(): Promise<Connection> {
  if (conn) return conn;
  const addr = await checkedDaemon({ autoStart: true, timeoutMs: 10_000, reader: true });
  if (!addr) throw new Error('logd: no daemon could be found or started to read runs from; start one with `logd serve`');
  conn = connectionFor(addr);
  return conn;
}

function record(r: RunInfo): RunRecord {
  const parse = (s: string) => {
    try {
      return JSON.parse(s || '{}') as Record<string, unknown>;
    } catch {
      return {};
    }
  };
  const metadata = parse(r.metadataJson);
  const rank = (metadata.rank as { rank?: number } | null | undefined)?.rank;
  return {
    id: r.id, name: r.name, project: r.project, group: r.group, jobType: r.jobType, tags: r.tags, notes: r.notes,
    state: r.state, stateReason: r.stateReason, exitCode: r.state === 'running' || r.state === 'finishing' ? null : r.exitCode,
    createdAt: r.createdAt, finishedAt: r.finishedAt, rows: Number(r.historyRows), rank: typeof rank === 'number' && rank >= 0 ? rank : null,
    node: (metadata.node ?? metadata.host ?? null) as string | null, config: parse(r.configJson), summary: parse(r.summaryJson), metadata,
  };
}

/** The runs of this node's store, newest first (every one, unless limit). */
/**
 * The node's runs, newest first. `filter`: only runs where every term holds, as `logd runs --filter` reads it
 * ("lr < 0.01; state = crashed"); a term that does not parse rejects with the daemon's INVALID_ARGUMENT, saying where.
 */
type RunsFilter = { project?: string; group?: string; state?: string; tag?: string; search?: string; limit?: number; filter?: string };

async function runsOn(c: Connection, filter: RunsFilter = {}): Promise<RunRecord[]> {
  const out: RunRecord[] = [];
  for (let offset = 0; ;) {
    const want = filter.limit === undefined ? 1000 : Math.min(1000, filter.limit - out.length);
    if (want <= 0) break;
    const page = await c.unary<unknown, { runs: RunInfo[]; total: number; nextOffset: number }>('listRuns',
      { project: filter.project ?? '', group: filter.group ?? '', state: filter.state ?? '', tag: filter.tag ?? '', text: filter.search ?? '', limit: want, offset, filter: filter.filter ?? '' }, 60_000);
    out.push(...page.runs.map(record));
    offset = Number(page.nextOffset) || offset + page.runs.length;
    if (page.runs.length === 0 || offset >= Number(page.total)) break;
  }
  return out;
}

/** One run; rejects naming the id when there is none. */
async function runOn(c: Connection, id: string): Promise<RunRecord> {
  return record(await c.unary<unknown, RunInfo>('getRun', { runId: id }, 30_000));
}

/** Every stored row of a run, unsampled, as columns; `keys` limits the metrics (a key no row has is an all-NaN column). */
async function historyOn(c: Connection, id: string, opts: { keys?: string[]; timeoutMs?: number } = {}): Promise<HistoryColumns> {
  const h = await readHistory(c, id, { keys: opts.keys, timeoutMs: opts.timeoutMs });
  const keys = opts.keys && opts.keys.length ? opts.keys : h.keys;
  const index = new Map(h.keys.map((k, i) => [k, i]));
  const columns: Record<string, Float64Array> = Object.create(null) as Record<string, Float64Array>;
  const byId: Array<Float64Array | undefined> = [];
  for (const k of keys) {
    const col = new Float64Array(h.rows).fill(NaN);
    columns[k] = col;
    const i = index.get(k);
    if (i !== undefined) byId[i] = col;
  }
  for (let r = 0; r < h.rows; r++) {
    for (let p = h.start[r]; p < h.start[r + 1]; p++) {
      const col = byId[h.keyIds[p]];
      if (col) col[r] = h.values[p];
    }
  }
  return { rows: h.rows, keys, step: h.steps, time: h.times, columns };
}

/** A stored row as an object: `_step`, `_time`, and exactly the metrics that row logged (a NaN logged is NaN). */
export type HistoryRow = { _step: number; _time: number } & Record<string, number>;

/** Every stored row of a run as an object (a convenience for small runs; history() is the fast way). */
async function historyRowsOn(c: Connection, id: string, opts: { keys?: string[]; timeoutMs?: number } = {}): Promise<HistoryRow[]> {
  const h = await readHistory(c, id, { keys: opts.keys, timeoutMs: opts.timeoutMs });
  const wanted = opts.keys && opts.keys.length ? new Set(opts.keys) : null;
  const out: HistoryRow[] = new Array(h.rows);
  for (let r = 0; r < h.rows; r++) {
    const row = { _step: h.steps[r], _time: h.times[r] } as HistoryRow;
    for (let p = h.start[r]; p < h.start[r + 1]; p++) {
      const k = h.keys[h.keyIds[p]];
      if (!wanted || wanted.has(k)) row[k] = h.values[p];
    }
    out[r] = row;
  }
  return out;
}

/** The package historyArrow() builds its table with: the program's own, not a dependency of logd's. */
const ARROW = 'apache-arrow';

/**
 * A run's history as an Apache Arrow table (the `apache-arrow` package, which the program installs: logd does not
 * depend on it): `_step`, `_time` and one Float64 column per metric, the same columns as history(), unsampled.
 */
async function historyArrowOn(c: Connection, id: string, opts: { keys?: string[]; timeoutMs?: number } = {}): Promise<unknown> {
  let arrow: { tableFromArrays: (cols: Record<string, Float64Array>) => unknown };
  try {
    arrow = (await import(ARROW)) as typeof arrow;
  } catch (e) {
    throw new Error(`logd: api.historyArrow() needs the apache-arrow package (npm install apache-arrow): ${(e as Error).message.split('\n')[0]}`);
  }
  const h = await historyOn(c, id, opts);
  const cols: Record<string, Float64Array> = Object.create(null) as Record<string, Float64Array>;
  cols._step = h.step;
  cols._time = h.time;
  for (const k of h.keys) cols[k] = h.columns[k];
  return arrow.tableFromArrays(cols);
}

/** The reads of one store, through one connection. */
export interface Reader {
  runs(filter?: RunsFilter): Promise<RunRecord[]>;
  run(id: string): Promise<RunRecord>;
  history(id: string, opts?: { keys?: string[]; timeoutMs?: number }): Promise<HistoryColumns>;
  historyArrow(id: string, opts?: { keys?: string[]; timeoutMs?: number }): Promise<unknown>;
  historyRows(id: string, opts?: { keys?: string[]; timeoutMs?: number }): Promise<HistoryRow[]>;
}

function readerOn(conn: () => Promise<Connection>): Reader {
  return {
    runs: async (filter) => runsOn(await conn(), filter),
    run: async (id) => runOn(await conn(), id),
    history: async (id, opts) => historyOn(await conn(), id, opts),
    historyArrow: async (id, opts) => historyArrowOn(await conn(), id, opts),
    historyRows: async (id, opts) => historyRowsOn(await conn(), id, opts),
  };
}

/** The shared store's reader (`api.shared()`): the same reads, and `close()`, which ends its reader process. */
export interface SharedReader extends Reader {
  /** Where it reads: the URL, its password masked. */
  where: string;
  close(): Promise<void>;
}

/**
 * The shared store every node uploads to (`url`, or LOGD_STORE_URL), read through a reader process of this
 * program's own (`logd reads-server`, daemon/shared-reads), not the node's daemon, as Python's
 * logd.Api(store=...) does. The URL goes to it in its environment, never on its command line. It ends with
 * close(), or when this process ends.
 */
async function shared(url = process.env.LOGD_STORE_URL ?? ''): Promise<SharedReader> {
  if (!url) throw new Error('logd: api.shared() needs the shared store\'s URL (postgres://…), or LOGD_STORE_URL');
  const { target, token, where, close } = await startReadsServer(url);
  let c: Connection | null = null;
  return { ...readerOn(async () => (c ??= connectionFor({ target, token }))), where, close };
}

/** Reading runs back: `api.runs()`, `api.run(id)`, `api.history(id)`, `api.historyArrow(id)`, `api.historyRows(id)` of the node's store; `api.shared(url)` the shared store's. */
export const api = { ...readerOn(connection), shared };
