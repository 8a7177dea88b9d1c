// What the frames of a run's record log hold. The log is the source of truth:
// the SQLite index and every in-memory view can be rebuilt from it.
//
// RUN      JSON RunMeta, first frame of every log
// KEYS     JSON {first, names}: run-global metric ids first.. first+names.length-1
// WRITER   JSON WriterMeta: a writer (process) joined, with its index
// HISTORY  binary, see encodeHistory
// SUMMARY  JSON object: a summary.update() call
// CONFIG   JSON object: a config.update() call
// STATE    JSON FinalState: the run reached a final state; a later STATE of
//          `running` reopens it (a run killed by a daemon stop, resumed)
// SYSTEM   binary history of node system metrics (writer index 0xffffffff)
// ATTEMPT  JSON Attempt: the run was continued (init(resume=...)): a new
//          attempt with its own owner and token; the run is running again.
//          `resumedFromStep` (init(resume_from=...)): earlier attempts' rows
//          above that step are superseded from here on (timeline.ts)
// CONSOLE  JSON ConsoleFrame: console output a writer's process printed
//          (RecordBatch.console_json), appended with that writer's batch;
//          read by ReadConsole (`logd logs`), ignored by replay
// MEDIA    JSON MediaFrame: one batch's histograms, images and text of one
//          writer (RecordBatch.media); an image's bytes are a file under the
//          run (media.ts), named by the sha256 the entry holds
// BASE     JSON BaseFrame: the summary of rows this node's log does not hold
//          (a run continued here from the shared store: its earlier attempts'
//          rows are in the store only); replay starts the summary from it
// CHECKPOINT     binary (checkpoint.ts): the state replay builds from every
//                frame before it, written when a run is closed; replay
//                starts from it and reads only the frames after it
// CHECKPOINT_AT  24 bytes (checkpoint.ts): the offset of the latest
//                CHECKPOINT; the last frame of a log its daemon closed, so a
//                replay finds the checkpoint by reading the log's last bytes
// SEQ      JSON {writerIdx, seq}: a batch that stored no HISTORY, CONSOLE or
//          MEDIA frame (summary or config updates alone, or nothing): its
//          seq, so that a restarted daemon knows it was stored (replay)

import { isOwnMediaKey } from '../../src/media.js';
import type { RunEnd } from '../../src/story/end.js';
import { toJson } from '../../src/json.js';

export const FrameType = { RUN: 1, KEYS: 2, WRITER: 3, HISTORY: 4, SUMMARY: 5, CONFIG: 6, STATE: 7, ATTEMPT: 8, CONSOLE: 9, MEDIA: 10, BASE: 11, CHECKPOINT: 12, CHECKPOINT_AT: 13, SEQ: 14, EDIT: 15 } as const;

/** An EDIT frame (`logd rename`, `logd tag`, `logd note`): the listing fields it sets, and when. */
export interface RunEdit { name?: string; tags?: string[]; notes?: string; at: number }

/**
 * One attempt of a run: the first is the run's creation; each continue
 * (init(resume=...)) starts another. The end fields are the state the
 * attempt ended in (absent while it runs).
 */
export interface Attempt {
  n: number;
  startedAt: number;
  host: string;
  pid: number;
  /** The first step this attempt was expected to log (the last stored step + 1, or the step it resumed from + 1). */
  fromStep: number;
  /**
   * init(resume_from=(run, S)): the attempt rewound the run to step S. Rows of
   * earlier attempts above S are superseded (store/timeline.ts).
   */
  resumedFromStep?: number;
  endedAt?: number;
  state?: string;
  reason?: string;
  exitCode?: number;
}

/** An ATTEMPT frame: the attempt, and the run's new owner (replaces RunMeta's owner fields). */
export interface AttemptFrame extends Attempt {
  runToken: string;
  ownerWriterId: string;
  rank: RankMeta | null;
}

/** A CONSOLE frame: one batch's console entries of one writer, in order. */
export interface ConsoleFrame {
  writerIdx: number;
  /** The batch's seq (absent in logs written before it was kept): replay knows a batch without rows was stored. */
  seq?: number;
  entries: ConsoleEntry[];
}

/**
 * A BASE frame: the latest-timeline summary of the rows of earlier attempts
 * that another node logged (the shared store holds them, this log does not).
 * `stats` is by run-global key id, as the store's RunInfo stats had them.
 */
export interface BaseFrame {
  rows: number;
  lastStep: number;
  supersededRows: number;
  stats: Array<{ id: number; last: number | string; min: number | string | null; max: number | string | null; count: number }>;
}

/** One piece of console output: its time (unix seconds), its stream, its text (one or more lines). */
export interface ConsoleEntry { t: number; s: 'out' | 'err'; l: string }

/** A MEDIA frame: one batch's media entries of one writer, in order. */
export interface MediaFrame {
  writerIdx: number;
  /** The batch's seq, as ConsoleFrame's. */
  seq?: number;
  entries: MediaEntry[];
}

/**
 * One stored histogram, image or text. An image whose file could not be
 * written (a full disk) keeps its entry with `lost` saying why.
 */
export interface MediaEntry {
  key: string; step: number; t: number; kind: 'histogram' | 'image' | 'text';
  counts?: number[]; edges?: number[]; nonfinite?: number;
  sha256?: string; format?: 'png' | 'jpeg'; width?: number; height?: number; bytes?: number; caption?: string; lost?: string;
  text?: string;
}

/** Per media key: its kind, how many were stored, the last step (RunInfo metadata "media"). */
export type MediaIndex = Record<string, { kind: string; count: number; lastStep: number }>;

