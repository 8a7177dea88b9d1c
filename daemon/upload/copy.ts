// PostgreSQL's binary COPY format, written by hand: a float8[] chunk of a
// million values goes over as 12 bytes a value with no number formatting or
// parsing on either side (text COPY or bound parameters print every float).
import type pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';

const SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');
const OID_INT4 = 23;
const OID_FLOAT8 = 701;

/** Tuples in COPY BINARY form, appended into one growing buffer. */
export class CopyWriter {
  private buf: Buffer;
  private len = 0;

  constructor(initial = 1 << 16) {
    this.buf = Buffer.allocUnsafe(initial);
    this.put(SIGNATURE.length + 8);
    SIGNATURE.copy(this.buf, 0);
    this.buf.writeInt32BE(0, SIGNATURE.length); // flags
    this.buf.writeInt32BE(0, SIGNATURE.length + 4); // header extension length
  }

  /** Reserves n bytes and returns their offset. */
  private put(n: number): number {
    if (this.len + n > this.buf.length) {
      const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.len + n));
      this.buf.copy(next, 0, 0, this.len);
      this.buf = next;
    }
    const at = this.len;
    this.len += n;
    return at;
  }

  // put() may replace this.buf: always reserve first, then write.
  tuple(fields: number): this {
    const at = this.put(2);
    this.buf.writeInt16BE(fields, at);
    return this;
  }

  nil(): this {
    const at = this.put(4);
    this.buf.writeInt32BE(-1, at);
    return this;
  }

  text(s: string): this {
    const clean = s.includes('\0') ? s.replaceAll('\0', '\uFFFD') : s; // PostgreSQL text cannot hold NUL
    const n = Buffer.byteLength(clean);
    const at = this.put(4 + n);
    this.buf.writeInt32BE(n, at);
    this.buf.write(clean, at + 4);
    return this;
  }

  int2(v: number): this {
    const at = this.put(6);
    this.buf.writeInt32BE(2, at);
    this.buf.writeInt16BE(v, at + 4);
    return this;
  }

  int4(v: number): this {
    const at = this.put(8);
    this.buf.writeInt32BE(4, at);
    this.buf.writeInt32BE(v, at + 4);
    return this;
  }

  int8(v: number): this {
    const at = this.put(12);
    this.buf.writeInt32BE(8, at);
    this.buf.writeBigInt64BE(BigInt(v), at + 4);
    return this;
  }

  float8(v: number): this {
    const at = this.put(12);
    this.buf.writeInt32BE(8, at);
    this.buf.writeDoubleBE(v, at + 4);
    return this;
  }

  float8Array(a: ArrayLike<number>, from = 0, to = a.length): this {
    const n = to - from;
    let at = this.arrayHeader(OID_FLOAT8, 8, n);
    // The hot loop of an upload: one DataView over the buffer, big-endian stores.
    const dv = new DataView(this.buf.buffer, this.buf.byteOffset, this.buf.byteLength);
    for (let i = 0; i < n; i++) {
      dv.setInt32(at, 8);
      dv.setFloat64(at + 4, a[from + i]);
      at += 12;
    }
    return this;
  }

  int4Array(a: ArrayLike<number>): this {
    return this.array(OID_INT4, 4, a.length, (b, at, i) => b.writeInt32BE(a[i], at));
  }

  private array(oid: number, width: number, n: number, put: (b: Buffer, at: number, i: number) => void): this {
    let at = this.arrayHeader(oid, width, n);
    const b = this.buf;
    for (let i = 0; i < n; i++) {
      b.writeInt32BE(width, at);
      put(b, at + 4, i);
      at += 4 + width;
    }
    return this;
  }

  /** Reserves a whole one-dimensional array of n elements, writes its header, returns where the elements go. */
  private arrayHeader(oid: number, width: number, n: number): number {
    const body = n === 0 ? 12 : 20 + n * (4 + width);
    const at = this.put(4 + body);
    const b = this.buf;
    b.writeInt32BE(body, at);
    b.writeInt32BE(n === 0 ? 0 : 1, at + 4); // dimensions
    b.writeInt32BE(0, at + 8); // no nulls
    b.writeInt32BE(oid, at + 12);
    if (n === 0) return at + 16;
    b.writeInt32BE(n, at + 16);
    b.writeInt32BE(1, at + 20); // lower bound
    return at + 24;
  }

  get tuples(): boolean {
    return this.len > SIGNATURE.length + 8;
  }

  finish(): Buffer {
    const at = this.put(2);
    this.buf.writeInt16BE(-1, at);
    return this.buf.subarray(0, this.len);
  }
}

/** Runs `COPY table (columns) FROM STDIN BINARY` with finished COPY data (or a writer's tuples). */
export async function copyInto(c: pg.ClientBase, table: string, columns: string[], from: CopyWriter | Uint8Array | null): Promise<void> {
  if (from === null || (from instanceof CopyWriter && !from.tuples)) return;
  const data = from instanceof CopyWriter ? from.finish() : Buffer.from(from.buffer, from.byteOffset, from.byteLength);
  const stream = c.query(copyFrom(`COPY ${table} (${columns.join(', ')}) FROM STDIN (FORMAT binary)`));
  await new Promise<void>((resolve, reject) => {
    stream.on('error', reject);
    stream.on('finish', resolve);
    // In pieces, so a large chunk does not sit twice in the socket's buffers.
    const PIECE = 1 << 20;
    let off = 0;
    const pump = () => {
      while (off < data.length) {
        const piece = data.subarray(off, Math.min(off + PIECE, data.length));
        off += piece.length;
        if (!stream.write(piece)) {
          stream.once('drain', pump);
          return;
        }
      }
      stream.end();
    };
    pump();
  });
}

/** Decoders for binary results (float8[] and int4[]) into typed arrays. */
export function decodeFloat8Array(b: Buffer): Float64Array {
  if (b.readInt32BE(0) === 0) return new Float64Array(0);
  const n = b.readInt32BE(12);
  const out = new Float64Array(n);
  let at = 20;
  for (let i = 0; i < n; i++) {
    out[i] = b.readDoubleBE(at + 4);
    at += 12;
  }
  return out;
}

export function decodeInt4Array(b: Buffer): Int32Array {
  if (b.readInt32BE(0) === 0) return new Int32Array(0);
  const n = b.readInt32BE(12);
  const out = new Int32Array(n);
  let at = 20;
  for (let i = 0; i < n; i++) {
    out[i] = b.readInt32BE(at + 4);
    at += 8;
  }
  return out;
}
