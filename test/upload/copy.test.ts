// The hand-written binary COPY encoder against a real PostgreSQL: every type
// it writes reads back equal, including when its buffer grows mid-tuple.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { pgUnavailable, startPg, type PgCluster } from '../pg/cluster.js';
import { CopyWriter, copyInto, decodeFloat8Array, decodeInt4Array } from '../../dist/daemon/upload/copy.js';

const why = pgUnavailable();
let pgc: PgCluster;

describe.skipIf(why !== null)(`binary COPY${why ? ` (skipped: ${why})` : ''}`, () => {
  beforeAll(async () => {
    pgc = await startPg();
  });
  afterAll(() => pgc?.destroy());

  it('writes text, integers, doubles, NULL and arrays that read back equal, through many buffer growths', async () => {
    const c = new pg.Client({ connectionString: pgc.url });
    await c.connect();
    try {
      await c.query('CREATE TABLE t (s text, a smallint, b integer, c bigint, d float8, i integer[], v float8[])');
      const w = new CopyWriter(16); // tiny, so it grows at every kind of field
      const want: Array<[string, number, number, number, number, number[] | null, number[]]> = [];
      for (let r = 0; r < 500; r++) {
        const v = Array.from({ length: r % 7 }, (_, j) => (j === 3 ? NaN : r * 0.5 - j * 1e300));
        const i = r % 3 === 0 ? null : Array.from({ length: r % 5 }, (_, j) => j - 2);
        const s = `row ${r} é\0x`;
        want.push([s.replace('\0', '\uFFFD'), r - 250, r * 100_000, 2 ** 40 + r, -r / 3, i, v]);
        w.tuple(7).text(s).int2(r - 250).int4(r * 100_000).int8(2 ** 40 + r).float8(-r / 3);
        if (i) w.int4Array(i);
        else w.nil();
        w.float8Array(v);
      }
      await copyInto(c, 't', ['s', 'a', 'b', 'c', 'd', 'i', 'v'], w);
      const rows = (await c.query("SELECT s, a, b, c::float8 AS c, d, encode(array_send(i), 'base64') AS i, encode(array_send(v), 'base64') AS v FROM t")).rows;
      expect(rows).toHaveLength(500);
      rows.forEach((row, r) => {
        const [s, a, b, cc, d, i, v] = want[r];
        expect([row.s, row.a, row.b, row.c, row.d]).toEqual([s, a, b, cc, d]);
        expect(row.i === null ? null : [...decodeInt4Array(Buffer.from(row.i, 'base64'))]).toEqual(i);
        expect([...decodeFloat8Array(Buffer.from(row.v, 'base64'))]).toEqual(v);
      });
    } finally {
      await c.end();
    }
  });
});
