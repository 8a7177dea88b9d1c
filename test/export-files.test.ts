// Issue 33: `logd export --format parquet|arrow`, a run's history as one columnar file, read back by the readers
// people use (pyarrow, pandas; where the venv lacks them, the JavaScript readers) and compared with the same
// export as JSON lines, row for row: merged by step and raw (two writers of one run), NaN, ±inf and values a row
// does not have (null), a key named like an internal field. Real daemon, real trainers.
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { cli, exportJsonl, makeEnv, runScript, script, startDaemon, type TestEnv } from './helpers.js';
import { PYTHON } from './python/py-helpers.js';

let t: TestEnv;
afterEach(async () => t && (await t.cleanup()));

function pyarrowMissing(): string | null {
  try {
    execFileSync(PYTHON, ['-c', 'import pyarrow, pandas'], { stdio: 'pipe', timeout: 60_000 });
    return null;
  } catch {
    return `${PYTHON} has no pyarrow (make python installs it from python/read-requirements.txt)`;
  }
}

/** The file's rows as JSON-ready objects: by pyarrow when there is one, else by hyparquet / apache-arrow. */
async function readBack(file: string, format: 'parquet' | 'arrow'): Promise<{ rows: Array<Record<string, unknown>>; types: Record<string, string>; by: string }> {
  if (pyarrowMissing() === null) {
    const out = execFileSync(PYTHON, ['-c', `
import json, math, sys
import pyarrow.parquet as pq, pyarrow.feather as f
t = pq.read_table(sys.argv[1]) if sys.argv[2] == "parquet" else f.read_table(sys.argv[1])
def v(x):
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")
    return x
rows = [{k: v(x) for k, x in r.items() if x is not None} for r in t.to_pylist()]
print(json.dumps({"rows": rows, "types": {fl.name: str(fl.type) for fl in t.schema}}))
`, file, format], { maxBuffer: 1 << 28 }).toString();
    return { ...JSON.parse(out), by: 'pyarrow' };
  }
  const v = (x: unknown) => (typeof x === 'number' && !Number.isFinite(x) ? (Number.isNaN(x) ? 'NaN' : x > 0 ? 'Infinity' : '-Infinity') : typeof x === 'bigint' ? Number(x) : x);
  if (format === 'parquet') {
    const { parquetReadObjects } = await import('hyparquet');
    const b = fs.readFileSync(file);
    const objs = await parquetReadObjects({ file: b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer });
    return { rows: objs.map((o) => Object.fromEntries(Object.entries(o).filter(([, x]) => x !== null && x !== undefined).map(([k, x]) => [k, v(x)]))), types: {}, by: 'hyparquet' };
  }
  const arrow = await import('apache-arrow');
  const table = arrow.tableFromIPC(fs.readFileSync(file));
  return { rows: table.toArray().map((r) => Object.fromEntries(Object.entries(r.toJSON()).filter(([, x]) => x !== null).map(([k, x]) => [k, v(x)]))), types: {}, by: 'apache-arrow' };
}

