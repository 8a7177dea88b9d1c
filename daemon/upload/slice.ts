// Reads one run's record log from its upload cursor (a byte offset at a frame
// boundary) up to what is durable, and turns the history batches into chunks:
// one per writer, holding that writer's consecutive batches of the slice, with
// the row skeleton (steps, times) and one value array per metric. Console
// output, media entries and the writers' ranks are taken as they come, each
// with the offset of its frame (their order, and their key in the store).
import fs from 'node:fs';
import { crc32 } from 'node:zlib';
import { FRAME_HEADER_BYTES, MAX_FRAME_BYTES } from '../../src/frames.js';
import {
  FrameType, decodeHistory, parseFrameJson,
  type ConsoleEntry, type ConsoleFrame, type FinalState, type HistoryBatch, type MediaEntry, type MediaFrame, type WriterMeta,
} from '../store/format.js';

export interface KeyChunk {
  keyId: number;
  /** Rows of the chunk that carry the metric; null when every row carries it once (dense). */
  idx: Int32Array | null;
  vals: Float64Array;
}

export interface Chunk {
  writer: number;
  seqLo: number;
  seqHi: number;
  /** Where the chunk's first batch sits in the log: arrival order across writers. */
  ord: number;
  rows: number;
  steps: Float64Array;
  times: Float64Array;
  keys: KeyChunk[];
}

/** The entries of one CONSOLE or MEDIA frame, with where the frame sits in the log. */
export interface FramedEntries<E> { offset: number; writerIdx: number; entries: E[] }

export interface Slice {
  start: number;
  /** The offset after the last whole frame read: the next cursor. */
  end: number;
  keys: Array<{ id: number; name: string }>;
  chunks: Chunk[];
  final: FinalState | null;
  rows: number;
  points: number;
  /** The writers that joined in the slice, with their RANK (null: none); the last WRITER frame of each wins. */
  writers: Array<{ idx: number; rank: number | null }>;
  console: Array<FramedEntries<ConsoleEntry>>;
  media: Array<FramedEntries<MediaEntry>>;
  /** The sha256 of each image the slice's media entries name (once each), and their bytes as the entries say. */
  images: Set<string>;
  imageBytes: number;
}

/**
 * Each valid frame between `from` and `to` (stops early at a torn frame or
 * after `maxBytes`, or before a frame for which onFrame returns false).
 * Returns the offset after the last frame taken.
 */
export function readFrames(file: string, from: number, to: number, maxBytes: number, onFrame: (type: number, payload: Uint8Array, offset: number) => boolean | void): number {
  const fd = fs.openSync(file, 'r');
  try {
    const limit = Math.min(to, fs.fstatSync(fd).size);
    let pos = from;
    const header = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
    while (pos + FRAME_HEADER_BYTES <= limit && pos - from < maxBytes) {
      if (fs.readSync(fd, header, 0, FRAME_HEADER_BYTES, pos) < FRAME_HEADER_BYTES) break;
      const len = header.readUInt32LE(0);
      if (len > MAX_FRAME_BYTES || pos + FRAME_HEADER_BYTES + len > limit) break;
      const payload = new Uint8Array(len);
      if (fs.readSync(fd, payload, 0, len, pos + FRAME_HEADER_BYTES) < len) break;
      if ((crc32(payload, crc32(header.subarray(8, 9))) >>> 0) !== header.readUInt32LE(4)) break;
      if (onFrame(header[8], payload, pos) === false) break;
      pos += FRAME_HEADER_BYTES + len;
    }
    return pos;
  } finally {
    fs.closeSync(fd);
  }
}

/** Batches of one writer (or of the system stream) gathered into a chunk. */
export class ChunkBuilder {
  private batches: HistoryBatch[] = [];
  private rows = 0;

  constructor(readonly writer: number, readonly ord: number) {}

  add(b: HistoryBatch): void {
    this.batches.push(b);
    this.rows += b.rows;
  }

  get size(): number {
    return this.rows;
  }

