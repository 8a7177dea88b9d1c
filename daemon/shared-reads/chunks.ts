// A History read from the shared store (daemon/query) as ReadHistory's chunks, the shape the node's daemon
// streams (daemon/reads/chunks.ts): the first chunk names every key, later ones add none; a chunk holds rows of
// one writer (and one attempt, when every attempt's rows were asked for); a downsampled answer is one chunk per
// metric with its buckets' min and max and how many points it has stored.
import { bytesOf, type HistoryChunkMsg } from '../../src/wire.js';
import type { History } from '../query/index.js';

/** Rows per chunk at most: a chunk stays a few MB whatever the run. */
const CHUNK_ROWS = 16_384;
const CHUNK_VALUES = 262_144;

export function* historyChunks(h: History, withAttempts: boolean): Generator<HistoryChunkMsg> {
  let keys = h.keys;
  if (h.rows === 0) {
    if (keys.length) yield { keys, rows: 0, steps: new Uint8Array(), times: new Uint8Array(), counts: new Uint8Array(), keyIds: new Uint8Array(), values: new Uint8Array(), writer: 0 };
    return;
  }
  const b = h.buckets;
  let r = 0;
  while (r < h.rows) {
    // One chunk: rows [r, e) that share what a chunk has one of.
    const same = (x: number): boolean => b
      ? h.keyIds[h.start[x]] === h.keyIds[h.start[r]]
      : h.writers[x] === h.writers[r] && (!withAttempts || (h.attempts?.[x] === h.attempts?.[r] && h.superseded?.[x] === h.superseded?.[r]));
    let e = r + 1;
    while (e < h.rows && same(e) && (b || (e - r < CHUNK_ROWS && h.start[e + 1] - h.start[r] <= CHUNK_VALUES))) e++;
    const lo = h.start[r], hi = h.start[e];
    const counts = new Uint32Array(e - r);
    for (let i = r; i < e; i++) counts[i - r] = h.start[i + 1] - h.start[i];
    const c: HistoryChunkMsg = {
      keys, rows: e - r, writer: b ? 0 : h.writers[r],
      steps: bytesOf(h.steps.subarray(r, e)), times: bytesOf(h.times.subarray(r, e)), counts: bytesOf(counts),
      keyIds: bytesOf(h.keyIds.subarray(lo, hi)), values: bytesOf(h.values.subarray(lo, hi)),
    };
    if (b) Object.assign(c, { mins: bytesOf(b.min.subarray(lo, hi)), maxs: bytesOf(b.max.subarray(lo, hi)), storedPoints: b.stored[h.keyIds[lo]] ?? e - r });
    else if (withAttempts && h.attempts) Object.assign(c, { attempt: h.attempts[r], superseded: !!h.superseded?.[r] });
    keys = [];
    yield c;
    r = e;
  }
}
