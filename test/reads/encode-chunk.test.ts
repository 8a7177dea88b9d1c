// A read worker's hand-made HistoryChunk bytes (daemon/reads/encode-chunk.ts) decode, with the .proto's own
// codec, to exactly the message protobufjs would have made: every field, empty columns, large varints, text keys.
import { describe, expect, it } from 'vitest';
import { encodeHistoryChunk } from '../../daemon/reads/encode-chunk.js';
import { messageType } from '../../src/proto.js';
import { bytesOf, type HistoryChunkMsg } from '../../src/wire.js';

const T = messageType('HistoryChunk');
const plain = (m: unknown) => T.toObject(T.decode(m as Uint8Array), { defaults: true, bytes: Array });

describe('encodeHistoryChunk', () => {
  it('decodes as the message it encodes (protobufjs writes a zero it was given; proto3 leaves it out, as here)', () => {
    const n = 1000;
    const cases: HistoryChunkMsg[] = [
      { keys: ['loss', 'acc', 'ünïcödé/κλειδί', ''], rows: n, steps: bytesOf(Float64Array.from({ length: n }, (_, i) => i)), times: bytesOf(new Float64Array(n).fill(1.7e9)),
        counts: bytesOf(new Uint32Array(n).fill(2)), keyIds: bytesOf(Uint32Array.from({ length: 2 * n }, (_, i) => i % 2)),
        values: bytesOf(Float64Array.from({ length: 2 * n }, (_, i) => (i === 5 ? NaN : i === 6 ? -Infinity : i / 3))), writer: 300 },
      { keys: [], rows: 0, steps: new Uint8Array(), times: new Uint8Array(), counts: new Uint8Array(), keyIds: new Uint8Array(), values: new Uint8Array(), writer: 0 },
      { keys: ['m'], rows: 3, steps: bytesOf(new Float64Array([1, 2, 3])), times: bytesOf(new Float64Array(3)), counts: bytesOf(new Uint32Array([1, 1, 1])),
        keyIds: bytesOf(new Uint32Array(3)), values: bytesOf(new Float64Array([0.5, 1, 2])), writer: 0,
        mins: bytesOf(new Float64Array([0, 1, 2])), maxs: bytesOf(new Float64Array([1, 1, 9])), storedPoints: 2 ** 40 + 7 },
      { keys: [], rows: 1, steps: bytesOf(new Float64Array([7])), times: bytesOf(new Float64Array([8])), counts: bytesOf(new Uint32Array([0])),
        keyIds: new Uint8Array(), values: new Uint8Array(), writer: 2 ** 31 + 1, attempt: 129, superseded: true },
    ];
    for (const c of cases) {
      const mine = encodeHistoryChunk(c);
      const theirs = T.encode(T.fromObject(c)).finish();
      expect(plain(mine)).toEqual(plain(theirs));
      expect(mine.byteLength).toBeLessThanOrEqual(theirs.byteLength);
      expect(mine.byteOffset).toBe(0);
      expect(mine.byteLength).toBe(mine.buffer.byteLength); // a buffer of its own: moved whole, nothing else with it
    }
  });
});
