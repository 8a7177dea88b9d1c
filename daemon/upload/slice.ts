// Reads one run's record log from its upload cursor (a byte offset at a frame
// boundary) up to what is durable, and turns the history batches into chunks:
// one per writer, holding that writer's consecutive batches of the slice, with
// the row skeleton (steps, times) and one value array per metric.
import fs from 'node:fs';
import { crc32 } from 'node:zlib';
import { FRAME_HEADER_BYTES, MAX_FRAME_BYTES } from '../../src/frames.js';
import { FrameType, decodeHistory, parseFrameJson, type FinalState, type HistoryBatch } from '../store/format.js';

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

export interface Slice {
  start: number;
  /** The offset after the last whole frame read: the next cursor. */
  end: number;
  keys: Array<{ id: number; name: string }>;
  chunks: Chunk[];
  final: FinalState | null;
  rows: number;
  points: number;
}

/** Each valid frame between `from` and `to` (stops early at a torn frame or after `maxBytes`). */
export function readFrames(file: string, from: number, to: number, maxBytes: number, onFrame: (type: number, payload: Uint8Array, offset: number) => void): number {
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
      onFrame(header[8], payload, pos);
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

/** The frames of a run's log in [from, to), at most about maxBytes of them. */
export function readSlice(file: string, from: number, to: number, maxBytes: number): Slice {
  const keys: Slice['keys'] = [];
  const builders = new Map<number, ChunkBuilder>();
  const done: Chunk[] = [];
  let final: FinalState | null = null;
  let rows = 0;
  let points = 0;
  const end = readFrames(file, from, to, maxBytes, (type, p, offset) => {
    if (type === FrameType.KEYS) {
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
  return { start: from, end, keys, chunks: done, final, rows, points };
}
