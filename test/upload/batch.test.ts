// Several runs' slices in one transaction (PgSink.uploadSlices, issue 37): a
// node's ranks go up together. Real record logs written through the daemon's
// store, a real PostgreSQL: every row once, a run another uploader moved is
// answered `moved` and written nothing twice, and a run that is another
// node's makes the batch write nothing, so that the uploader sends the runs
// one by one and refuses only that run.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pgUnavailable, startPg, type PgCluster } from '../pg/cluster.js';
import { Store, rowFromReplay } from '../../daemon/store/store.js';
import { FrameType, encodeHistory, jsonFrame, type RunMeta } from '../../daemon/store/format.js';
import { DataDirRuns } from '../../daemon/upload/local-runs.js';
import { PgSink, STREAM_HISTORY } from '../../daemon/upload/pg-sink.js';
import { encodeSlice } from '../../daemon/upload/encode.js';
import { Uploader } from '../../daemon/upload/uploader.js';
import { parseStoreUrl } from '../../daemon/upload/url.js';
import { bytesOf } from '../../src/wire.js';

const noPg = pgUnavailable();
let pgc: PgCluster;
let dir = '';

/** A data dir with these runs, each `rows` rows of 3 metrics and finished, durable and indexed. */
async function dataDir(name: string, ids: string[], rows: number): Promise<DataDirRuns> {
  const d = path.join(dir, name);
  const store = Store.open(d);
  const logs = [];
  for (const id of ids) {
    const meta: RunMeta = {
      id, project: 'batch', name: id, group: name, jobType: '', tags: [], notes: '', mode: 'online', createdAt: Date.now() / 1000,
      runToken: 't', ownerWriterId: 'w', host: name, pid: 1, rank: null, config: {},
    };
    const log = store.createRun(meta);
    log.append(FrameType.WRITER, jsonFrame({ idx: 0, writerId: 'w', pid: 1, host: name, rank: null, joinedAt: 1 }));
    log.append(FrameType.KEYS, jsonFrame({ first: 0, names: ['a', 'b', 'c'] }));
    const steps = Float64Array.from({ length: rows }, (_, i) => i);
    const values = Float64Array.from({ length: rows * 3 }, (_, i) => i / 7);
    log.append(FrameType.HISTORY, encodeHistory({
      writerIdx: 0, seq: rows, rows, steps: bytesOf(steps), times: bytesOf(new Float64Array(rows).fill(1)), values: bytesOf(values),
      counts: bytesOf(new Uint32Array(rows).fill(3)), keyIds: bytesOf(Uint32Array.from({ length: rows * 3 }, (_, i) => i % 3)),
    }));
    log.append(FrameType.STATE, jsonFrame({ state: 'finished', reason: '', exitCode: 0, finishedAt: Date.now() / 1000 }));
    logs.push(log);
  }
  await store.commit(logs);
  for (const id of ids) store.index.upsert(rowFromReplay(store.replay(id, false).run));
  for (const l of logs) l.close();
  store.close();
  return new DataDirRuns(d);
}

describe.skipIf(!!noPg)(`runs' slices in one transaction${noPg ? ` — ${noPg}` : ''}`, () => {
  beforeAll(async () => {
    pgc = await startPg();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'logd-batch-test-'));
  }, 120_000);
  afterAll(() => {
    pgc?.destroy();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  const q = (sql: string) => pgc.psql(sql, 'logd').trim();

  it('three runs in one go: a run another uploader moved is answered moved and not written twice; a run of another node makes the batch write nothing', async () => {
    const runs = await dataDir('node-a', ['bA', 'bB', 'bC'], 50);
    const sink = new PgSink(parseStoreUrl(pgc.url), 'node-a');
    try {
      await sink.ready();
      const item = (id: string) => {
        const end = runs.durableBytes(id);
        return { row: runs.row(id)!, slice: encodeSlice({ file: runs.logFile(id), runId: id, stream: STREAM_HISTORY, from: 0, to: end, maxBytes: 1 << 20 }), caughtUp: true, end };
      };
      const [a, b, c] = ['bA', 'bB', 'bC'].map(item);

      // bC's cursor is another node's: nothing of the batch is written.
      q(`INSERT INTO logd_cursors (run_id, node) VALUES ('bC', 'node-z')`);
      expect(await sink.uploadSlices([a, b, c])).toBeNull();
      expect(q(`SELECT count(*) FROM logd_runs`)).toBe('0');
      expect(q(`SELECT count(*) FROM logd_cursors`)).toBe('1');
      q(`DELETE FROM logd_cursors`);

      // bB went up alone first (a second uploader, `logd sync`): the batch writes bA and bC and says bB moved.
      expect(await sink.uploadSlice(b.row, b.slice, true)).toEqual({ offset: b.end, moved: false });
      expect(await sink.uploadSlices([c, a, b])).toEqual([{ offset: c.end, moved: false }, { offset: a.end, moved: false }, { offset: b.end, moved: true }]);
      expect(q(`SELECT string_agg(id || '=' || history_rows, ' ' ORDER BY id) FROM logd_runs`)).toBe('bA=50 bB=50 bC=50');
      expect(q(`SELECT string_agg(run_id || '=' || log_offset, ' ' ORDER BY run_id) FROM logd_cursors WHERE node = 'node-a'`)).toBe(`bA=${a.end} bB=${b.end} bC=${c.end}`);
      expect(Number(q(`SELECT sum(array_length(vals, 1)) FROM logd_values WHERE stream = 0`))).toBe(3 * 50 * 3);
      expect(q(`SELECT count(*) FROM logd_keys WHERE stream = 0`)).toBe('9');
      expect(q(`SELECT string_agg(run_id || ':' || writer, ' ' ORDER BY run_id) FROM logd_writers`)).toBe('bA:0 bB:0 bC:0');
      // Again, all three: every cursor has moved, nothing is written.
      expect((await sink.uploadSlices([a, b, c]))!.every((r) => r.moved)).toBe(true);
      expect(Number(q(`SELECT sum(array_length(vals, 1)) FROM logd_values WHERE stream = 0`))).toBe(3 * 50 * 3);
    } finally {
      await sink.close();
    }
  }, 60_000);

  it('the uploader: a node with a run that is another node\'s uploads the rest and refuses that one, saying so once', async () => {
    const runs = await dataDir('node-b', ['b2A', 'b2B', 'b2C', 'b2D'], 20);
    q(`INSERT INTO logd_cursors (run_id, node) VALUES ('b2B', 'node-y')`);
    const said: string[] = [];
    const up = new Uploader({ url: parseStoreUrl(pgc.url), node: 'node-b', runs, log: (l) => said.push(l), pollMs: 50, backoffMaxMs: 500, statusDir: null });
    try {
      for (let i = 0; i < 5 && (await up.pass()); i++);
    } finally {
      await up.stop();
    }
    expect(q(`SELECT string_agg(run_id || '=' || done, ' ' ORDER BY run_id) FROM logd_cursors WHERE run_id LIKE 'b2%'`)).toBe('b2A=true b2B=false b2C=true b2D=true');
    expect(q(`SELECT string_agg(id || '=' || history_rows, ' ' ORDER BY id) FROM logd_runs WHERE id LIKE 'b2%'`)).toBe('b2A=20 b2C=20 b2D=20');
    expect(said.filter((l) => l.includes('run b2B is in the shared store already, uploaded by node "node-y"'))).toHaveLength(1);
  }, 60_000);
});
