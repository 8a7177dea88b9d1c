// The client's own protobuf codec (client/transport): its table must be the
// .proto's, and what it writes protobufjs must read back exactly, and the
// other way round, for every message of the wire.
import { describe, expect, it } from 'vitest';
import protobuf from 'protobufjs';
import { root, SERVICE_NAME } from '../src/proto.js';
import { MESSAGES, METHODS } from '../client/transport/schema.js';
import { encode, decode } from '../client/transport/codec.js';

const ns = root.lookup('logd.v1') as protobuf.Namespace;
const types = ns.nestedArray.filter((t): t is protobuf.Type => t instanceof protobuf.Type);

/** A value for every field, nested messages included, with the awkward cases of each type. */
function sample(type: protobuf.Type, depth = 0, variant = 0): Record<string, unknown> {
  const o: Record<string, unknown> = {};
  let oneofDone = false;
  for (const f of type.fieldsArray) {
    if (f.partOf) {
      if (oneofDone || (variant % f.partOf.fieldsArray.length) !== f.partOf.fieldsArray.indexOf(f)) continue;
      oneofDone = true;
    }
    const one = (): unknown => {
      switch (f.type) {
        case 'string': return variant % 2 ? 'ünïcødé 🙂 \u0000' : `v${f.id}`;
        case 'bytes': return Buffer.from(variant % 2 ? [] : [0, 1, 2, 255, f.id]);
        case 'bool': return variant % 2 === 0;
        case 'double': return [1.5, Number.NaN, -Infinity, 1e300][variant % 4];
        case 'int32': return [-1, 2147483647, -2147483648, 0][variant % 4];
        case 'uint32': return [4294967295, 0, 300, 1][variant % 4];
        case 'uint64': return [2 ** 53 - 1, 0, 2 ** 32 + 5, 127][variant % 4];
        default: return depth > 3 ? null : sample(ns.lookupType(f.type), depth + 1, variant);
      }
    };
    const v = one();
    if (v === null) continue;
    o[f.name] = f.repeated ? [v, one()] : v;
  }
  return o;
}

/** protobufjs's view of a message: every field, defaults included, 64-bit as numbers. */
function pbObject(type: protobuf.Type, bytes: Uint8Array): Record<string, unknown> {
  return type.toObject(type.decode(bytes), { defaults: true, longs: Number, bytes: Buffer as never, arrays: true, oneofs: false }) as Record<string, unknown>;
}

function normal(v: unknown): unknown {
  if (Buffer.isBuffer(v) || v instanceof Uint8Array) return [...v];
  if (Array.isArray(v)) return v.map(normal);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).filter(([, x]) => x !== null && x !== undefined).map(([k, x]) => [k, normal(x)]));
  if (typeof v === 'number' && Number.isNaN(v)) return 'NaN';
  return v;
}

describe('the client codec', () => {
  it('has every message and field of the .proto, with the same numbers and types', () => {
    const fromProto = Object.fromEntries(types.map((t) => [t.name, t.fieldsArray.map((f) => [f.name, f.id, f.type, f.repeated ? 1 : 0, f.partOf ? 1 : 0])]));
    expect(MESSAGES).toEqual(fromProto);
    const svc = root.lookupService(SERVICE_NAME);
    const fromService = Object.fromEntries(svc.methodsArray.map((m) => [m.name[0].toLowerCase() + m.name.slice(1), [`/${SERVICE_NAME}/${m.name}`, m.requestType, m.responseType, !!m.requestStream, !!m.responseStream]]));
    expect(METHODS).toEqual(fromService);
  });

  for (const type of types) {
    it(`${type.name}: what it writes, protobufjs reads back exactly, and the other way round`, () => {
      for (let variant = 0; variant < 4; variant++) {
        const m = sample(type, 0, variant);
        const mine = encode(type.name, m);
        const theirs = type.encode(type.fromObject(m)).finish();
        expect(normal(pbObject(type, mine))).toEqual(normal(pbObject(type, theirs)));
        expect(normal(decode(type.name, theirs))).toEqual(normal(pbObject(type, theirs)));
        expect(normal(decode(type.name, mine))).toEqual(normal(pbObject(type, theirs)));
        // The decoded object carries every field, as protobufjs's defaults do.
        const decoded = decode(type.name, theirs);
        for (const f of type.fieldsArray) expect(f.name in decoded).toBe(true);
      }
    });
  }

  it('skips fields it does not know (a newer daemon) and refuses a truncated message with a clear error', () => {
    const Control = ns.lookupType('Control');
    const bytes = Buffer.concat([Buffer.from(Control.encode({ kind: 'k', seq: 7, message: 'hi' }).finish()), Buffer.from([0xa8, 0x1f, 0x05, 0xb2, 0x1f, 0x01, 0x41])]);
    expect(decode('Control', bytes)).toEqual({ kind: 'k', seq: 7, message: 'hi' });
    expect(() => decode('Control', bytes.subarray(0, 4))).toThrow(/not a valid Control: .*ends/);
  });
});
