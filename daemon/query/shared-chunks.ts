// The shared store's chunks as a reader gets them (daemon/query/shared.ts, shared-group.ts): one snapshot's
// queries, a chunk's skeleton, and the chunks' arrays decoded into the columnar History.
import type pg from 'pg';
import { decodeFloat8Array, decodeInt4Array, decodeFloat8Into, arrayLength } from '../upload/copy.js';
import type { History } from './source.js';

/** A stored chunk as COPY gave it: its arrays in array_send's form. */
export interface RawChunk { steps: Buffer; times: Buffer; writer: number; values: Array<{ key_id: number; idx: Buffer | null; vals: Buffer }> }

/** A query of one snapshot. */
export type Q = <R extends pg.QueryResultRow>(text: string, values: unknown[]) => Promise<R[]>;
/** One snapshot's queries and binary COPY reads (daemon/upload/copy.ts copyOut). */
export interface Snapshot { q: Q; copy: (sql: string) => Promise<Array<Array<Buffer | null>>> }

/** A chunk of a run as its skeleton: which writer's, from which sequence number, in which order it came, its rows. */
export type Skel = { writer: number; seq_lo: number; ord: number; nrows: number };



/**
 * Chunks into the columnar History, decoding their arrays straight into it; with a key filter, rows carrying none
 * of the keys are left out (as the local source does).
 */
export function assemble(keys: string[], chunks: RawChunk[], pos: Map<number, number>, filtered: boolean): History {
  let rows = 0, pairs = 0;
  for (const c of chunks) {
    rows += arrayLength(c.steps);
    for (const v of c.values) pairs += arrayLength(v.vals);
  }
  const steps = new Float64Array(rows), times = new Float64Array(rows), writers = new Uint32Array(rows);
  const start = new Uint32Array(rows + 1), keyIds = new Uint32Array(pairs), values = new Float64Array(pairs);
  let r0 = 0, p0 = 0;
  for (const c of chunks) {
    const n = arrayLength(c.steps);
    const vs = [...c.values].sort((a, b) => a.key_id - b.key_id);
    if (vs.length > 0 && vs.every((v) => !v.idx && arrayLength(v.vals) === n)) {
      // Every metric of the chunk in every row (the common case): row i's pairs are at p0 + i*K, in key order,
      // written row by row (column by column would stride the whole output K times).
      const K = vs.length;
      decodeFloat8Into(c.steps, steps, r0);
      decodeFloat8Into(c.times, times, r0);
      writers.fill(c.writer, r0, r0 + n);
      for (let i = 0; i < n; i++) start[r0 + i] = p0 + i * K;
      const ks = vs.map((v) => pos.get(v.key_id) ?? 0), cols = vs.map((v) => new DataView(v.vals.buffer, v.vals.byteOffset, v.vals.byteLength));
      for (let i = 0, at = p0, o = 24; i < n; i++, o += 12) {
        for (let j = 0; j < K; j++, at++) {
          keyIds[at] = ks[j];
          values[at] = cols[j].getFloat64(o);
        }
      }
      r0 += n;
      p0 += n * K;
      continue;
    }
    const cSteps = decodeFloat8Array(c.steps), cTimes = decodeFloat8Array(c.times);
    const cVals = vs.map((v) => ({ key_id: v.key_id, idx: v.idx ? decodeInt4Array(v.idx) : null, vals: decodeFloat8Array(v.vals) }));
    const counts = new Uint32Array(n);
    for (const v of cVals) {
      if (v.idx) for (let i = 0; i < v.idx.length; i++) counts[v.idx[i]]++;
      else for (let i = 0; i < n; i++) counts[i]++;
    }
    // Row offsets of this chunk; rows without a pair vanish when filtering.
    const at = new Uint32Array(n);
    let r = r0, p = p0;
    for (let i = 0; i < n; i++) {
      if (filtered && counts[i] === 0) continue;
      steps[r] = cSteps[i];
      times[r] = cTimes[i];
      writers[r] = c.writer;
      start[r] = p;
      at[i] = p;
      p += counts[i];
      r++;
    }
    for (const v of cVals) {
      const k = pos.get(v.key_id) ?? 0;
      for (let j = 0; j < v.vals.length; j++) {
        const i = v.idx ? v.idx[j] : j;
        keyIds[at[i]] = k;
        values[at[i]++] = v.vals[j];
      }
    }
    r0 = r;
    p0 = p;
  }
  start[r0] = p0;
  return { keys, rows: r0, steps: steps.subarray(0, r0), times: times.subarray(0, r0), writers: writers.subarray(0, r0), start: start.subarray(0, r0 + 1), keyIds: keyIds.subarray(0, p0), values: values.subarray(0, p0) };
}

export function dropFirstRows(h: History, n: number): History {
  const p = h.start[n];
  const start = new Uint32Array(h.rows - n + 1);
  for (let r = 0; r <= h.rows - n; r++) start[r] = h.start[r + n] - p;
  return {
    keys: h.keys, rows: h.rows - n, steps: h.steps.subarray(n), times: h.times.subarray(n), writers: h.writers.subarray(n), start, keyIds: h.keyIds.subarray(p), values: h.values.subarray(p),
    ...(h.attempts ? { attempts: h.attempts.subarray(n), superseded: h.superseded!.subarray(n) } : {}),
  };
}
