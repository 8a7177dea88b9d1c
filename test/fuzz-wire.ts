// The fuzzer's raw side of the wire, independent of logd's own client: a
// seeded PRNG, a protobuf field encoder that can put invalid UTF-8 and
// unknown fields on the wire, and grpc calls that send arbitrary bytes.
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import protobuf from 'protobufjs';
import { ROOT } from './helpers.js';

const PROTO = path.join(ROOT, 'proto/logd/v1/logd.proto');
// proto-loader for the service shape (paths), protobufjs (which it wraps) for the codecs.
export const pkgDef = protoLoader.loadSync(PROTO, { longs: Number, defaults: true, oneofs: true });
export const proto = protobuf.loadSync(PROTO);
export const T = (name: string) => proto.lookupType(`logd.v1.${name}`);

/** mulberry32: small, seeded, reproducible. */
export function prng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = a;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  return { next, int, pick: <X>(xs: readonly X[]): X => xs[int(xs.length)], chance: (p: number) => next() < p };
}
export type Rng = ReturnType<typeof prng>;

// ---- protobuf by hand ----
export function varint(n: bigint | number): Buffer {
  let v = BigInt.asUintN(64, BigInt(n));
  const out: number[] = [];
  do {
    let b = Number(v & 0x7fn);
    v >>= 7n;
    if (v > 0n) b |= 0x80;
    out.push(b);
  } while (v > 0n);
  return Buffer.from(out);
}
export const lenField = (no: number, bytes: Uint8Array) => Buffer.concat([varint((no << 3) | 2), varint(bytes.length), bytes]);
export const intField = (no: number, n: bigint | number) => Buffer.concat([varint(no << 3), varint(n)]);

/** Strings that try to escape a directory, break a parser or a terminal, or are just too long. */
export const NASTY_STRINGS: Array<string | Buffer> = [
  '', '.', '..', '../', '../../etc/passwd', '/etc/passwd', 'a/../../b', 'runs/../../x', '..\\..\\x', 'x\u0000y', '\u0000',
  'x'.repeat(65), 'y'.repeat(300), 'z'.repeat(70_000), 'ok_id-1', 'ünïcödé', '😀', '\u202e', 'line\nbreak', 'tab\tx', '%s%n', '$(id)', '`id`',
  Buffer.from([0xff, 0xfe, 0x80]), Buffer.from([0x61, 0xc3]), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('../\u0000', 'utf8'),
];

export function randomBytes(r: Rng, n: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = r.int(256);
  return b;
}

/** A valid encoding with some bytes flipped, cut, duplicated or appended. */
export function mutate(r: Rng, b: Uint8Array): Buffer {
  let out = Buffer.from(b);
  const n = 1 + r.int(4);
  for (let i = 0; i < n; i++) {
    const op = r.int(5);
    if (op === 0 && out.length > 0) out[r.int(out.length)] ^= 1 << r.int(8);
    else if (op === 1 && out.length > 0) out = out.subarray(0, r.int(out.length));
    else if (op === 2) out = Buffer.concat([out, randomBytes(r, 1 + r.int(16))]);
    else if (op === 3 && out.length > 2) { const at = r.int(out.length); out = Buffer.concat([out.subarray(0, at), out.subarray(at, at + 1 + r.int(8)), out.subarray(at)]); }
    else out = Buffer.concat([out, intField(1000 + r.int(1000), r.int(1e9))]); // an unknown field
  }
  return out;
}

const identity = (b: Buffer) => b;

export class RawClient extends grpc.Client {
  constructor(target: string, readonly token: string) {
    super(target, grpc.credentials.createInsecure(), { 'grpc.max_send_message_length': 256 * 1024 * 1024 });
  }
  md(): grpc.Metadata {
    const m = new grpc.Metadata();
    m.set('x-logd-token', this.token);
    return m;
  }
  /** Resolves with the status (OK or not) and the decoded answer; rejects only past the deadline check. */
  unaryRaw(method: string, body: Buffer, resType: string, timeoutMs = 15_000): Promise<{ code: number; details: string; res: any }> {
    return new Promise((resolve) => {
      this.makeUnaryRequest(`/logd.v1.Logd/${method}`, identity, identity, body, this.md(), { deadline: Date.now() + timeoutMs }, (e, res) => {
        if (e) resolve({ code: e.code, details: e.details, res: null });
        else resolve({ code: 0, details: '', res: T(resType).toObject(T(resType).decode(res as Buffer), { longs: Number, defaults: true }) });
      });
    });
  }
  writeRaw(): grpc.ClientDuplexStream<Buffer, Buffer> {
    return this.makeBidiStreamRequest('/logd.v1.Logd/Write', identity, identity, this.md(), {});
  }
}

export const enc = (type: string, obj: object) => Buffer.from(T(type).encode(T(type).fromObject(obj)).finish());
export const f64 = (a: number[]) => Buffer.from(new Float64Array(a).buffer);
export const u32 = (a: number[]) => Buffer.from(new Uint32Array(a).buffer);
