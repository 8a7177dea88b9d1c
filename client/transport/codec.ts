// Protocol-buffer encoding and decoding for the client, driven by the table
// in schema.ts. It writes what protobufjs writes for the same object (every
// field that is set, zero or not; nested messages whenever present), so the
// daemon cannot tell the two apart, and decodes to plain objects with every
// field present (its default when absent from the wire), as the rest of the
// client reads them. 64-bit integers are JS numbers: logd's stay below 2^53.
import { MESSAGES, type Field } from './schema.js';

const TWO32 = 4294967296;

function wireType(type: string): number {
  switch (type) {
    case 'double': return 1;
    case 'string': case 'bytes': return 2;
    case 'bool': case 'int32': case 'uint32': case 'uint64': return 0;
    default: return 2; // a message
  }
}

function fieldsOf(type: string): readonly Field[] {
  const f = MESSAGES[type];
  if (!f) throw new Error(`codec: no message type ${type} in logd.v1`);
  return f;
}

function varintSize(v: number): number {
  if (v < 0) return 10; // a negative int32 is sign-extended to 64 bits
  let n = 1;
  while (v >= 128) {
    v = Math.floor(v / 128);
    n++;
  }
  return n;
}

const bytesOf = (v: unknown): number => (v as Uint8Array).byteLength;
const isSet = (v: unknown) => v !== undefined && v !== null;

function valueSize(type: string, v: unknown): number {
  switch (type) {
    case 'double': return 8;
    case 'bool': return 1;
    case 'int32': case 'uint32': case 'uint64': return varintSize(Number(v));
    case 'string': { const n = Buffer.byteLength(v as string, 'utf8'); return varintSize(n) + n; }
    case 'bytes': { const n = bytesOf(v); return varintSize(n) + n; }
    default: { const n = sizeOf(type, v as Record<string, unknown>); return varintSize(n) + n; }
  }
}

/** Encoded size of a message of `type`. */
export function sizeOf(type: string, m: Record<string, unknown>): number {
  let size = 0;
  for (const [name, no, t, repeated] of fieldsOf(type)) {
    const v = m[name];
    if (!isSet(v)) continue;
    const tag = varintSize(no * 8);
    if (repeated) for (const x of v as unknown[]) size += tag + valueSize(t, x);
    else size += tag + valueSize(t, v);
  }
  return size;
}

class Out {
  pos = 0;
  constructor(readonly buf: Buffer) {}
  varint(v: number): void {
    if (v < 0) {
      // Two's complement over 64 bits, as protobuf writes a negative int32.
      let lo = v >>> 0;
      let hi = 0xffffffff;
      while (hi !== 0 || lo > 127) {
        this.buf[this.pos++] = (lo & 127) | 128;
        lo = ((lo >>> 7) | (hi << 25)) >>> 0;
        hi >>>= 7;
      }
      this.buf[this.pos++] = lo;
      return;
    }
    while (v >= 128) {
      this.buf[this.pos++] = (v % 128) | 128;
      v = Math.floor(v / 128);
    }
    this.buf[this.pos++] = v;
  }
}

function writeValue(o: Out, type: string, v: unknown): void {
  switch (type) {
    case 'double': o.buf.writeDoubleLE(v as number, o.pos); o.pos += 8; return;
    case 'bool': o.buf[o.pos++] = v ? 1 : 0; return;
    case 'int32': o.varint((v as number) | 0); return;
    case 'uint32': o.varint((v as number) >>> 0); return;
    case 'uint64': o.varint(Math.trunc(Number(v))); return;
    case 'string': {
      const n = Buffer.byteLength(v as string, 'utf8');
      o.varint(n);
      o.pos += o.buf.write(v as string, o.pos, n, 'utf8');
      return;
    }
    case 'bytes': {
      const b = v as Uint8Array;
      o.varint(b.byteLength);
      o.buf.set(b, o.pos);
      o.pos += b.byteLength;
      return;
    }
    default:
      o.varint(sizeOf(type, v as Record<string, unknown>));
      writeMessage(o, type, v as Record<string, unknown>);
  }
}

function writeMessage(o: Out, type: string, m: Record<string, unknown>): void {
  for (const [name, no, t, repeated] of fieldsOf(type)) {
    const v = m[name];
    if (!isSet(v)) continue;
    const tag = no * 8 + wireType(t);
    if (repeated) for (const x of v as unknown[]) (o.varint(tag), writeValue(o, t, x));
    else (o.varint(tag), writeValue(o, t, v));
  }
}

/**
 * Encodes `m` as a `type`, after `prefix` bytes left free for the caller (the
 * 5-byte gRPC frame header).
 */
