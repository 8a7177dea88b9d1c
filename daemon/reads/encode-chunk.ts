// A HistoryChunk (proto/logd/v1/logd.proto) encoded by hand into one buffer of its own: a read worker sends the
// message's bytes, moved (not copied) to the main thread, which hands them to gRPC as they are (src/proto.ts
// passes a Uint8Array through). Each column is copied once, into the message; the worker needs no .proto parse
// (a fresh worker per read), and the daemon's main thread encodes nothing.
import type { HistoryChunkMsg } from '../../src/wire.js';

const utf8 = new TextEncoder();

function varintSize(n: number): number {
  let s = 1;
  while (n >= 128) {
    n = Math.floor(n / 128);
    s++;
  }
  return s;
}

export function encodeHistoryChunk(c: HistoryChunkMsg): Uint8Array {
  const keys = c.keys.map((k) => utf8.encode(k));
  const bytesFields: Array<[number, Uint8Array | undefined]> = [[3, c.steps], [4, c.times], [5, c.counts], [6, c.keyIds], [7, c.values], [9, c.mins], [10, c.maxs]];
  const nums: Array<[number, number]> = [[2, c.rows], [8, c.writer], [11, c.storedPoints ?? 0], [12, c.attempt ?? 0], [13, c.superseded ? 1 : 0]];
  let size = 0;
  for (const k of keys) size += 1 + varintSize(k.length) + k.length;
  for (const [, b] of bytesFields) if (b && b.length) size += 1 + varintSize(b.length) + b.length;
  for (const [, n] of nums) if (n) size += 1 + varintSize(n);
  const out = new Uint8Array(size);
  let at = 0;
  const varint = (n: number) => {
    while (n >= 128) {
      out[at++] = (n % 128) | 128;
      n = Math.floor(n / 128);
    }
    out[at++] = n;
  };
  const bytes = (field: number, b: Uint8Array) => {
    out[at++] = (field << 3) | 2;
    varint(b.length);
    out.set(b, at);
    at += b.length;
  };
  // Fields in number order, as protobuf encoders write them.
  for (const k of keys) bytes(1, k);
  const num = (field: number, n: number) => {
    if (!n) return;
    out[at++] = field << 3;
    varint(n);
  };
  num(2, c.rows);
  for (const [f, b] of bytesFields.slice(0, 5)) if (b && b.length) bytes(f, b);
  num(8, c.writer);
  for (const [f, b] of bytesFields.slice(5)) if (b && b.length) bytes(f, b);
  num(11, c.storedPoints ?? 0);
  num(12, c.attempt ?? 0);
  num(13, c.superseded ? 1 : 0);
  if (at !== size) throw new Error(`encodeHistoryChunk: wrote ${at} bytes of ${size}`);
  return out;
}
