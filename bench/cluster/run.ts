// The load generator's command (bench/cluster/README.md):
//
//   node dist/bench/cluster/run.js [--nodes 16] [--ranks 8] [--metrics 100] [--rate 10] [--seconds 30] [--url postgres://…]
//     [--restart-store-at S --store-down S] [--slow-node-ms MS] [--skew-node-s S] [--batch-runs N] [--no-compact]
//     [--readers]
//
// Faults: --restart-store-at stops the (throwaway) store S seconds into the load for --store-down seconds (5 by
// default) and starts it again; --slow-node-ms puts node 1 behind a proxy that holds each packet back MS ms each
// way; --skew-node-s sets node 2's clock off by S seconds (negative: behind). --batch-runs: runs per upload
// transaction (the uploader's default 64; 1 sends each run's slice in a transaction of its own). --no-compact:
// the uploaders leave runs' small chunks as they are. With a throwaway store the chunk tables are VACUUM FULLed
// at the end and measured again (what the store holds once autovacuum has reused the merged-away rows' space).
// --readers: then times the readers of the whole group (readers.ts: the dashboard's group page, logd health
// --store, Python's group history).
//
// Without --url (or LOGD_BENCH_STORE_URL) it starts a throwaway PostgreSQL 15 (bench/pg-cluster.ts) and removes
// it after. Prints one table: upload lag, what the store took, its size and PostgreSQL's CPU.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { simulate } from './sim.js';
import { measureReaders } from './readers.js';
import { startPg, type PgCluster } from '../pg-cluster.js';

