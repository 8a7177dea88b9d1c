// Merging a run's small chunks in the shared store (daemon/compaction/, issue
// 37): a run of two writers whose batches interleave, rows that carry only
// some metrics, uploaded one frame per slice into a real PostgreSQL. After
// compaction the store holds fewer chunks and reads back exactly as before
// (whole, a tail, some keys), nothing of one writer is merged across another
// writer's chunk, and the uploader merges a run by itself when it ends.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pgUnavailable, startPg, type PgCluster } from '../pg/cluster.js';
import { Store, rowFromReplay } from '../../daemon/store/store.js';
import { FrameType, encodeHistory, jsonFrame, type RunMeta } from '../../daemon/store/format.js';
import { DataDirRuns } from '../../daemon/upload/local-runs.js';
import { PgSink } from '../../daemon/upload/pg-sink.js';
import { Uploader } from '../../daemon/upload/uploader.js';
import { parseStoreUrl } from '../../daemon/upload/url.js';
import { SharedSource } from '../../daemon/query/shared.js';
import { batches } from '../../daemon/query/shared-group.js';
import { SeriesCache, RunSeries } from '../../daemon/ui/series.js';
import { GroupSeries } from '../../daemon/ui/group-series.js';
import { planCompaction } from '../../daemon/compaction/compact.js';
import { bytesOf } from '../../src/wire.js';

const noPg = pgUnavailable();
let pgc: PgCluster;
let dir = '';
const CLI = path.resolve('dist/daemon/cli.js');

/**
 * One finished run whose log has, in order: writer 0 three batches, writer 1 two, writer 0 two more. Rows carry
 * metrics a, b, c in turn, some rows only one or two of them; metric d only in writer 1's rows.
 */
async function writeRun(name: string, id: string, at = 1000, o: { batches?: Array<[number, number]>; open?: boolean } = {}): Promise<{ runs: DataDirRuns; rows: number }> {
  const d = path.join(dir, name);
  const store = Store.open(d);
  const meta: RunMeta = {
    id, project: 'compact', name: id, group: '', jobType: '', tags: [], notes: '', mode: 'online', createdAt: at,
    runToken: 't', ownerWriterId: 'w', host: name, pid: 1, rank: null, config: {},
  };
  const log = store.createRun(meta);
  for (const w of [0, 1]) log.append(FrameType.WRITER, jsonFrame({ idx: w, writerId: `w${w}`, pid: 1 + w, host: name, rank: null, joinedAt: 1 }));
  log.append(FrameType.KEYS, jsonFrame({ first: 0, names: ['a', 'b', 'c', 'd'] }));
  const seq = [0, 0];
  let step = 0;
  let rows = 0;
  const batch = (w: number, n: number) => {
    const steps: number[] = [], times: number[] = [], counts: number[] = [], ids: number[] = [], values: number[] = [];
    for (let i = 0; i < n; i++, step++) {
      steps.push(step);
      times.push(at + step / 10);
      const keys = w === 1 ? [0, 3] : step % 3 === 0 ? [0, 1, 2] : step % 3 === 1 ? [1] : [0, 2];
      counts.push(keys.length);
      for (const k of keys) {
        ids.push(k);
        values.push(step * 10 + k + 0.25);
      }
    }
    seq[w] += n;
    rows += n;
    log.append(FrameType.HISTORY, encodeHistory({
      writerIdx: w, seq: seq[w], rows: n, steps: bytesOf(Float64Array.from(steps)), times: bytesOf(Float64Array.from(times)),
      values: bytesOf(Float64Array.from(values)), counts: bytesOf(Uint32Array.from(counts)), keyIds: bytesOf(Uint32Array.from(ids)),
    }));
  };
  for (const [w, n] of o.batches ?? [[0, 5], [0, 3], [0, 7], [1, 4], [1, 2], [0, 6], [0, 1]]) batch(w, n);
  if (!o.open) log.append(FrameType.STATE, jsonFrame({ state: 'finished', reason: '', exitCode: 0, finishedAt: at + 1000 }));
  await store.commit([log]);
  store.index.upsert(rowFromReplay(store.replay(id, false).run));
  log.close();
  store.close();
  return { runs: new DataDirRuns(d), rows };
}

