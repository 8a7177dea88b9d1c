// Issue 33, first slice: a run's full history and a table of runs read back
// into pandas through logd.Api, from a real daemon: every stored row exactly
// (NaN and ±inf too), keys only some rows have (NaN elsewhere), a key no row
// has (an all-NaN column), config flattened into config.* columns, and an
// unknown run id named in a clear error.
import { afterEach, describe, expect, it } from 'vitest';
import path from 'node:path';
import { makeEnv, killDaemon, type TestEnv } from '../helpers.js';
import { FIXTURES, pandasMissing, runPython } from './py-helpers.js';

const missing = pandasMissing();

let t: TestEnv;
afterEach(async () => {
  if (t) {
    await killDaemon(t.dir);
    await t.cleanup();
  }
});

describe.skipIf(missing !== null)(`reading runs back as DataFrames${missing ? ` (skipped: ${missing})` : ''}`, () => {
  it('history() gives every stored row exactly; runs().to_pandas() one row per run with config.* columns', async () => {
    t = makeEnv();
    const r = await runPython(t, [path.join(FIXTURES, 'readback.py')]);
    expect(r.exitCode, r.all).toBe(0);
    const lines = r.stdout.split('\n').filter(Boolean);
    const [h, h2, raw, runs] = lines.slice(0, 4).map((l) => JSON.parse(l));
    expect(h.columns).toEqual(['_step', '_time', 'loss', 'acc']);
    expect(h.rows).toBe(200);
    expect(h.step).toEqual(Array.from({ length: 200 }, (_, i) => i));
    expect(h.dtype_step).toBe('int64');
    expect(h.time_ok).toBe(true);
    const loss = Array.from({ length: 200 }, (_, s) => (s === 50 ? 'nan' : s === 60 ? 'inf' : s === 70 ? '-inf' : null));
    h.loss.forEach((v: string, s: number) => {
      if (loss[s]) expect(v).toBe(loss[s]);
      else expect(Number(v)).toBe(1 / (s + 1)); // repr() of a float64 round-trips: exact
    });
    expect(h.acc).toEqual(Array.from({ length: 200 }, (_, s) => (s % 10 === 0 ? s / 200 : null)));
    expect(h2).toEqual({ columns: ['_step', '_time', 'acc', 'nothing'], nothing_all_nan: true, acc_count: 20 });
    expect(raw).toEqual({ numpy_keys: ['loss'], numpy_rows: 200 });
    expect(runs).toEqual({ n: 2, names: ['a', 'b'], cols: ['config.lr', 'config.opt.beta', 'config.opt.name', 'summary.acc', 'summary.loss'], lr: [0.01, 0.1], state: ['finished'] });
    expect(lines[4]).toMatch(/^LOOKUP logd: no run 'nope-no-such-run' in this node's store/);
    // The filter language of `logd runs --filter`, applied by the daemon before paging.
    const f = JSON.parse(lines[5]);
    expect(f.filtered).toEqual(['a']);
    expect(f.best).toEqual(['a']);
    expect(f.none).toBe(0);
    expect(f.bad).toMatch(/^logd: ListRuns: filter: /);
    // scan_history(): the same rows in pages.
    const s = JSON.parse(lines[6]);
    expect(s.sizes).toEqual([64, 64, 64, 8]);
    expect(s.same).toBe(true);
    expect(s.cols).toEqual(['_step', '_time', 'loss', 'acc']);
    expect(s.np).toEqual([[['acc'], 20]]); // with keys, the rows that hold one of them (as history(keys=...))
    // A group's ranks: long form, or one row per step aggregated across the ranks.
    const g = JSON.parse(lines[7]);
    expect(g.long).toEqual([15, ['run_id', 'rank', '_step', '_time', 'loss']]);
    expect(g.mean).toEqual([10, 11, 12, 13, 14]);
    expect(g.steps).toEqual([0, 1, 2, 3, 4]);
    expect(g.runs).toEqual([3, 3, 3, 3, 3]);
    expect(g.max_extra).toEqual([null, null, null, null, null, 1]); // a key one rank logged at a step of its own
    // Arrow and polars (the `read` and `polars` extras), when installed.
    const ap = JSON.parse(lines[8]);
    if (ap.skip) console.log(`arrow/polars checks skipped: ${ap.skip}`);
    else {
      expect(ap.arrow_rows).toBeGreaterThanOrEqual(5);
      expect(ap.arrow_has).toBe(true);
      expect(ap.polars_shape[0]).toBe(ap.arrow_rows);
      expect(ap.ha).toEqual([200, ['_step', '_time', 'loss', 'acc']]);
      expect(ap.hp_cols).toEqual(['_step', '_time', 'loss', 'acc']);
      expect(ap.same).toBe(true);
    }
    // A group's runs read side by side, joined once: what one by one and joined gives.
    const g2 = JSON.parse(lines[9]);
    expect(g2.all).toBe('same');
    expect(g2.keys).toBe('same');
    expect(g2.rows).toBe(4);
    expect(new Set(g2.run_ids).size).toBe(2);
    const g3 = JSON.parse(lines[10]);
    expect(g3.clash).toMatch(/a metric named 'rank' would stand where the group table's own 'rank' column is/);
    expect(g3.keys_ok).toBe(2);
  }, 120_000);

  it('a run with 20 000 metric names: every column, or two named keys (one named twice) without a column for each of the others', async () => {
    t = makeEnv();
    const r = await runPython(t, [path.join(FIXTURES, 'readback_wide.py')], { timeout: 180_000 });
    expect(r.exitCode, r.all).toBe(0);
    const got = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(got.every).toEqual([40, 20_000]);
    expect(got.cols).toEqual(['_step', '_time', 'layer5/g', 'layer19999/g']);
    expect(got.rows).toBe(10); // the rows that hold one of the two
    expect(got.last).toEqual([19999, 20000, 20001, 20002, 20003]);
    // 40 x 20 000 float64 is 6.4 MB: the reader stays far from the gigabytes a matrix grown by rows of 1 024 took.
    expect(got.maxrss_mb).toBeLessThan(400);
  }, 240_000);
});

describe.skipIf(missing !== null)(`logd.Api's options${missing ? ` (skipped: ${missing})` : ''}`, () => {
  it('history(x=, min_step=, max_step=, samples=), scan_history(min_step=, max_step=), runs(tags=, order=), and bad input named', async () => {
    t = makeEnv();
    const r = await runPython(t, [path.join(FIXTURES, 'readback_options.py')], { timeout: 120_000 });
    expect(r.exitCode, r.all).toBe(0);
    const got = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(got.by_lr).toEqual(['r3', 'r1', 'r2', 'r0']);
    expect(got.by_lr_desc_2).toEqual(['r0', 'r2']); // sorted first, then the limit
    expect(got.by_name_desc).toEqual(['r3', 'r2', 'r1', 'r0']);
    expect(got.tags_ab).toEqual(['r1', 'r3']);
    expect(got.tag_b).toEqual(['r1', 'r3']);
    expect(got.rel).toEqual({ columns: ['_relative', '_step', '_time', 'loss', 'acc'], rows: 100, steps: [100, 199], rel_ok: true, same: true });
    expect(got.time_first).toEqual(['_time', '_step', 'loss']);
    expect(got.numpy_tail).toEqual(Array.from({ length: 10 }, (_, i) => 2990 + i));
    // The daemon's downsampling: about 100 buckets a metric, the spike at step 1234 kept in a bucket's max.
    expect(got.sampled.columns).toEqual(['metric', '_step', '_time', 'value', 'min', 'max']);
    expect(got.sampled.stored).toEqual({ loss: 3000, acc: 1000 });
    expect(got.sampled.per_metric.loss).toBeGreaterThanOrEqual(50);
    expect(got.sampled.per_metric.loss).toBeLessThanOrEqual(100);
    expect(got.sampled.per_metric.acc).toBeLessThanOrEqual(100);
    expect(got.sampled.spike).toBeCloseTo(1001 + 1 / 1235, 9);
    expect(got.sampled.mean_ok).toBe(true);
    expect(got.sampled.steps_sorted).toBe(true);
    expect(got.sampled_window).toBeGreaterThan(0);
    expect(got.sampled_window).toBeLessThanOrEqual(30);
    expect(got.scan.reduce((a: number, b: number) => a + b, 0)).toBe(500);
    // A rewound run: the latest timeline by default (0..40 of attempt 1, then 41..60 of attempt 2), and with
    // superseded=True also the 41..50 attempt 2 replaced, marked.
    expect(got.rewound.steps).toEqual(Array.from({ length: 61 }, (_, i) => i));
    expect(got.rewound.loss_41).toBe(1041);
    expect(got.rewound.columns).toEqual(['_step', '_time', '_attempt', '_superseded', 'loss']);
    expect(got.rewound.rows).toBe(71);
    expect(got.rewound.superseded).toEqual(Array.from({ length: 10 }, (_, i) => [expect.any(Number), 41 + i, 41 + i]));
    expect(got.ranked).toEqual([[2, true, 2]]);
    expect(got.ranked_table).toEqual([2]);
    expect(got.fast_path_agrees).toBe(true);
    expect(got.fast_path_used).toBe(3);
    expect(got.bad.x).toMatch(/x='bogus' must be 'step', 'time' or 'relative'/);
    expect(got.bad.samples0).toMatch(/samples=0 must be a positive whole number/);
    expect(got.bad.min_step).toMatch(/min_step='a' must be a number/);
    expect(got.bad.samples_numpy).toMatch(/samples= gives a pandas DataFrame/);
    expect(got.bad.order).toMatch(/order='nosuch': no run has a field 'nosuch'/);
    expect(got.bad.tags_str).toMatch(/tags='ab' must be a list of tags/);
  }, 120_000);
});

describe.skipIf(missing !== null)(`a live run read back${missing ? ` (skipped: ${missing})` : ''}`, () => {
  it('while its trainer logs, every read is the rows so far, whole rows only, never fewer; then every row; pyarrow missing is named', async () => {
    t = makeEnv();
    const r = await runPython(t, [path.join(FIXTURES, 'readback_live.py')], { timeout: 180_000 });
    expect(r.exitCode, r.all).toBe(0);
    const got = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(got.bad).toEqual([]);
    expect(got.partial, JSON.stringify(got)).toBeGreaterThan(0); // some reads came while it logged
    expect(got.final).toBe(20000);
    expect(got.state).toBe('finished');
    expect(got.no_pyarrow).toMatch(/needs pyarrow; install it: pip install pyarrow/);
  }, 180_000);
});

describe.skipIf(missing !== null)(`a run's console and media read back${missing ? ` (skipped: ${missing})` : ''}`, () => {
  it('logs() gives the printed lines (by rank, stream, text); media() the histograms, image and text; image() the bytes; system() the node\'s samples', async () => {
    t = makeEnv();
    const r = await runPython(t, [path.join(FIXTURES, 'readback_media.py')], { timeout: 120_000 });
    expect(r.exitCode, r.all).toBe(0);
    const got = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(got.state).toBe('finished');
    expect(got.lines).toEqual(['hello from rank 0', 'the loss is 0.5', 'a warning on stderr']);
    expect(got.streams).toEqual(['out', 'out', 'err']);
    expect(got.time_tz).toBe('UTC');
    expect(got.grep).toEqual(['the loss is 0.5']);
    expect(got.err).toEqual(['a warning on stderr']);
    expect(got.rank9).toBe(0);
    expect(got.kinds).toEqual(['histogram', 'image', 'text']);
    expect(got.hist_steps).toEqual([0, 1, 2]);
    expect(got.hist_counts).toEqual(Array(10).fill(10));
    expect(got.hist_edges).toEqual([0, 99, 11]);
    expect(got.hist_dtype).toBe('float64');
    expect(got.image).toEqual({ key: 'sample', step: 3, width: 8, height: 16, format: 'png', caption: 'a gradient' });
    expect(got.png).toBe(true);
    expect(got.text).toEqual(['step zero went fine']);
    expect(got.only_w).toBe(3);
    expect(got.bad_kind).toMatch(/kind='video' must be 'histogram', 'image' or 'text'/);
    expect(got.no_image).toMatch(/has no image/);
    // The node's system metrics over the run's life: sampled as it began and as it ended at least.
    expect(got.sys).toEqual({ rows: expect.any(Number), first: ['_time'], has_cpu: true, in_run: true });
    expect(got.sys.rows).toBeGreaterThanOrEqual(2);
    expect(got.sys_cpu_only).toEqual(['_time', 'cpu']);
  }, 120_000);
});