const arg = (name: string, dflt: string) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : dflt);
const nodes = Number(arg('--nodes', '16'));
const ranks = Number(arg('--ranks', '8'));
const metrics = Number(arg('--metrics', '100'));
const rate = Number(arg('--rate', '10'));
const seconds = Number(arg('--seconds', '30'));
const restartAt = arg('--restart-store-at', '');
const storeDown = Number(arg('--store-down', '5'));
const slowMs = arg('--slow-node-ms', '');
const skewS = arg('--skew-node-s', '');
const batchRuns = arg('--batch-runs', '');
const compact = !process.argv.includes('--no-compact');
const readers = process.argv.includes('--readers');
for (const [k, v] of Object.entries({ nodes, ranks, metrics, rate, seconds, 'store-down': storeDown, ...(restartAt ? { 'restart-store-at': Number(restartAt) } : {}), ...(slowMs ? { 'slow-node-ms': Number(slowMs) } : {}), ...(batchRuns ? { 'batch-runs': Number(batchRuns) } : {}) })) {
  if (!(Number.isFinite(v) && v > 0)) {
    console.error(`cluster-sim: --${k} must be a positive number`);
    process.exit(2);
  }
}
if (skewS && !Number.isFinite(Number(skewS))) {
  console.error('cluster-sim: --skew-node-s must be a number of seconds');
  process.exit(2);
}
if ((slowMs && nodes < 2) || (skewS && nodes < 3)) {
  console.error('cluster-sim: the slow node is node 1 and the skewed node node 2: give --nodes 3 or more');
  process.exit(2);
}
let url = arg('--url', process.env.LOGD_BENCH_STORE_URL ?? '');
if (url && restartAt) {
  console.error('cluster-sim: --restart-store-at restarts the throwaway store this command starts; leave out --url');
  process.exit(2);
}
let pgc: PgCluster | null = null;
if (url) {
  // Each simulated node holds a connection: a server that takes fewer refuses the rest, whose uploaders then back
  // off and retry, and the lag measured is that server's limit, not the upload path's.
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 15_000 });
  await c.connect();
  try {
    const max = Number((await c.query('SHOW max_connections')).rows[0].max_connections);
    if (max < nodes + 10) console.error(`cluster-sim: the store at --url takes ${max} connections, fewer than the ${nodes} simulated nodes need (and the bench's own): its lag figures will be that limit's; raise max_connections to ${nodes + 20} or more`);
  } finally {
    await c.end();
  }
}
if (!url) {
  pgc = await startPg({ maxConnections: Math.max(100, nodes + 20) }); // one connection per simulated node, and the bench's own
  url = pgc.url;
}
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'logd-cluster-sim-'));
try {
  const faults = {
    ...(restartAt ? { storeRestart: { atS: Number(restartAt), downS: storeDown, stop: () => pgc!.stop(), start: () => pgc!.start() } } : {}),
    ...(slowMs ? { slowNode: { node: 1, delayMs: Number(slowMs) } } : {}),
    ...(skewS ? { skewedNode: { node: 2, offsetS: Number(skewS) } } : {}),
  };
  const r = await simulate({ url, nodes, ranks, metrics, stepsPerSec: rate, seconds, dir, log: (l) => console.error(l), faults, batchRuns: batchRuns ? Number(batchRuns) : undefined, compact, vacuumFull: pgc !== null });
  const worst = [...r.lag.perNode].sort((a, b) => b.p99Ms - a.p99Ms).slice(0, 3).map((n) => `${n.node} ${n.p99Ms} ms`).join(', ');
  const offered = nodes * ranks * metrics * rate;
  console.log(`\n| ${nodes} nodes x ${ranks} ranks x ${metrics} metrics x ${rate} steps/s (${offered.toLocaleString('en')} points/s offered), ${seconds} s, ${batchRuns || 64} run(s) per transaction | |`);
  console.log('|---|---|');
  console.log(`| rows written / stored / in chunks | ${r.rowsWritten} / ${r.rowsStored} / ${r.rowsInChunks} |`);
  console.log(`| upload lag, all nodes: p50 / p99 / max | ${r.lag.p50Ms} / ${r.lag.p99Ms} / ${r.lag.maxMs} ms |`);
  console.log(`| upload lag p99, the 3 worst nodes | ${worst} |`);
  console.log(`| store took (until drained, ${r.drainedS.toFixed(1)} s) | ${Math.round(r.store.pointsPerS).toLocaleString('en')} points/s, ${Math.round(r.store.rowsPerS)} rows/s, ${r.store.txPerS.toFixed(0)} tx/s |`);
  console.log(`| store size, per point (chunks merged: ${compact ? 'yes' : 'no'}; ${r.store.chunkRows} chunk rows) | ${(r.store.sizeBytes / 2 ** 20).toFixed(1)} MiB, ${r.store.bytesPerPoint.toFixed(1)} B |`);
  if (r.store.compactedBytesPerPoint !== null) console.log(`| per point after VACUUM FULL of the chunk tables: the database / the two chunk tables (TOAST and indexes in) | ${r.store.compactedBytesPerPoint.toFixed(1)} B / ${r.store.chunkTablesBytesPerPoint!.toFixed(1)} B |`);
  console.log(`| PostgreSQL CPU | ${r.store.pgCpuS === null ? 'not seen (a remote server)' : `${r.store.pgCpuS.toFixed(1)} s (${((r.store.pgCpuS / r.drainedS) * 100).toFixed(0)} % of one core)`} |`);
  console.log(`| lock waits seen (sampled every 0.5 s), deadlocks | ${r.store.lockWaitsSeen}, ${r.store.deadlocks} |`);
  if (r.restart) {
    console.log(`| store stopped for | ${((r.restart.upAt - r.restart.downAt) / 1000).toFixed(1)} s (from ${((r.restart.downAt - r.startedAt) / 1000).toFixed(1)} s into the load) |`);
    console.log(`| worst lag from the stop on; every node back to its level before, after the store returned | ${r.restart.worstLagMs} ms; ${r.restart.recoveredS === null ? 'NOT before the end' : `${r.restart.recoveredS.toFixed(1)} s`} |`);
  }
  if (slowMs) {
    const slow = r.lag.perNode.find((n) => n.node === 'node-1')!;
    const rest = r.lag.perNode.filter((n) => n.node !== 'node-1');
    console.log(`| node-1, ${slowMs} ms each way from the store: lag p50 / p99 (the other nodes' median p99) | ${slow.p50Ms} / ${slow.p99Ms} ms (${[...rest.map((n) => n.p99Ms)].sort((a, b) => a - b)[Math.floor(rest.length / 2)]} ms) |`);
  }
  if (readers) {
    const figs = await measureReaders({ url, group: r.group, keys: ['m0', 'm1', 'm2'], log: (l) => console.error(l) });
    console.log(`\n| the group's readers (${nodes * ranks} ranks, ${Math.round(r.rowsWritten / (nodes * ranks))} steps each) | first | median of 5 more | |`);
    console.log('|---|---|---|---|');
    for (const f of figs) console.log(`| ${f.what} | ${f.firstMs.toFixed(0)} ms | ${f.medianMs.toFixed(0)} ms | ${f.note} |`);
  }
  if (r.rowsStored !== r.rowsWritten || r.rowsInChunks !== r.rowsWritten) {
    console.error(`cluster-sim: the store does not hold every row exactly once (${r.rowsWritten} written, ${r.rowsStored} counted, ${r.rowsInChunks} in chunks)`);
    process.exitCode = 1;
  }
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
  pgc?.destroy();
}