describe('logd export --format parquet and arrow', () => {
  it('merged by step and raw, two writers, NaN, ±inf and missing values: the same rows as JSON lines', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    await startDaemon(t);
    const r = await runScript(t, script(t, 'train.mjs', `
      const run = await logd.init({ project: 'files', name: 'cols' });
      const child = await logd.attach(run.handle());  // a second writer of the same run: rows of one step merge
      for (let step = 0; step < 3000; step++) {
        const row = { loss: 1 / (step + 1), 'a/b': step % 11 === 0 ? NaN : step };
        if (step % 5 === 0) row.rare = step % 10 === 0 ? Infinity : -Infinity;
        if (step === 7) row.__proto__x = 1;
        run.log(row, { step });
        if (step % 3 === 0) child.log({ other: step * 2 }, { step });
      }
      await child.finish();
      await run.finish();
      console.log('run ' + run.id);
    `));
    expect(r.exitCode, r.stderr).toBe(0);
    const id = r.stdout.split('\n').find((l) => l.startsWith('run '))!.slice(4);
    for (const raw of [false, true]) {
      const want = await exportJsonl(t, id, raw ? ['--raw'] : []); // NaN and ±inf as their names, as readBack says them
      expect(want.length).toBe(raw ? 4000 : 3000);
      for (const format of ['parquet', 'arrow'] as const) {
        const file = path.join(t.dir, `out-${raw}.${format}`);
        const e = await cli(t, ['export', id, '--format', format, '--output', file, ...(raw ? ['--raw'] : [])]);
        expect(e.stderr).toMatch(new RegExp(`wrote ${want.length} rows × \\d+ columns of run ${id} to .*\\(${format}, \\d+ bytes\\)`));
        const got = await readBack(file, format);
        expect(got.rows, `${format} raw=${raw} read by ${got.by}`).toEqual(want);
        if (got.by === 'pyarrow') {
          expect(got.types).toMatchObject({ _step: 'double', _time: 'double', loss: 'double', 'a/b': 'double', rare: 'double', other: 'double' });
          if (raw) expect(got.types._writer).toBe('int32');
        }
      }
    }
    // An existing file is not overwritten without --force, and a failed export leaves nothing half-written.
    const file = path.join(t.dir, 'out-false.parquet');
    const before = fs.readFileSync(file);
    const again = await cli(t, ['export', id, '--format', 'parquet', '--output', file], { reject: false });
    expect(again.exitCode).toBe(1);
    expect(again.stderr).toMatch(/exists; add --force/);
    expect(fs.readFileSync(file).equals(before)).toBe(true);
    expect(fs.readdirSync(t.dir).filter((f) => f.includes('logd-tmp'))).toEqual([]);
  }, 120_000);

  it('--group: every rank of a group in one file, long form with run_id and rank first, in each format; bad input named', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    await startDaemon(t);
    const train = script(t, 'rank.mjs', `
      const rank = Number(process.env.RANK);
      const run = await logd.init({ project: 'files', group: 'g1', name: 'r' + rank });
      for (let step = 0; step < 100; step++) {
        const row = { loss: rank * 1000 + step };
        if (rank === 2 && step % 10 === 0) row.only2 = step === 0 ? NaN : -step;
        run.log(row, { step });
      }
      await run.finish();
      console.log('run ' + run.id);
    `);
    const ids: string[] = [];
    for (const rank of [2, 0, 1]) { // made out of rank order: the export sorts by rank
      const r = await runScript(t, train, [], { RANK: String(rank), WORLD_SIZE: '3', LOCAL_RANK: String(rank), LOCAL_WORLD_SIZE: '3' });
      expect(r.exitCode, r.stderr).toBe(0);
      ids[rank] = r.stdout.split('\n').find((l) => l.startsWith('run '))!.slice(4);
    }
    const e = await cli(t, ['export', '--group', 'g1']);
    const lines = e.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(lines).toHaveLength(300);
    expect(Object.keys(lines[0]).slice(0, 4)).toEqual(['run_id', 'rank', '_step', '_time']);
    expect(lines.map((l) => l.rank)).toEqual([...Array(100).fill(0), ...Array(100).fill(1), ...Array(100).fill(2)]);
    // Each run's rows are exactly its own export's, with run_id and rank before them.
    const want: Array<Record<string, unknown>> = [];
    for (const rank of [0, 1, 2]) for (const row of await exportJsonl(t, ids[rank])) want.push({ run_id: ids[rank], rank, ...row });
    expect(lines).toEqual(want);
    expect(lines[200].only2).toBe('NaN');
    // CSV: one header for every run (a metric of one run only is an empty cell in the others').
    const csv = (await cli(t, ['export', '--group', 'g1', '--format', 'csv'])).stdout.trim().split('\n');
    expect(csv[0]).toBe('run_id,rank,_step,_time,loss,only2');
    expect(csv).toHaveLength(301);
    expect(csv[1]).toMatch(new RegExp(`^${ids[0]},0,0,[0-9.]+,0,$`));
    expect(csv[201]).toMatch(new RegExp(`^${ids[2]},2,0,[0-9.]+,2000,NaN$`));
    expect(csv[211]).toMatch(new RegExp(`^${ids[2]},2,10,[0-9.]+,2010,-10$`));
    // Parquet and Arrow: the same rows as the JSON lines.
    for (const format of ['parquet', 'arrow'] as const) {
      const file = path.join(t.dir, `group.${format}`);
      const w = await cli(t, ['export', '--group', 'g1', '--format', format, '--output', file]);
      expect(w.stderr).toMatch(new RegExp(`wrote 300 rows × 6 columns of 3 runs of group g1 to .*\\(${format}, \\d+ bytes\\)`));
      const got = await readBack(file, format);
      expect(got.rows, `${format} read by ${got.by}`).toEqual(lines);
      if (got.by === 'pyarrow') expect(got.types).toMatchObject({ run_id: 'string', rank: 'int32', _step: 'double', loss: 'double', only2: 'double' });
    }
    const none = await cli(t, ['export', '--group', 'nosuch'], { reject: false });
    expect(none.exitCode).toBe(1);
    expect(none.stderr).toMatch(/no group "nosuch" in /);
    const neither = await cli(t, ['export'], { reject: false });
    expect(neither.exitCode).toBe(2);
    expect(neither.stderr).toMatch(/give a run id, or --group NAME/);
    const both = await cli(t, ['export', ids[0], '--group', 'g1'], { reject: false });
    expect(both.exitCode).toBe(2);
    expect(both.stderr).toMatch(/give a run id or --group, not both/);
  }, 120_000);
});
