// The load generator's command (bench/cluster/README.md):
//
//   node dist/bench/cluster/run.js [--nodes 16] [--ranks 8] [--metrics 100] [--rate 10] [--seconds 30] [--url postgres://…]
//
// Without --url (or LOGD_BENCH_STORE_URL) it starts a throwaway PostgreSQL 15 (bench/pg-cluster.ts) and removes
// it after. Prints one table: upload lag, what the store took, its size and PostgreSQL's CPU.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { simulate } from './sim.js';
import { startPg, type PgCluster } from '../pg-cluster.js';

const arg = (name: string, dflt: string) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : dflt);
const nodes = Number(arg('--nodes', '16'));
const ranks = Number(arg('--ranks', '8'));
const metrics = Number(arg('--metrics', '100'));
const rate = Number(arg('--rate', '10'));
const seconds = Number(arg('--seconds', '30'));
for (const [k, v] of Object.entries({ nodes, ranks, metrics, rate, seconds })) {
  if (!(Number.isFinite(v) && v > 0)) {
    console.error(`cluster-sim: --${k} must be a positive number`);
    process.exit(2);
  }
}
let url = arg('--url', process.env.LOGD_BENCH_STORE_URL ?? '');
let pgc: PgCluster | null = null;
if (!url) {
  pgc = await startPg({ maxConnections: Math.max(100, nodes + 20) }); // one connection per simulated node, and the bench's own
  url = pgc.url;
}
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'logd-cluster-sim-'));
try {
  const r = await simulate({ url, nodes, ranks, metrics, stepsPerSec: rate, seconds, dir, log: (l) => console.error(l) });
  const worst = [...r.lag.perNode].sort((a, b) => b.p99Ms - a.p99Ms).slice(0, 3).map((n) => `${n.node} ${n.p99Ms} ms`).join(', ');
  const offered = nodes * ranks * metrics * rate;
  console.log(`\n| ${nodes} nodes x ${ranks} ranks x ${metrics} metrics x ${rate} steps/s (${offered.toLocaleString('en')} points/s offered), ${seconds} s | |`);
  console.log('|---|---|');
  console.log(`| rows written / stored / in chunks | ${r.rowsWritten} / ${r.rowsStored} / ${r.rowsInChunks} |`);
  console.log(`| upload lag, all nodes: p50 / p99 / max | ${r.lag.p50Ms} / ${r.lag.p99Ms} / ${r.lag.maxMs} ms |`);
  console.log(`| upload lag p99, the 3 worst nodes | ${worst} |`);
  console.log(`| store took (until drained, ${r.drainedS.toFixed(1)} s) | ${Math.round(r.store.pointsPerS).toLocaleString('en')} points/s, ${Math.round(r.store.rowsPerS)} rows/s, ${r.store.txPerS.toFixed(0)} tx/s |`);
  console.log(`| store size, per point | ${(r.store.sizeBytes / 2 ** 20).toFixed(1)} MiB, ${r.store.bytesPerPoint.toFixed(1)} B |`);
  console.log(`| PostgreSQL CPU | ${r.store.pgCpuS === null ? 'not seen (a remote server)' : `${r.store.pgCpuS.toFixed(1)} s (${((r.store.pgCpuS / r.drainedS) * 100).toFixed(0)} % of one core)`} |`);
  console.log(`| lock waits seen (sampled every 0.5 s), deadlocks | ${r.store.lockWaitsSeen}, ${r.store.deadlocks} |`);
  if (r.rowsStored !== r.rowsWritten || r.rowsInChunks !== r.rowsWritten) {
    console.error(`cluster-sim: the store does not hold every row exactly once (${r.rowsWritten} written, ${r.rowsStored} counted, ${r.rowsInChunks} in chunks)`);
    process.exitCode = 1;
  }
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
  pgc?.destroy();
}
