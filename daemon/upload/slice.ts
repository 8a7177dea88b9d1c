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
    const counts = new Map<number, number>();
    let r0 = 0;
    for (const b of bs) {
      steps.set(b.steps, r0);
      times.set(b.times, r0);
      r0 += b.rows;
      for (let i = 0; i < b.keyIds.length; i++) counts.set(b.keyIds[i], (counts.get(b.keyIds[i]) ?? 0) + 1);
    }
    const acc = new Map<number, { idx: Int32Array; vals: Float64Array; n: number; dense: boolean }>();
    for (const [k, n] of counts) acc.set(k, { idx: new Int32Array(n), vals: new Float64Array(n), n: 0, dense: n === this.rows });
    let row = 0;
    for (const b of bs) {
      let p = 0;
      for (let r = 0; r < b.rows; r++, row++) {
        for (let e = p + b.counts[r]; p < e; p++) {
          const a = acc.get(b.keyIds[p])!;
          if (a.dense && a.n !== row) a.dense = false;
          a.idx[a.n] = row;
          a.vals[a.n++] = b.values[p];
        }
      }
    }
    const keys: KeyChunk[] = [];
    for (const [keyId, a] of acc) keys.push({ keyId, idx: a.dense ? null : a.idx, vals: a.vals });
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
