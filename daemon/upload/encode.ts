// A slice of a run's log turned into the COPY data of its three tables: the
// CPU-heavy half of an upload (reading, chunking, encoding), kept apart from
// the I/O half so that it can run off the daemon's main thread (encoder.ts).
import { CopyWriter } from './copy.js';
import { readSlice, type Chunk } from './slice.js';
import { readSystemSlice } from './system-slice.js';
import type { RunRow } from '../store/index-db.js';

export interface EncodedSlice {
  start: number;
  end: number;
  rows: number;
  points: number;
  /** COPY BINARY data for logd_keys, logd_rows and logd_values (null: nothing to copy). */
  keys: Uint8Array | null;
  chunkRows: Uint8Array | null;
  values: Uint8Array | null;
}

export interface EncodeRequest { file: string; runId: string; stream: number; from: number; to: number; maxBytes: number }

/** The node's system metrics over a run's lifetime (stream 1), from the node's system log. */
export interface SystemRequest { systemLog: string; row: RunRow; stream: number }

export const KEY_COLUMNS = ['run_id', 'stream', 'key_id', 'name'];
export const ROW_COLUMNS = ['run_id', 'stream', 'writer', 'seq_lo', 'seq_hi', 'ord', 'nrows', 'steps', 'times'];
export const VALUE_COLUMNS = ['run_id', 'stream', 'key_id', 'writer', 'seq_lo', 'idx', 'vals'];

export function encodeKeys(runId: string, stream: number, keys: Array<{ id: number; name: string }>): Uint8Array | null {
  const w = new CopyWriter();
  for (const k of keys) w.tuple(4).text(runId).int2(stream).int4(k.id).text(k.name);
  return w.tuples ? w.finish() : null;
}

export function encodeChunks(runId: string, stream: number, chunks: Chunk[]): { chunkRows: Uint8Array | null; values: Uint8Array | null } {
  const rows = new CopyWriter();
  const vals = new CopyWriter(1 << 20);
  for (const ch of chunks) {
    rows.tuple(9).text(runId).int2(stream).int8(ch.writer).float8(ch.seqLo).float8(ch.seqHi).int8(ch.ord).int4(ch.rows)
      .float8Array(ch.steps).float8Array(ch.times);
    for (const k of ch.keys) {
      vals.tuple(7).text(runId).int2(stream).int4(k.keyId).int8(ch.writer).float8(ch.seqLo);
      if (k.idx) vals.int4Array(k.idx);
      else vals.nil();
      vals.float8Array(k.vals);
    }
  }
  return { chunkRows: rows.tuples ? rows.finish() : null, values: vals.tuples ? vals.finish() : null };
}

export function encodeSlice(r: EncodeRequest): EncodedSlice {
  const s = readSlice(r.file, r.from, r.to, r.maxBytes);
  return { start: s.start, end: s.end, rows: s.rows, points: s.points, keys: encodeKeys(r.runId, r.stream, s.keys), ...encodeChunks(r.runId, r.stream, s.chunks) };
}

export function encodeSystem(r: SystemRequest): EncodedSlice {
  const sys = readSystemSlice(r.systemLog, r.row);
  const chunks = sys.chunk ? encodeChunks(r.row.id, r.stream, [sys.chunk]) : { chunkRows: null, values: null };
  return { start: 0, end: 0, rows: sys.rows, points: 0, keys: sys.chunk ? encodeKeys(r.row.id, r.stream, sys.keys) : null, ...chunks };
}
