// The uploader: a node's runs reach the shared PostgreSQL store whole (every
// row, config, summary, final state, system metrics), and read back through
// `--store` in the same formats as from the local store.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { pgUnavailable, startPg, type PgCluster } from '../pg/cluster.js';
import path from 'node:path';
import { cli, cliJson, runScript, script, startDaemon, ROOT, type TestEnv } from '../helpers.js';
import { byWriterStep, nodeEnv, rawRows, reading, storeJson, waitUploaded } from './helpers.js';

const why = pgUnavailable();
const QUERY = path.join(ROOT, 'dist', 'daemon', 'query', 'index.js');
let pgc: PgCluster;
let t: TestEnv | undefined;

describe.skipIf(why !== null)(`upload to PostgreSQL${why ? ` (skipped: ${why})` : ''}`, () => {
  beforeAll(async () => {
    pgc = await startPg();
  });
  afterAll(() => pgc?.destroy());
  afterEach(async () => {
    await t?.cleanup();
    t = undefined;
  });

  it('uploads a finished run whole and reads it back through --store like the local store', async () => {
    t = nodeEnv('node-a', pgc.socketUrl); // the Unix-socket form; read back over TCP
    await startDaemon(t);
    const w = script(t, 'w.mjs', `
      const run = await logd.init({ project: 'up', group: 'g1', config: { lr: 0.1 }, tags: ['x'] });
      for (let s = 0; s < 5000; s++) {
        const row = { loss: 1 / (s + 1), acc: s / 5000, 'a/b': s };
        if (s % 7 === 0) row.sparse = s;
        run.log(row, { step: s });
      }
      run.summary.update({ best: 3 });
      const res = await run.finish();
      console.log(run.id + ' ' + res.state);
    `);
    const r = await runScript(t, w);
    expect(r.exitCode, r.stderr).toBe(0);
    const id = r.stdout.trim().split(' ')[0];
    const shared = await waitUploaded(t, pgc.url, id, 5000);
    const local = await cliJson(t, ['show', id, '--rows', '0']);
    expect(shared).toMatchObject({ id, project: 'up', group: 'g1', state: 'finished', tags: ['x'], config: local.config, summary: local.summary });
    expect(shared.metadata.node).toBe('node-a');
    expect(byWriterStep(await rawRows(t, id, pgc.url))).toEqual(byWriterStep(await rawRows(t, id)));
    // One metric alone, and the last rows.
    const one = await rawRows(t, id, pgc.url, ['--keys', 'sparse']);
    expect(one).toHaveLength(Math.ceil(5000 / 7));
    expect(one[1]).toMatchObject({ _step: 7, sparse: 7 });
    const tail = await storeJson(t, pgc.url, ['show', id, '--rows', '3']);
    expect(tail.lastRows.map((x: any) => x._step)).toEqual([4997, 4998, 4999]);
    // Downsampled (HistoryQuery.points): the shared store answers the buckets the daemon answers.
    const q = script(t, 'downsampled.mjs', `
      const { openSource } = await import(${JSON.stringify(QUERY)});
      const out = {};
      for (const [name, store] of [['local', ''], ['shared', process.argv[3]]]) {
        const src = await openSource({ store });
        const h = await src.history(process.argv[2], { keys: ['loss', 'sparse'], points: 100 });
        out[name] = { keys: h.keys, rows: h.rows, steps: [...h.steps], values: [...h.values], min: [...h.buckets.min], max: [...h.buckets.max], stored: h.buckets.stored };
        await src.close();
      }
      console.log(JSON.stringify(out));
      process.exit(0);
    `);
    const d = await runScript(t, q, [id, pgc.url]);
    expect(d.exitCode, d.stderr).toBe(0);
    const both = JSON.parse(d.stdout.trim().split('\n').at(-1)!);
    expect(both.shared).toEqual(both.local);
    expect(both.shared).toMatchObject({ keys: ['loss', 'sparse'], rows: 200, stored: [5000, Math.ceil(5000 / 7)] });
    expect(both.shared.max[0]).toBe(1); // loss at step 0, kept in its bucket's max (rows 0–99 are loss's buckets)
    expect(both.shared.values[0]).toBeLessThan(0.1); // while the bucket's mean is far below it
    // The node's system metrics over the run's lifetime.
    const sys = await rawRows(t, id, pgc.url, ['--system']);
    expect(sys.length).toBeGreaterThan(0);
    expect(sys).toEqual(await rawRows(t, id, undefined, ['--system']));
    const runs = await storeJson(t, pgc.url, ['runs', '--group', 'g1']);
    expect(runs.map((x: any) => x.id)).toEqual([id]);
    const table = (await cli(reading(t, pgc.url), ['runs', '--group', 'g1'])).stdout.split('\n');
    expect(table[0]).toMatch(/^ID +PROJECT +GROUP +NAME +STATE +ROWS +RANK +NODE +CREATED$/);
    expect(table[1]).toMatch(new RegExp(`^${id} +up +g1 +${id} +finished +5000 +- +node-a `));
  });
});
