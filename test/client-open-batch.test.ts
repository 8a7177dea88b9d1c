// The open batch's fast path (client/open-batch.ts): a row that names the
// last flat row's keys again, in the same order, takes their ids without a
// lookup. Whatever path a row takes, the sealed batch must read back as the
// rows that were logged, and a bad row must leave nothing behind. Checked
// against a plain flattening of each row, over random sequences of rows that
// switch between the shapes a training loop (and a careless caller) logs.
import { describe, expect, it } from 'vitest';
import { OpenBatch } from '../client/open-batch.js';
import { decode } from '../client/transport/codec.js';

type Row = Record<string, unknown>;

/** What a row means: its flattened name -> number pairs, or the error it must raise. */
function reference(row: Row, prefix = '', out = new Map<string, number>()): Map<string, number> {
  for (const k in row) {
    const v = row[k];
    const name = prefix + k;
    if (typeof v === 'number') put(out, name, v);
    else if (typeof v === 'boolean') put(out, name, v ? 1 : 0);
    else if (v === null || v === undefined) continue;
    else if (typeof v === 'object' && !Array.isArray(v)) reference(v as Row, `${name}/`, out);
    else throw new TypeError(`bad value for ${name}`);
  }
  return out;
}
function put(out: Map<string, number>, name: string, v: number): void {
  if (name === '' || out.has(name)) throw new TypeError(`bad name ${name}`);
  out.set(name, v);
}

/** The sealed batch read back as rows of name -> value pairs, with their steps. */
function readBack(b: OpenBatch, keys: string[]): Array<{ step: number; pairs: Map<string, number> }> {
  const { bytes } = b.seal(1, 0);
  const batch = (decode('WriteRequest', bytes) as { batch: Record<string, unknown> }).batch;
  const f64 = (u: unknown) => { const x = u as Uint8Array; return new Float64Array(x.buffer.slice(x.byteOffset, x.byteOffset + x.byteLength)); };
  const u32 = (u: unknown) => { const x = u as Uint8Array; return new Uint32Array(x.buffer.slice(x.byteOffset, x.byteOffset + x.byteLength)); };
  keys.push(...(batch.newKeys as string[] ?? []));
  const steps = f64(batch.steps), counts = u32(batch.counts), ids = u32(batch.keyIds), vals = f64(batch.values);
  const rows: Array<{ step: number; pairs: Map<string, number> }> = [];
  let p = 0;
  for (let r = 0; r < steps.length; r++) {
    const pairs = new Map<string, number>();
    for (let i = 0; i < counts[r]; i++, p++) pairs.set(keys[ids[p]], vals[p]);
    rows.push({ step: steps[r], pairs });
  }
  return rows;
}

/** A small seeded generator, so that a failure reproduces. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32);
}

const SHAPES: Array<(i: number) => Row> = [
  (i) => ({ loss: i, acc: i / 2, lr: 0.001 }), // the training loop's row
  (i) => ({ loss: i, acc: i / 2, lr: 0.001 }),
  (i) => ({ acc: i, loss: -i, lr: 1 }), // the same names, another order
  (i) => ({ loss: i, acc: i / 2 }), // one fewer
  (i) => ({ loss: i, acc: i / 2, lr: 0.001, extra: 7 }), // one more
  (i) => ({ loss: i, acc: true, lr: 0.5 }), // a boolean where a number was
  (i) => ({ loss: i, acc: null, lr: 0.5 }), // a null is skipped
  (i) => ({ loss: i, acc: undefined, lr: 0.5 }),
  (i) => ({ loss: i, opt: { lr: i, m: 0.9 } }), // nested
  (i) => ({ 'opt/lr': i, opt: { lr: 1 } }), // one name twice: refused
  (i) => ({ loss: i, acc: 'high', lr: 0.5 }), // a string: refused
  (i) => ({ loss: i, acc: [1, 2], lr: 0.5 }), // an array: refused
  (i) => ({ loss: i, '': 3, lr: 0.5 }), // an empty name: refused
  (i) => ({ loss: Number.NaN, acc: Infinity, lr: -0 }),
  () => ({}),
];

describe('open batch: the same-names fast path', () => {
  it('random sequences of rows read back exactly as a plain flattening says; bad rows throw and leave nothing', () => {
    for (let seed = 1; seed <= 40; seed++) {
      const next = rng(seed);
      const b = new OpenBatch();
      const keys: string[] = [];
      const want: Array<{ step: number; pairs: Map<string, number> }> = [];
      for (let i = 0; i < 400; i++) {
        // Runs of one shape, as a loop logs, broken by another now and then.
        const shape = SHAPES[next() < 0.7 && i > 0 ? Math.floor(seed + i / 25) % 2 : Math.floor(next() * SHAPES.length)];
        const row = shape(i);
        let expected: Map<string, number> | Error;
        try {
          expected = reference(row);
        } catch (e) {
          expected = e as Error;
        }
        if (expected instanceof Error) {
          expect(() => b.add(row, i, 1000 + i), `seed ${seed} row ${i} ${JSON.stringify(row)}`).toThrow(TypeError);
          continue;
        }
        b.add(row, i, 1000 + i);
        want.push({ step: i, pairs: expected }); // a row of nothing is a row too (its step)
      }
      const got = readBack(b, keys);
      expect(got.length, `seed ${seed}`).toBe(want.length);
      for (let r = 0; r < want.length; r++) {
        expect(got[r].step).toBe(want[r].step);
        expect([...got[r].pairs].sort(), `seed ${seed} step ${want[r].step}`).toEqual([...want[r].pairs].sort());
      }
    }
  });

  it('a row with the same names as the last takes their ids; a rename, a reorder or a nested value goes the general way', () => {
    const b = new OpenBatch();
    b.add({ a: 1, b: 2 }, 0, 0);
    b.add({ a: 3, b: 4 }, 1, 0); // fast path
    b.add({ b: 5, a: 6 }, 2, 0); // reordered: general path, same ids
    b.add({ a: 7, c: 8 }, 3, 0); // a new name
    b.add({ a: 9, c: 10 }, 4, 0); // fast path on the new shape
    expect(() => b.add({ a: 11, c: 'x' }, 5, 0)).toThrow(/"c" is a string/);
    b.add({ a: 12, c: 13 }, 6, 0);
    expect(b.keys).toEqual(['a', 'b', 'c']);
    const rows = readBack(b, []);
    expect(rows.map((r) => [r.step, Object.fromEntries(r.pairs)])).toEqual([
      [0, { a: 1, b: 2 }], [1, { a: 3, b: 4 }], [2, { b: 5, a: 6 }], [3, { a: 7, c: 8 }], [4, { a: 9, c: 10 }], [6, { a: 12, c: 13 }],
    ]);
  });

  it('the fast path grows the batch like the general one (rows and pairs past the first allocation)', () => {
    const b = new OpenBatch();
    const row: Row = {};
    for (let k = 0; k < 60; k++) row[`m${k}`] = k;
    for (let i = 0; i < 300; i++) b.add({ ...row, m0: i }, i, 0); // 18 000 pairs: past the 4096 first allocated
    const rows = readBack(b, []);
    expect(rows).toHaveLength(300);
    expect(rows[299].pairs.get('m0')).toBe(299);
    expect(rows[299].pairs.get('m59')).toBe(59);
  });
});
