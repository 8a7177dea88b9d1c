// The cluster load generator (bench/cluster/, issue 37) is itself tested: at a
// small size, every point it says it wrote is in the shared store exactly once
// (rows counted three ways, values counted, no chunk twice), through the real
// uploader of each simulated node into a real PostgreSQL, and its figures are
// the store's own.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pgUnavailable, startPg, type PgCluster } from '../pg/cluster.js';
import { simulate } from '../../bench/cluster/sim.js';

const noPg = pgUnavailable();
let pgc: PgCluster;
let dir = '';

describe.skipIf(!!noPg)(`cluster load generator${noPg ? ` — ${noPg}` : ''}`, () => {
  beforeAll(async () => {
    pgc = await startPg();
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'logd-cluster-sim-test-'));
  }, 120_000);
  afterAll(() => {
    pgc?.destroy();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('4 nodes x 3 ranks x 7 metrics for 3 s: every point written is in the store once, each node under its own name', async () => {
    const r = await simulate({ url: pgc.url, nodes: 4, ranks: 3, metrics: 7, stepsPerSec: 40, seconds: 3, dir, drainS: 60 });
    expect(r.rowsWritten).toBeGreaterThan(4 * 3 * 40 * 2);
    expect(r.rowsStored).toBe(r.rowsWritten);
    expect(r.rowsInChunks).toBe(r.rowsWritten);
    expect(r.pointsWritten).toBe(r.rowsWritten * 7);
    const q = (sql: string) => pgc.psql(sql, 'logd').trim();
    const runIn = `run_id IN (SELECT id FROM logd_runs WHERE grp = '${r.group}')`;
    // Values: one per point, in chunks of whole slices that no retry wrote twice.
    expect(Number(q(`SELECT sum(array_length(vals, 1)) FROM logd_values WHERE ${runIn} AND stream = 0`))).toBe(r.pointsWritten);
    expect(Number(q(`SELECT count(*) FROM (SELECT run_id, seq_lo FROM logd_rows WHERE ${runIn} AND stream = 0 GROUP BY 1, 2 HAVING count(*) > 1) d`))).toBe(0);
    // Each node's runs under its own node name, each rank's run finished, the group whole.
    expect(q(`SELECT count(DISTINCT node) || ' ' || count(*) FROM logd_cursors WHERE ${runIn} AND done`)).toBe('4 12');
    expect(q(`SELECT string_agg(DISTINCT state, ',') || ' ' || count(*) FROM logd_runs WHERE grp = '${r.group}'`)).toBe('finished 12');
    // Figures are the store's: rates from what it holds, lag sampled on every node.
    expect(r.lag.perNode.map((n) => n.node).sort()).toEqual(['node-0', 'node-1', 'node-2', 'node-3']);
    expect(r.store.pointsPerS).toBeCloseTo(r.pointsWritten / r.drainedS, 6);
    expect(r.store.sizeBytes).toBeGreaterThan(0);
    expect(r.store.txPerS).toBeGreaterThan(0);
  }, 180_000);

  it('faults at size: the store restarted mid-load, a node far from the store, a node an hour behind: every point once, the lag back down', async () => {
    const r = await simulate({
      url: pgc.url, nodes: 4, ranks: 3, metrics: 7, stepsPerSec: 40, seconds: 7, dir: path.join(dir, 'faults'), drainS: 90,
      faults: {
        storeRestart: { atS: 2, downS: 2, stop: () => pgc.stop(), start: () => pgc.start() },
        slowNode: { node: 1, delayMs: 25 },
        skewedNode: { node: 2, offsetS: -3600 },
      },
    });
    const q = (sql: string) => pgc.psql(sql, 'logd').trim();
    const runIn = `run_id IN (SELECT id FROM logd_runs WHERE grp = '${r.group}')`;
    // Nothing lost or doubled across the restart, on every node (the slow one included).
    expect(r.rowsStored).toBe(r.rowsWritten);
    expect(r.rowsInChunks).toBe(r.rowsWritten);
    expect(Number(q(`SELECT sum(array_length(vals, 1)) FROM logd_values WHERE ${runIn} AND stream = 0`))).toBe(r.pointsWritten);
    expect(Number(q(`SELECT count(*) FROM (SELECT run_id, seq_lo FROM logd_rows WHERE ${runIn} AND stream = 0 GROUP BY 1, 2 HAVING count(*) > 1) d`))).toBe(0);
    expect(q(`SELECT string_agg(DISTINCT state, ',') || ' ' || count(*) FROM logd_runs WHERE grp = '${r.group}'`)).toBe('finished 12');
    // The store was away for 2 s, and every node's lag came back to its level before.
    expect(r.restart).toBeDefined();
    expect(r.restart!.upAt - r.restart!.downAt).toBeGreaterThanOrEqual(2000);
    expect(r.restart!.recoveredS, JSON.stringify(r.restart)).not.toBeNull();
    expect(r.restart!.worstLagMs).toBeGreaterThanOrEqual(2000);
    // The node an hour behind: its runs and rows carry its own clock (logd does not rewrite a node's times).
    const skewed = q(`SELECT min(created_at) FROM logd_runs WHERE grp = '${r.group}' AND id IN (SELECT run_id FROM logd_cursors WHERE node = 'node-2')`);
    const others = q(`SELECT min(created_at) FROM logd_runs WHERE grp = '${r.group}' AND id IN (SELECT run_id FROM logd_cursors WHERE node <> 'node-2')`);
    expect(Number(others) - Number(skewed)).toBeGreaterThan(3590);
    expect(Number(others) - Number(skewed)).toBeLessThan(3610);
  }, 240_000);
});