export function encode(type: string, m: Record<string, unknown>, prefix = 0): Buffer {
  const size = sizeOf(type, m);
  const o = new Out(Buffer.allocUnsafe(prefix + size));
  o.pos = prefix;
  writeMessage(o, type, m);
  if (o.pos !== prefix + size) throw new Error(`codec: ${type} encoded to ${o.pos - prefix} bytes, expected ${size}`);
  return o.buf;
}

// ---- decoding ----

class In {
  pos: number;
  constructor(readonly buf: Buffer, start: number, readonly end: number) {
    this.pos = start;
  }
  /** A varint as [low 32 bits, high 32 bits]. */
  varint(): [number, number] {
    let lo = 0;
    let hi = 0;
    let b = 0;
    for (let i = 0; i < 4; i++) {
      b = this.byte();
      lo |= (b & 127) << (i * 7);
      if (b < 128) return [lo >>> 0, 0];
    }
    b = this.byte();
    lo |= (b & 127) << 28;
    hi = (b & 127) >> 4;
    if (b < 128) return [lo >>> 0, hi];
    for (let i = 0; i < 5; i++) {
      b = this.byte();
      hi |= (b & 127) << (i * 7 + 3);
      if (b < 128) return [lo >>> 0, hi >>> 0];
    }
    throw new RangeError('codec: varint longer than 10 bytes');
  }
  byte(): number {
    if (this.pos >= this.end) throw new RangeError('codec: message ends inside a field');
    return this.buf[this.pos++];
  }
  length(): number {
    const [lo, hi] = this.varint();
    const n = hi * TWO32 + lo;
    if (this.pos + n > this.end) throw new RangeError(`codec: a field of ${n} bytes runs past the end of its message`);
    return n;
  }
  skip(wire: number): void {
    if (wire === 0) this.varint();
    else if (wire === 1) this.advance(8);
    else if (wire === 2) this.advance(this.length());
    else if (wire === 5) this.advance(4);
    else throw new RangeError(`codec: unsupported wire type ${wire}`);
  }
  advance(n: number): void {
    if (this.pos + n > this.end) throw new RangeError('codec: message ends inside a field');
    this.pos += n;
  }
}

const EMPTY = Buffer.alloc(0);

function defaultOf(type: string): unknown {
  switch (type) {
    case 'string': return '';
    case 'bytes': return EMPTY;
    case 'bool': return false;
    case 'double': case 'int32': case 'uint32': case 'uint64': return 0;
    default: return null;
  }
}

function readValue(i: In, type: string): unknown {
  switch (type) {
    case 'double': {
      i.advance(8);
      return i.buf.readDoubleLE(i.pos - 8);
    }
    case 'bool': { const [lo, hi] = i.varint(); return lo !== 0 || hi !== 0; }
    case 'int32': return i.varint()[0] | 0;
    case 'uint32': return i.varint()[0];
    case 'uint64': { const [lo, hi] = i.varint(); return hi * TWO32 + lo; }
    case 'string': { const n = i.length(); i.pos += n; return i.buf.toString('utf8', i.pos - n, i.pos); }
    case 'bytes': { const n = i.length(); i.pos += n; return i.buf.subarray(i.pos - n, i.pos); }
    default: { const n = i.length(); i.pos += n; return readMessage(new In(i.buf, i.pos - n, i.pos), type); }
  }
}

function readMessage(i: In, type: string): Record<string, unknown> {
  const fields = fieldsOf(type);
  const m: Record<string, unknown> = {};
  for (const [name, , t, repeated] of fields) m[name] = repeated ? [] : defaultOf(t);
  while (i.pos < i.end) {
    const [tag] = i.varint();
    const no = tag >>> 3;
    const wire = tag & 7;
    const f = fields.find((x) => x[1] === no);
    if (!f || wire !== wireType(f[2])) {
      i.skip(wire); // unknown to this client (a newer daemon): skipped, as protobuf does
      continue;
    }
    const v = readValue(i, f[2]);
    if (f[3]) (m[f[0]] as unknown[]).push(v);
    else {
      if (f[4]) for (const x of fields) if (x[4] && x !== f) m[x[0]] = null; // one member of the oneof at a time
      m[f[0]] = v;
    }
  }
  return m;
}

/** Decodes bytes of a `type` message; throws a RangeError naming what is wrong when they are not one. */
export function decode(type: string, bytes: Uint8Array): Record<string, unknown> {
  const buf = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  try {
    return readMessage(new In(buf, 0, buf.byteLength), type);
  } catch (e) {
    throw new RangeError(`not a valid ${type}: ${(e as Error).message}`);
  }
}
