// The query layer: the questions every reader asks (the CLI's runs, show and
// export; the dashboard), behind one interface with two sources — the node's
// local store, read through its daemon, and the shared PostgreSQL store that
// the uploaders of every node fill. A reader takes a QuerySource and never
// knows which one it holds.
import type { RunInfo } from '../../src/wire.js';
import type { History } from '../../client/history.js';

export type { RunInfo, History };

/** Filters of a run listing. Empty strings and missing fields mean "any". */
export interface RunFilter {
  project?: string;
  group?: string;
  state?: string;
  /** Runs carrying this tag. */
  tag?: string;
  /** Case-insensitive substring of the id, name, project, group or notes. */
  text?: string;
  /** Page size (default 1000). */
  limit?: number;
  /** Matching runs to skip (paging). */
  offset?: number;
}

/** One page of a listing, newest first, and how many runs match in all. */
export interface RunPage {
  runs: RunInfo[];
  total: number;
}

export interface HistoryQuery {
  /** Only these metrics (empty: all). */
  keys?: string[];
  /** > 0: only the run's last rows. */
  tailRows?: number;
  /** The node's system metrics over the run's lifetime instead of its history. */
  system?: boolean;
  /**
   * > 0: downsampled where the data is, about this many points per metric
   * (each bucket keeps the mean, min and max of its points; a metric with no
   * more points comes back whole). The History then has `buckets`, and its
   * rows are buckets grouped by metric (see client/history.ts). tailRows is
   * ignored.
   */
  points?: number;
  /**
   * Rows a later attempt's rewind superseded too (History.attempts and
   * .superseded mark them); by default only the latest timeline. Ignored with
   * `points` and `system`.
   */
  allAttempts?: boolean;
  timeoutMs?: number;
}

export interface QuerySource {
  /** 'local': this node's store through its daemon; 'shared': the PostgreSQL store. */
  readonly kind: 'local' | 'shared';
  /** Where it reads, for people: a data dir or a URL with its password redacted. */
  readonly where: string;
  listRuns(filter: RunFilter): Promise<RunPage>;
  /** Rejects with RunNotFound when there is no such run. */
  getRun(id: string): Promise<RunInfo>;
  /** Stored rows in arrival order, columnar (or buckets, with `points`). Rejects with RunNotFound when there is no such run. */
  history(id: string, query?: HistoryQuery): Promise<History>;
  /**
   * The same rows as history(), in pieces of one snapshot that a reader can send one by one (the first names
   * every key); sources that read whole need not have it.
   */
  historyPieces?(id: string, query?: HistoryQuery): AsyncGenerator<History>;
  /**
   * Many runs' histories at once (every stored row of each, its latest timeline; `keys`: only those metrics), for
   * a reader of a whole group: `rows` is each run's count as listed, for batching. A run the source lacks has no
   * entry. Sources that read run by run need not have it.
   */
  histories?(runs: Array<{ id: string; rows: number }>, query?: { keys?: string[] }): Promise<Map<string, History>>;
  /** histories() a batch of runs at a time (rows < 0: not known, the source looks them up). */
  historyBatches?(runs: Array<{ id: string; rows: number }>, query?: { keys?: string[] }): AsyncGenerator<Map<string, History>>;
  /**
   * Many runs' metric names (every attempt's, in the order they first came), without reading a row: a group
   * page's list of metrics. A run the source lacks, or one without metrics, has no entry.
   */
  metricNames?(ids: string[]): Promise<Map<string, string[]>>;
  /**
   * The whole summary and stats of a run whose RunInfo carries them capped
   * (metadata.summaryCapped: more than 1000 keys). Sources whose answers are
   * never capped need not have it.
   */
  wholeSummary?(id: string): Promise<{ summary: Record<string, unknown>; stats: Record<string, unknown> }>;
  /**
   * A run's stored console output, a page at a time (`after`: 0, or the
   * `next` of the page before; `next` 0: the last page). `next` is
   * opaque: a cursor of the source that gave it.
   */
  console?(id: string, after: number): Promise<{ entries: ConsoleLine[]; next: number }>;
  /**
   * A run's histograms, images and text, a page at a time (as console);
   * `kind` and `key` filter. Image bytes by image().
   */
  media?(id: string, after: number, filter?: { kind?: string; key?: string }): Promise<{ entries: MediaItem[]; next: number }>;
  image?(id: string, sha256: string): Promise<{ data: Uint8Array; format: 'png' | 'jpeg' } | null>;
  /**
   * Changes a run's name, tags or notes (`logd rename`/`tag`/`note`, the dashboard's selection): answers with its
   * listing fields as they are now. Rejects with RunNotFound, or an Error saying what is wrong with the edit.
   */
  editRun?(id: string, edit: RunEditAsk): Promise<{ name: string; tags: string[]; notes: string }>;
  /** Removes a run that is not running (`logd rm`, the dashboard's selection). */
  removeRun?(id: string): Promise<void>;
  close(): Promise<void>;
  /**
   * For long-lived readers (the dashboard): keeps the source serving. The
   * local source says hello to its daemon, which an on-demand daemon counts as
   * activity, so it does not stop as idle while a reader is open.
   */
  keepAlive?(): Promise<void>;
}

/** What an edit of a run changes (a field left out stays as it is). */
export interface RunEditAsk { name?: string; addTags?: string[]; removeTags?: string[]; notes?: string }

/** One stored piece of console output: writer index, its RANK (null: none), time, stream, text (one or more lines). */
export interface ConsoleLine { w: number; rank: number | null; t: number; s: 'out' | 'err'; l: string }

/**
 * One stored histogram, image or text: writer index, its RANK, key, step,
 * time, kind, and the kind's fields (docs/api.md, "Beyond numbers").
 */
export interface MediaItem {
  w: number; rank: number | null; key: string; step: number; t: number; kind: 'histogram' | 'image' | 'text';
  counts?: number[]; edges?: number[]; nonfinite?: number;
  sha256?: string; format?: 'png' | 'jpeg'; width?: number; height?: number; bytes?: number; caption?: string; lost?: string;
  text?: string;
}

export class RunNotFound extends Error {
  override name = 'RunNotFound';
  constructor(readonly runId: string, where: string) {
    super(`run ${JSON.stringify(runId.slice(0, 80))} does not exist in ${where}; list runs with \`logd runs\``);
  }
}
