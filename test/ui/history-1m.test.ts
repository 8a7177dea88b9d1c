// Issue 11: a run of 1 M rows is downsampled where the data is. The daemon's
// ReadHistory with `points` answers buckets (a bounded size), and the spike
// and the dip among a million points survive as a bucket's max and min; the
// dashboard's history answer stays under 200 kB for it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import path from 'node:path';
import { makeEnv, script, runScript, ROOT, type TestEnv } from '../helpers.js';
import { startUi, getJson, logRuns, type UiProcess } from './helpers.js';

const ROWS = 1_000_000;
let t: TestEnv;
let id: string;

beforeAll(async () => {
  t = makeEnv();
  [id] = await logRuns(t, [{ name: 'one-million', steps: ROWS, row: '{ loss: step === 777777 ? 1e6 : step === 123456 ? -1e6 : (step % 10) / 10 }' }]);
}, 300_000);
afterAll(async () => t && (await t.cleanup()));

describe('issue 11: history downsampled where the data is', () => {
  it("the daemon's answer for a 1 M-row run with points=1000 is 1000 buckets (under 64 kB on the wire) that keep the spike and the dip", async () => {
    // The raw gRPC stream, so the bytes counted are the bytes the daemon sent.
    const file = script(t, 'read-downsampled.mjs', `
      const { findDaemon } = await import(${JSON.stringify(path.join(ROOT, 'dist', 'client', 'discovery.js'))});
      const { connectionFor } = await import(${JSON.stringify(path.join(ROOT, 'dist', 'client', 'connection.js'))});
      const conn = connectionFor(await findDaemon());
      const call = conn.readHistory({ runId: process.argv[2], keys: ['loss'], tailRows: 0, system: false, points: 1000 });
      const out = { chunks: 0, keys: [], rows: 0, bytes: 0, stored: [], max: -Infinity, min: Infinity, maxBuckets: 0, minBuckets: 0, meanMax: -Infinity };
      await new Promise((resolve, reject) => {
        call.on('data', (c) => {
          out.chunks++;
          out.keys.push(...c.keys);
          out.rows += c.rows;
          out.stored.push(Number(c.storedPoints));
          for (const f of ['steps', 'times', 'counts', 'keyIds', 'values', 'mins', 'maxs']) out.bytes += c[f].byteLength;
          const f64 = (b) => new Float64Array(new Uint8Array(b).buffer);
          for (const v of f64(c.maxs)) { if (v > out.max) out.max = v; if (v === 1e6) out.maxBuckets++; }
          for (const v of f64(c.mins)) { if (v < out.min) out.min = v; if (v === -1e6) out.minBuckets++; }
          for (const v of f64(c.values)) if (v > out.meanMax) out.meanMax = v;
        });
        call.on('error', reject);
        call.on('end', resolve);
      });
      console.log(JSON.stringify(out));
      process.exit(0);
    `);
    const r = await runScript(t, file, [id], {}, 120_000);
    expect(r.exitCode, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim().split('\n').at(-1)!);
    expect(out).toMatchObject({ chunks: 1, keys: ['loss'], rows: 1000, stored: [ROWS], max: 1e6, min: -1e6, maxBuckets: 1, minBuckets: 1 });
    expect(out.bytes).toBeLessThanOrEqual(1000 * 48);
    expect(out.meanMax).toBeLessThan(1e6); // the mean alone would hide the spike
  }, 180_000);

  it('the query layer and the dashboard answer it downsampled too: under 200 kB, the spike in a max, the stored count said', async () => {
    const file = script(t, 'query-downsampled.mjs', `
      const { openSource } = await import(${JSON.stringify(path.join(ROOT, 'dist', 'daemon', 'query', 'index.js'))});
      const src = await openSource();
      const h = await src.history(process.argv[2], { keys: ['loss'], points: 500 });
      console.log(JSON.stringify({ rows: h.rows, keys: h.keys, stored: h.buckets?.stored, max: Math.max(...h.buckets.max), min: Math.min(...h.buckets.min) }));
      process.exit(0);
    `);
    const r = await runScript(t, file, [id], {}, 120_000);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout.trim().split('\n').at(-1)!)).toEqual({ rows: 500, keys: ['loss'], stored: [ROWS], max: 1e6, min: -1e6 });

    let ui: UiProcess | null = null;
    try {
      ui = await startUi(t);
      const a = await getJson(ui, `/api/runs/${id}/history?keys=loss&points=1500`);
      expect(a.status).toBe(200);
      expect(a.bytes).toBeLessThanOrEqual(200_000);
      const loss = a.body.series.loss;
      expect(loss.points).toBe(ROWS);
      expect(loss.step).toHaveLength(1500);
      expect(loss.max.filter((v: number) => v === 1e6)).toHaveLength(1);
      expect(Math.min(...loss.min)).toBe(-1e6);
      const keys = await getJson(ui, `/api/runs/${id}/keys`);
      expect(keys.body).toMatchObject({ keys: ['loss'], allKeys: 1 });
    } finally {
      await ui?.stop();
    }
  }, 180_000);
});