/** The most media keys a run's metadata lists (the rest are counted in "mediaKeysCapped"). */
export const MEDIA_INDEX_KEYS = 1000;

export function indexMedia(index: MediaIndex, entries: readonly MediaEntry[]): void {
  for (const e of entries) {
    if (isOwnMediaKey(e.key)) continue;
    const k = index[e.key];
    if (k) {
      k.count++;
      k.lastStep = Math.max(k.lastStep, e.step);
    } else if (Object.keys(index).length < MEDIA_INDEX_KEYS) {
      index[e.key] = { kind: e.kind, count: 1, lastStep: e.step };
    }
  }
}

export interface RankMeta { rank: number; localRank: number; worldSize: number; nodeRank: number; localWorldSize: number }

export interface RunMeta {
  id: string;
  project: string;
  name: string;
  group: string;
  jobType: string;
  tags: string[];
  notes: string;
  mode: string;
  createdAt: number;
  runToken: string;
  ownerWriterId: string;
  host: string;
  pid: number;
  rank: RankMeta | null;
  config: Record<string, unknown>;
  /** The creator's retry key (CreateRunRequest.create_key); absent in older logs. */
  createKey?: string;
  /** init(fork_from=(run, S)): the run whose rows up to step S the daemon copied into this one. */
  forkedFrom?: { runId: string; step: number };
  /**
   * Continued on this node from the shared store (init(resume=...) of a run
   * another node logged): that node, and what is added to this log's offsets
   * in the store (console and media keys, chunk order), so they follow the
   * other node's.
   */
  fromStore?: { node: string; offsetBase: number };
}

export interface WriterMeta {
  idx: number; writerId: string; pid: number; host: string; rank: RankMeta | null; joinedAt: number;
  /** Rows the writer's client dropped (memory bound reached, spool full). A WRITER frame is appended again when it grows. */
  droppedRows?: number;
  /** The code and environment its process runs (SetEnvironment; docs/api.md "Code and environment"). */
  environment?: Record<string, unknown>;
}

export type FinalStateName = 'finished' | 'crashed' | 'killed';
export type RunStateName = 'running' | 'finishing' | FinalStateName;
export const FINAL_STATES: readonly string[] = ['finished', 'crashed', 'killed'];

export interface FinalState {
  /** `running` only in the frame that resumes a run killed by a daemon stop. */
  state: FinalStateName | 'running';
  reason: string;
  exitCode: number;
  finishedAt: number;
  /** Killed by a daemon stop while its owner lived: the owner may resume it on the next daemon. */
  resumable?: boolean;
  /** How the owner's process ended (src/story/end.ts), where known. */
  end?: RunEnd;
}

/** A history batch with run-global key ids. */
export interface HistoryBatch {
  writerIdx: number;
  seq: number;
  rows: number;
  steps: Float64Array;
  times: Float64Array;
  counts: Uint32Array;
  keyIds: Uint32Array;
  values: Float64Array;
}

const HEADER = 24;

/**
 * HISTORY payload: header (u32 writer, u32 rows, u32 pairs, u32 reserved,
 * f64 seq), then steps, times, values (float64 LE), counts, key ids (uint32 LE).
 * Float columns come first so every column is aligned in a payload read into
 * its own buffer.
 */
export function encodeHistory(b: {
  writerIdx: number; seq: number; rows: number;
  steps: Uint8Array; times: Uint8Array; values: Uint8Array; counts: Uint8Array; keyIds: Uint8Array;
}): Uint8Array[] {
  const h = Buffer.alloc(HEADER);
  h.writeUInt32LE(b.writerIdx, 0);
  h.writeUInt32LE(b.rows, 4);
  h.writeUInt32LE(b.values.byteLength / 8, 8);
  h.writeDoubleLE(b.seq, 16);
  return [h, b.steps, b.times, b.values, b.counts, b.keyIds];
}

export function decodeHistory(p: Uint8Array): HistoryBatch {
  const dv = new DataView(p.buffer, p.byteOffset, p.byteLength);
  const writerIdx = dv.getUint32(0, true);
  const rows = dv.getUint32(4, true);
  const pairs = dv.getUint32(8, true);
  const seq = dv.getFloat64(16, true);
  let off = p.byteOffset + HEADER;
  const take64 = (n: number) => {
    const a = new Float64Array(p.buffer, off, n);
    off += n * 8;
    return a;
  };
  const take32 = (n: number) => {
    const a = new Uint32Array(p.buffer, off, n);
    off += n * 4;
    return a;
  };
  if (HEADER + rows * 20 + pairs * 12 !== p.byteLength) throw new Error('store: history frame sizes do not add up');
  const steps = take64(rows);
  const times = take64(rows);
  const values = take64(pairs);
  const counts = take32(rows);
  const keyIds = take32(pairs);
  return { writerIdx, seq, rows, steps, times, counts, keyIds, values };
}

/** The writer and seq at the start of a CONSOLE or MEDIA frame, read without parsing the rest (replay). */
export function frameSeq(p: Uint8Array): { writerIdx: number; seq: number } | null {
  const head = Buffer.from(p.buffer, p.byteOffset, Math.min(p.byteLength, 64)).toString('latin1');
  const m = /^\{"writerIdx":(\d+),"seq":(\d+),/.exec(head);
  return m ? { writerIdx: Number(m[1]), seq: Number(m[2]) } : null;
}

export function jsonFrame(obj: unknown): Uint8Array[] {
  return [Buffer.from(toJson(obj))];
}

export function parseFrameJson<T>(p: Uint8Array): T {
  return JSON.parse(Buffer.from(p.buffer, p.byteOffset, p.byteLength).toString('utf8')) as T;
}