  build(): Chunk {
    const bs = this.batches;
    const steps = new Float64Array(this.rows);
    const times = new Float64Array(this.rows);
    // Key ids are small dense integers: plain arrays indexed by id, no maps in the per-value loop.
    let maxKey = -1;
    for (const b of bs) for (let i = 0; i < b.keyIds.length; i++) if (b.keyIds[i] > maxKey) maxKey = b.keyIds[i];
    const counts = new Uint32Array(maxKey + 1);
    let r0 = 0;
    for (const b of bs) {
      steps.set(b.steps, r0);
      times.set(b.times, r0);
      r0 += b.rows;
      for (let i = 0; i < b.keyIds.length; i++) counts[b.keyIds[i]]++;
    }
    const idx: Int32Array[] = [];
    const vals: Float64Array[] = [];
    const fill = new Uint32Array(maxKey + 1);
    const dense = new Uint8Array(maxKey + 1);
    for (let k = 0; k <= maxKey; k++) {
      if (counts[k] === 0) continue;
      idx[k] = new Int32Array(counts[k]);
      vals[k] = new Float64Array(counts[k]);
      dense[k] = counts[k] === this.rows ? 1 : 0;
    }
    let row = 0;
    for (const b of bs) {
      let p = 0;
      const { keyIds, values } = b;
      for (let r = 0; r < b.rows; r++, row++) {
        for (let e = p + b.counts[r]; p < e; p++) {
          const k = keyIds[p];
          const n = fill[k]++;
          if (n !== row) dense[k] = 0;
          idx[k][n] = row;
          vals[k][n] = values[p];
        }
      }
    }
    const keys: KeyChunk[] = [];
    for (let k = 0; k <= maxKey; k++) if (counts[k]) keys.push({ keyId: k, idx: dense[k] ? null : idx[k], vals: vals[k] });
    return { writer: this.writer, seqLo: bs[0].seq, seqHi: bs[bs.length - 1].seq, ord: this.ord, rows: this.rows, steps, times, keys };
  }
}

/**
 * The frames of a run's log in [from, to), at most about maxBytes of them.
 * The images their media entries name have a budget of maxBytes of their
 * own (the uploader holds them in memory): a slice ends before a MEDIA frame
 * that would pass it, unless that frame is its first.
 */
export function readSlice(file: string, from: number, to: number, maxBytes: number): Slice {
  const keys: Slice['keys'] = [];
  const builders = new Map<number, ChunkBuilder>();
  const done: Chunk[] = [];
  const writers = new Map<number, number | null>();
  const consoleFrames: Slice['console'] = [];
  const mediaFrames: Slice['media'] = [];
  const images = new Set<string>();
  let imageBytes = 0;
  let final: FinalState | null = null;
  let rows = 0;
  let points = 0;
  const end = readFrames(file, from, to, maxBytes, (type, p, offset) => {
    if (type === FrameType.MEDIA) {
      const f = parseFrameJson<MediaFrame>(p);
      let added = 0;
      const fresh = new Set<string>();
      for (const e of f.entries) {
        if (e.kind !== 'image' || !e.sha256 || e.lost || images.has(e.sha256) || fresh.has(e.sha256)) continue;
        fresh.add(e.sha256);
        added += e.bytes ?? 0;
      }
      if (offset > from && fresh.size && imageBytes + added > maxBytes) return false;
      for (const sha of fresh) images.add(sha);
      imageBytes += added;
      mediaFrames.push({ offset, writerIdx: f.writerIdx, entries: f.entries });
    } else if (type === FrameType.CONSOLE) {
      const f = parseFrameJson<ConsoleFrame>(p);
      consoleFrames.push({ offset, writerIdx: f.writerIdx, entries: f.entries });
    } else if (type === FrameType.WRITER) {
      // The rank as the local store reads it (store.readConsole): a negative RANK is none.
      const w = parseFrameJson<WriterMeta>(p);
      writers.set(w.idx, w.rank && w.rank.rank >= 0 ? w.rank.rank : null);
    } else if (type === FrameType.KEYS) {
      const k = parseFrameJson<{ first: number; names: string[] }>(p);
      k.names.forEach((name, i) => keys.push({ id: k.first + i, name }));
    } else if (type === FrameType.HISTORY) {
      const b = decodeHistory(p);
      let cb = builders.get(b.writerIdx);
      if (!cb) builders.set(b.writerIdx, (cb = new ChunkBuilder(b.writerIdx, offset)));
      cb.add(b);
      rows += b.rows;
      points += b.values.length;
    } else if (type === FrameType.STATE) {
      final = parseFrameJson<FinalState>(p);
    }
  });
  for (const cb of builders.values()) done.push(cb.build());
  done.sort((a, b) => a.ord - b.ord);
  return {
    start: from, end, keys, chunks: done, final, rows, points,
    writers: [...writers].map(([idx, rank]) => ({ idx, rank })), console: consoleFrames, media: mediaFrames, images, imageBytes,
  };
}
