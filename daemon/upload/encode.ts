// A slice of a run's log turned into the COPY data of its tables: the
// CPU-heavy half of an upload (reading, chunking, encoding, reading the images
// its media entries name), kept apart from the I/O half so that it can run
// off the daemon's main thread (encoder.ts).
import path from 'node:path';
import crypto from 'node:crypto';
import { CopyWriter } from './copy.js';
import { readSlice, type Chunk, type FramedEntries } from './slice.js';
import { readImage } from '../store/media.js';
import type { ConsoleEntry, MediaEntry } from '../store/format.js';
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
  /** The writers that joined in the slice and their RANK (null: none), for logd_writers. */
  writers: Array<{ idx: number; rank: number | null }>;
  /** COPY BINARY data for logd_console and logd_media (null: nothing to copy). */
  console: Uint8Array | null;
  media: Uint8Array | null;
  consoleEntries: number;
  mediaEntries: number;
  /** The bytes of each image the slice's media entries name, once each. */
  images: ImageBytes[];
  /** Images named by an entry but missing from the run's media dir (or not matching their sha256): their entries go up without them. */
  missingImages: string[];
}

export interface ImageBytes { sha256: string; format: 'png' | 'jpeg'; data: Uint8Array }

/**
 * `offsetBase`: added to the log offsets that go into the store (console and
 * media keys, chunk order). Non-zero for a run continued from the shared
 * store (RunMeta.fromStore): its log here follows the other node's there.
 */
export interface EncodeRequest { file: string; runId: string; stream: number; from: number; to: number; maxBytes: number; offsetBase?: number }

/** The node's system metrics over a run's lifetime (stream 1), from the node's system log. */
export interface SystemRequest { systemLog: string; row: RunRow; stream: number }

export const KEY_COLUMNS = ['run_id', 'stream', 'key_id', 'name'];
export const ROW_COLUMNS = ['run_id', 'stream', 'writer', 'seq_lo', 'seq_hi', 'ord', 'nrows', 'steps', 'times'];
export const VALUE_COLUMNS = ['run_id', 'stream', 'key_id', 'writer', 'seq_lo', 'idx', 'vals'];
export const CONSOLE_COLUMNS = ['run_id', 'log_offset', 'n', 'writer', 't', 'stream', 'text'];
export const MEDIA_COLUMNS = ['run_id', 'log_offset', 'n', 'writer', 'key', 'step', 't', 'kind', 'sha256', 'entry_json'];

const NOTHING = { writers: [], console: null, media: null, consoleEntries: 0, mediaEntries: 0, images: [], missingImages: [] };

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

/** Console pieces, one tuple each, keyed by their frame's offset and their place in it. */
export function encodeConsole(runId: string, frames: Array<FramedEntries<ConsoleEntry>>): { data: Uint8Array | null; entries: number } {
  const w = new CopyWriter();
  let entries = 0;
  for (const f of frames) {
    f.entries.forEach((e, n) => w.tuple(7).text(runId).int8(f.offset).int4(n).int8(f.writerIdx).float8(e.t).text(e.s).text(e.l));
    entries += f.entries.length;
  }
  return { data: w.tuples ? w.finish() : null, entries };
}

/** Media entries as the store keeps them: the columns readers filter on, and the whole entry as JSON. */
export function encodeMedia(runId: string, frames: Array<FramedEntries<MediaEntry>>): { data: Uint8Array | null; entries: number } {
  const w = new CopyWriter();
  let entries = 0;
  for (const f of frames) {
    f.entries.forEach((e, n) => {
      w.tuple(10).text(runId).int8(f.offset).int4(n).int8(f.writerIdx).text(e.key).float8(e.step).float8(e.t).text(e.kind);
      if (e.sha256) w.text(e.sha256);
      else w.nil();
      w.text(JSON.stringify(e));
    });
    entries += f.entries.length;
  }
  return { data: w.tuples ? w.finish() : null, entries };
}

/**
 * The bytes of the images, read from the run's media dir. A file that is
 * gone or does not hash to its name is left out (the store never holds
 * bytes under a name they do not have); its entry still goes up.
 */
export function readImages(runDir: string, images: Iterable<string>): { images: ImageBytes[]; missing: string[] } {
  const out: ImageBytes[] = [];
  const missing: string[] = [];
  for (const sha of images) {
    const img = readImage(runDir, sha);
    if (!img || crypto.createHash('sha256').update(img.data).digest('hex') !== sha) missing.push(sha);
    else out.push({ sha256: sha, format: img.format, data: img.data });
  }
  return { images: out, missing };
}

export function encodeSlice(r: EncodeRequest): EncodedSlice {
  const s = readSlice(r.file, r.from, r.to, r.maxBytes);
  const base = r.offsetBase ?? 0;
  if (base !== 0) {
    for (const ch of s.chunks) ch.ord += base;
    for (const f of s.console) f.offset += base;
    for (const f of s.media) f.offset += base;
  }
  const con = encodeConsole(r.runId, s.console);
  const med = encodeMedia(r.runId, s.media);
  const img = readImages(path.dirname(r.file), s.images);
  return {
    start: s.start, end: s.end, rows: s.rows, points: s.points, keys: encodeKeys(r.runId, r.stream, s.keys), ...encodeChunks(r.runId, r.stream, s.chunks),
    writers: s.writers, console: con.data, media: med.data, consoleEntries: con.entries, mediaEntries: med.entries, images: img.images, missingImages: img.missing,
  };
}

export function encodeSystem(r: SystemRequest): EncodedSlice {
  const sys = readSystemSlice(r.systemLog, r.row);
  const chunks = sys.chunk ? encodeChunks(r.row.id, r.stream, [sys.chunk]) : { chunkRows: null, values: null };
  return { start: 0, end: 0, rows: sys.rows, points: 0, keys: sys.chunk ? encodeKeys(r.row.id, r.stream, sys.keys) : null, ...chunks, ...NOTHING };
}