describe.skipIf(!!noPg)(`compaction of the shared store${noPg ? ` — ${noPg}` : ''}`, () => {
  beforeAll(async () => {
    pgc = await startPg();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'logd-compact-test-'));
  }, 120_000);
  afterAll(() => {
    pgc?.destroy();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  const q = (sql: string) => pgc.psql(sql, 'logd').trim();
  const chunks = (id: string) => q(`SELECT string_agg(writer || ':' || nrows, ' ' ORDER BY ord, writer, seq_lo) FROM logd_rows WHERE run_id = '${id}' AND stream = 0`);

  it('plans groups of one writer in read order, at most maxRows each', () => {
    const s = (writer: string, seq_lo: number, nrows: number) => ({ writer, seq_lo, nrows });
    const p = planCompaction([s('0', 1, 5), s('0', 6, 3), s('1', 1, 4), s('0', 9, 2), s('0', 11, 2), s('0', 13, 9)], 10);
    expect(p.after).toBe(4); // [0:5+3] [1:4] [0:2+2] [0:9]
    expect(p.seqLos).toEqual([1, 6, 9, 11]);
    expect(p.groups).toEqual([1, 1, 9, 9]);
    expect(p.bases).toEqual([0, 5, 0, 2]);
    expect(p.counts).toEqual([2, 2, 2, 2]);
    // A live run: chunks of settledRows or more stay, and no group reaches across one.
    const live = planCompaction([s('0', 1, 5), s('0', 6, 20), s('0', 26, 3), s('0', 29, 4), s('0', 33, 1)], 100, 20);
    expect(live.after).toBe(3); // [0:5] [0:20 settled] [0:3+4+1]
    expect(live.seqLos).toEqual([26, 29, 33]);
    expect(live.groups).toEqual([26, 26, 26]);
    expect(live.bases).toEqual([0, 3, 7]);
  });

  it('merges consecutive chunks of a writer; the run reads back exactly as before (whole, a tail, some keys)', async () => {
    const { runs, rows } = await writeRun('node-a', 'cmp1');
    const url = parseStoreUrl(pgc.url);
    // One frame a slice, no compaction: seven chunks.
    const up = new Uploader({ url, node: 'node-a', runs, log: () => {}, pollMs: 50, backoffMaxMs: 500, statusDir: null, sliceBytes: 1, compact: false });
    try {
      for (let i = 0; i < 20 && (await up.pass()); i++);
    } finally {
      await up.stop();
    }
    expect(chunks('cmp1')).toBe('0:5 0:3 0:7 1:4 1:2 0:6 0:1');
    const src = new SharedSource(url);
    const sink = new PgSink(url, 'node-a');
    try {
      await src.check();
      const reads = () => Promise.all([
        src.history('cmp1', {}), src.history('cmp1', { tailRows: 9 }), src.history('cmp1', { keys: ['b', 'd'] }), src.history('cmp1', { tailRows: 3, keys: ['c'] }),
      ]);
      const before = await reads();
      expect(before[0].rows).toBe(rows);
      const res = await sink.compact('cmp1');
      expect(res).toEqual({ chunksBefore: 7, chunksAfter: 3 });
      expect(chunks('cmp1')).toBe('0:15 1:6 0:7');
      expect(await reads()).toEqual(before);
      expect(Number(q(`SELECT history_rows FROM logd_runs WHERE id = 'cmp1'`))).toBe(rows);
      // Metric d is in every row of writer 1 and in no row of writer 0: one value row, dense (no row places).
      expect(q(`SELECT count(*) || ' ' || (idx IS NULL) FROM logd_values v JOIN logd_keys k USING (run_id, stream, key_id) WHERE run_id = 'cmp1' AND k.name = 'd' GROUP BY idx IS NULL`)).toBe('1 true');
      // Again: nothing left to merge, nothing changes.
      expect(await sink.compact('cmp1')).toEqual({ chunksBefore: 3, chunksAfter: 3 });
      expect(await reads()).toEqual(before);
    } finally {
      await src.close();
      await sink.close();
    }
  }, 60_000);

  it('the uploader merges a run when it ends; `logd store compact` merges what an older logd left', async () => {
    const { runs } = await writeRun('node-b', 'cmp2');
    const url = parseStoreUrl(pgc.url);
    const up = new Uploader({ url, node: 'node-b', runs, log: () => {}, pollMs: 50, backoffMaxMs: 500, statusDir: null, sliceBytes: 1 });
    try {
      for (let i = 0; i < 20 && (await up.pass()); i++);
    } finally {
      await up.stop();
    }
    expect(chunks('cmp2')).toBe('0:15 1:6 0:7');

    // An older logd's chunks (cmp3 uploaded without compaction), merged by the command.
    const three = await writeRun('node-c', 'cmp3');
    const old = new Uploader({ url, node: 'node-c', runs: three.runs, log: () => {}, pollMs: 50, backoffMaxMs: 500, statusDir: null, sliceBytes: 1, compact: false });
    try {
      for (let i = 0; i < 20 && (await old.pass()); i++);
    } finally {
      await old.stop();
    }
    expect(chunks('cmp3')).toBe('0:5 0:3 0:7 1:4 1:2 0:6 0:1');
    const r = await execa('node', [CLI, 'store', 'compact'], { env: { LOGD_STORE_URL: pgc.url }, reject: false, all: true });
    expect(r.exitCode, r.all).toBe(0);
    expect(chunks('cmp3')).toBe('0:15 1:6 0:7');
    expect(r.stdout).toMatch(/3 runs looked at; 1 merged: 7 chunks -> 3/);
    expect(r.stdout).toContain('VACUUM');
  }, 60_000);

  it('`logd store prune --older-than`: lists, asks, removes only the runs that ended before, from every table', async () => {
    // cmp1..cmp3 above ended in 1970 (their node's clock); cmp4 ends now.
    const four = await writeRun('node-d', 'cmp4', Date.now() / 1000 - 1000);
    const up = new Uploader({ url: parseStoreUrl(pgc.url), node: 'node-d', runs: four.runs, log: () => {}, pollMs: 50, backoffMaxMs: 500, statusDir: null });
    try {
      for (let i = 0; i < 20 && (await up.pass()); i++);
    } finally {
      await up.stop();
    }
    const prune = (...args: string[]) => execa('node', [CLI, 'store', 'prune', ...args], { env: { LOGD_STORE_URL: pgc.url }, reject: false, all: true, stdin: 'ignore' });
    const bad = await prune('--older-than', '90');
    expect(bad.exitCode).toBe(2);
    expect(bad.stderr).toContain('--older-than "90": give a number and a unit, h (hours), d (days) or w (weeks), e.g. 90d');
    const asked = await prune('--older-than', '30d');
    expect(asked.exitCode, asked.all).toBe(2);
    expect(asked.stderr).toMatch(/removes 3 run\(s\) that ended before .*\(84 history rows\): cmp1 .*add --yes/);
    const dry = await prune('--older-than', '30d', '--dry-run');
    expect(dry.exitCode, dry.all).toBe(0);
    expect(dry.stdout.split('\n').filter((l) => /^cmp\d\t/.test(l)).map((l) => l.split('\t')[0])).toEqual(['cmp1', 'cmp2', 'cmp3']);
    expect(q(`SELECT count(*) FROM logd_runs`)).toBe('4');
    const done = await prune('--older-than', '30d', '--yes');
    expect(done.exitCode, done.all).toBe(0);
    expect(done.stdout).toMatch(/removed 3 run\(s\) that ended before .* \(84 history rows\)/);
    expect(q(`SELECT string_agg(id, ',') FROM logd_runs`)).toBe('cmp4');
    for (const t of ['logd_rows', 'logd_values', 'logd_keys', 'logd_writers']) expect(q(`SELECT count(DISTINCT run_id) || ':' || string_agg(DISTINCT run_id, ',') FROM ${t}`)).toBe('1:cmp4');
    // Their cursors stay, done: the nodes that uploaded them do not send them again.
    expect(q(`SELECT string_agg(run_id || '=' || done, ',' ORDER BY run_id) FROM logd_cursors WHERE run_id LIKE 'cmp%'`)).toBe('cmp1=true,cmp2=true,cmp3=true,cmp4=true');
    const none = await prune('--older-than', '30d', '--yes');
    expect(none.stdout).toContain('no run ended before');
  }, 60_000);
  it('a live run: the uploader merges its small chunks every 256 slices, and the run reads the same', async () => {
    const { runs, rows } = await writeRun('node-live', 'cmplive', 1000, { batches: Array.from({ length: 300 }, () => [0, 2] as [number, number]), open: true });
    const url = parseStoreUrl(pgc.url);
    const up = new Uploader({ url, node: 'node-live', runs, log: () => {}, pollMs: 50, backoffMaxMs: 500, statusDir: null, sliceBytes: 1 });
    try {
      for (let i = 0; i < 400 && (await up.pass()); i++);
    } finally {
      await up.stop();
    }
    // 256 two-row slices became one chunk of 512 rows at the 256th; the 44 after it wait for the next merge.
    expect(chunks('cmplive').split(' ')).toEqual(['0:512', ...Array(44).fill('0:2')]);
    const src = new SharedSource(url);
    try {
      const h = await src.history('cmplive', {});
      expect(h.rows).toBe(rows);
      expect(Array.from(h.steps)).toEqual(Array.from({ length: rows }, (_, i) => i));
    } finally {
      await src.close();
    }
  }, 60_000);

  it('batches of a group\'s runs: at most the bound of rows each, a bigger run alone, in order', () => {
    const r = (id: string, rows: number) => ({ id, rows });
    expect(batches([r('a', 5), r('b', 3), r('c', 10), r('d', 0), r('e', 2)], 8).map((b) => b.map((x) => x.id))).toEqual([['a', 'b'], ['c'], ['d', 'e']]);
    expect(batches([], 8)).toEqual([]);
  });

  it('many runs read at once (the group page\'s read) are each what a read of that run alone gives: whole, some keys, none; a run without rows; an unknown id left out', async () => {
    const url = parseStoreUrl(pgc.url);
    const made: Array<{ id: string; rows: number }> = [];
    for (const [name, id, b] of [['node-g1', 'cmpg1', undefined], ['node-g2', 'cmpg2', [[1, 3], [0, 4], [1, 2]]], ['node-g3', 'cmpg3', []]] as const) {
      const { runs, rows } = await writeRun(name, id, 2000, { batches: b as Array<[number, number]> | undefined });
      const up = new Uploader({ url, node: name, runs, log: () => {}, pollMs: 50, backoffMaxMs: 500, statusDir: null, sliceBytes: 1, compact: false });
      try {
        for (let i = 0; i < 20 && (await up.pass()); i++);
      } finally {
        await up.stop();
      }
      made.push({ id, rows });
    }
    expect(made.map((m) => m.rows)).toEqual([28, 9, 0]);
    const src = new SharedSource(url);
    try {
      await src.check();
      const asked = [...made, { id: 'nosuch', rows: 5 }];
      for (const keys of [undefined, ['b', 'd'], ['zz']]) {
        const all = await src.histories(asked, { keys });
        expect([...all.keys()].sort()).toEqual(['cmpg1', 'cmpg2', 'cmpg3']);
        for (const { id } of made) expect(all.get(id), `${id} ${keys}`).toEqual(await src.history(id, { keys }));
      }
      // The dashboard's cache reads a group that way: the same series as run by run.
      const together = await new SeriesCache(src).getMany(made.map((m) => ({ id: m.id, historyRows: m.rows, superseded: 0 })));
      const alone = new SeriesCache(src);
      for (const [i, m] of made.entries()) {
        const one = await alone.get(m.id, m.rows);
        expect(together[i].rows).toBe(m.rows);
        expect(together[i].keys).toEqual(one.keys);
        for (const k of one.keys) {
          const [a, b] = [together[i].series(together[i].keyId(k)!), one.series(one.keyId(k)!)];
          expect(Array.from(a.values.a.subarray(0, a.values.n))).toEqual(Array.from(b.values.a.subarray(0, b.values.n)));
        }
      }
      // The group page's cache (daemon/ui/group-series.ts): the asked metrics alone, the same points as a whole read;
      // none asked, the names alone; a run the listing says grew is read again.
      const groups = new GroupSeries(src, new SeriesCache(src));
      const refs = made.map((m) => ({ id: m.id, historyRows: m.rows, superseded: 0 }));
      const named = await groups.get(refs, []);
      const some = await groups.get(refs, ['b', 'zz']);
      const points = (s: RunSeries, k: string) => {
        const ks = s.series(s.keyId(k)!);
        return Array.from(ks.rows.a.subarray(0, ks.rows.n)).map((r, i) => [s.steps.a[r], ks.values.a[i]]);
      };
      for (const [i, m] of made.entries()) {
        const one = await alone.get(m.id, m.rows);
        expect(named[i].names, m.id).toEqual(one.keys);
        expect(some[i].names, m.id).toEqual(one.keys);
        expect(some[i].of('a')).toBeUndefined(); // not asked
        expect(some[i].of('zz')).toBeUndefined(); // no such metric
        if (one.keyId('b') === undefined) expect(some[i].of('b')).toBeUndefined();
        else expect(points(some[i].of('b')!, 'b'), m.id).toEqual(points(one, 'b'));
      }
      expect(some[0].of('b')!.rows).toBeLessThan(made[0].rows); // only the rows that hold b: a part, not the run
      const again = await groups.get(refs, ['b']);
      expect(again[0].of('b')).toBe(some[0].of('b')); // held: not read again
      const grown = await groups.get([{ ...refs[0], historyRows: refs[0].historyRows + 1 }], ['b']);
      expect(grown[0].of('b')).not.toBe(some[0].of('b')); // the listing says more rows: read again
      expect(points(grown[0].of('b')!, 'b')).toEqual(points(some[0].of('b')!, 'b'));
      // However many metrics a call asks, the runs lacking them are read in one call of the source (the real
      // store, counted on the way), and each metric is the same as read alone.
      let calls = 0;
      const counted = Object.assign(Object.create(src), { histories: (...a: Parameters<SharedSource['histories']>) => (calls++, src.histories(...a)) });
      const many = await new GroupSeries(counted, new SeriesCache(counted)).get(refs, ['a', 'b', 'c', 'd', 'zz']);
      expect(calls).toBe(1);
      for (const [i, m] of made.entries()) {
        const one = await alone.get(m.id, m.rows);
        for (const k of ['a', 'b', 'c', 'd']) {
          if (one.keyId(k) === undefined) expect(many[i].of(k)).toBeUndefined();
          else expect(points(many[i].of(k)!, k), `${m.id} ${k}`).toEqual(points(one, k));
        }
      }
    } finally {
      await src.close();
    }
  }, 60_000);

  it('a history read in pieces (the reads-server\'s slices, one snapshot) gives every stored row once, in order, as the rows written', async () => {
    const { runs, rows } = await writeRun('node-pieces', 'cmppieces');
    const url = parseStoreUrl(pgc.url);
    const up = new Uploader({ url, node: 'node-pieces', runs, log: () => {}, pollMs: 50, backoffMaxMs: 500, statusDir: null, sliceBytes: 1, compact: false });
    try {
      for (let i = 0; i < 20 && (await up.pass()); i++);
    } finally {
      await up.stop();
    }
    expect(chunks('cmppieces')).toBe('0:5 0:3 0:7 1:4 1:2 0:6 0:1');
    // What writeRun wrote, row by row: [step, writer, {key: value}].
    const writersOf = [[0, 5], [0, 3], [0, 7], [1, 4], [1, 2], [0, 6], [0, 1]].flatMap(([w, n]) => Array(n).fill(w));
    const written = writersOf.map((w, step) => {
      const keys = w === 1 ? [0, 3] : step % 3 === 0 ? [0, 1, 2] : step % 3 === 1 ? [1] : [0, 2];
      return [step, w, Object.fromEntries(keys.map((k) => ['abcd'[k], step * 10 + k + 0.25]))] as const;
    });
    const flat = (hs: Array<{ keys: string[]; rows: number; steps: Float64Array; writers: Uint32Array; start: Uint32Array; keyIds: Uint32Array; values: Float64Array }>) => {
      const out: Array<readonly [number, number, Record<string, number>]> = [];
      const keys = hs[0].keys;
      for (const h of hs) {
        expect(h.keys).toEqual(keys);
        for (let r = 0; r < h.rows; r++) {
          const vals: Record<string, number> = {};
          for (let p = h.start[r]; p < h.start[r + 1]; p++) vals[keys[h.keyIds[p]]] = h.values[p];
          out.push([h.steps[r], h.writers[r], vals]);
        }
      }
      return out;
    };
    const only = (ks: string[]) => written
      .map(([s, w, v]) => [s, w, Object.fromEntries(Object.entries(v).filter(([k]) => ks.includes(k)))] as const)
      .filter(([, , v]) => Object.keys(v).length > 0);
    const src = new SharedSource(url);
    try {
      await src.check();
      expect(flat([await src.history('cmppieces', {})])).toEqual(written);
      for (const slice of [1, 4, 10, 1000]) {
        const pieces = [];
        for await (const h of src.historyPieces('cmppieces', {}, slice)) pieces.push(h);
        expect(pieces.length).toBe(slice === 1 ? 7 : slice === 4 ? 5 : slice === 10 ? 3 : 1);
        expect(flat(pieces)).toEqual(written);
        const some = [];
        for await (const h of src.historyPieces('cmppieces', { keys: ['b', 'd'] }, slice)) some.push(h);
        expect(flat(some)).toEqual(only(['b', 'd']));
      }
      // A reader that stops after the first piece gives its connection back (the pool has one to spare again).
      for (let i = 0; i < 12; i++) {
        for await (const h of src.historyPieces('cmppieces', {}, 1)) {
          expect(h.rows).toBe(5);
          break;
        }
      }
      expect(flat([await src.history('cmppieces', { tailRows: 4 })])).toEqual(written.slice(-4));
      await expect(async () => {
        for await (const h of src.historyPieces('nosuch', {}, 4)) void h;
      }).rejects.toThrow(/run "nosuch" does not exist in the shared store/);
    } finally {
      await src.close();
    }
  }, 60_000);
});
