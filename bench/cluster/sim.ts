// A cluster's worth of nodes on one machine (issue 37): N simulated nodes, each
// a real data dir with R ranks' runs written through the daemon's own store
// (record logs appended and fdatasynced as a daemon does), each uploaded by its
// own instance of the daemon's Uploader (daemon/upload/uploader.ts) with its own
// node name, store identity and PostgreSQL connection, all into one shared
// store. What a node's daemon would add on top (gRPC from its trainers, the
// sampler) is left out: this measures the store and the upload path.
//
// It reports the upload lag (per node, sampled: how old the oldest row written
// locally and not yet in the store is), what the store took (rows and points
// per second, transactions per second), PostgreSQL's CPU, size and lock waits,
// and checks at the end that every row written is in the store exactly once.
//
// Faults (SimOptions.faults): the store stopped mid-load and started again
// (every node's uploader must resume: nothing lost or doubled, the lag comes
// back down), one node far from the store (its connection goes through a
// proxy here that holds every packet back), and one node whose clock is off.
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import pg from 'pg';
import { Store, rowFromReplay } from '../../daemon/store/store.js';
import { FrameType, encodeHistory, jsonFrame, type RunMeta } from '../../daemon/store/format.js';
import type { RecordLog } from '../../daemon/store/record-log.js';
import { Uploader } from '../../daemon/upload/uploader.js';
import { DataDirRuns } from '../../daemon/upload/local-runs.js';
import { parseStoreUrl } from '../../daemon/upload/url.js';
import { bytesOf } from '../../src/wire.js';

export interface SimOptions {
  /** The shared store (postgres://…). */
  url: string;
  nodes: number;
  ranks: number;
  metrics: number;
  stepsPerSec: number;
  seconds: number;
  /** Where the nodes' data dirs go (made; left for inspection). */
  dir: string;
  /** How often each rank's new rows are appended and synced (default 200 ms: a daemon's batch interval). */
  tickMs?: number;
  /** The uploaders' poll interval when idle (default 200 ms). */
  pollMs?: number;
  /** How long to wait after the writers stop for the store to catch up (default 120 s). */
  drainS?: number;
  log?: (line: string) => void;
  faults?: SimFaults;
  /** The uploaders' runs per transaction (UploaderOptions.batchRuns; default theirs, 64). */
  batchRuns?: number;
  /** The uploaders merge runs' small chunks (UploaderOptions.compact; default true). */
  compact?: boolean;
  /** At the end, VACUUM FULL the chunk tables and measure the store again (a throwaway store only: it locks them). */
  vacuumFull?: boolean;
}

export interface SimFaults {
  /** At atS seconds into the load the store is stopped, and started again downS seconds later. */
  storeRestart?: { atS: number; downS: number; stop: () => void | Promise<void>; start: () => void | Promise<void> };
  /** This node reaches the store through a proxy that holds each packet back delayMs each way (a node far away). */
  slowNode?: { node: number; delayMs: number };
  /** This node's clock is off by offsetS seconds: its runs' and rows' times are what that clock says. */
  skewedNode?: { node: number; offsetS: number };
}

export interface NodeLag { node: string; p50Ms: number; p99Ms: number; maxMs: number }

export interface SimResult {
  rowsWritten: number;
  pointsWritten: number;
  /** Rows the store holds for these runs (logd_runs.history_rows) and chunk rows counted in logd_rows. */
  rowsStored: number;
  rowsInChunks: number;
  /** Seconds the writers ran, and until the store had every row. */
  writeS: number;
  drainedS: number;
  lag: { p50Ms: number; p99Ms: number; maxMs: number; perNode: NodeLag[] };
  store: { rowsPerS: number; pointsPerS: number; txPerS: number; sizeBytes: number; bytesPerPoint: number; compactedBytesPerPoint: number | null; chunkTablesBytesPerPoint: number | null; chunkRows: number; lockWaitsSeen: number; deadlocks: number; pgCpuS: number | null };
  group: string;
  /** When the writers started (ms since the epoch). */
  startedAt: number;
  /** With storeRestart: when the store went away and came back (ms since the epoch), and how long after it came back every node's lag was back at or under its level before the fault (max(2 x its p99 before, 1 s)); null if it never was before the end. */
  restart?: { downAt: number; upAt: number; recoveredS: number | null; worstLagMs: number };
}

const quantile = (xs: number[], q: number) => {
  if (!xs.length) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};

/** CPU seconds of every process whose command line names a PostgreSQL server process (this machine's). */
function postgresCpuS(): number | null {
  let ticks = 0;
  let seen = false;
  for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      if (comm !== 'postgres') continue;
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(f[11]) + Number(f[12]);
      seen = true;
    } catch {
      /* gone */
    }
  }
  return seen ? ticks / 100 : null; // USER_HZ is 100 on Linux
}

/**
 * A TCP proxy to host:port that holds back every chunk delayMs in each direction (in order): a node whose round
 * trip to the store is 2 x delayMs longer.
 */
async function delayProxy(host: string, port: number, delayMs: number): Promise<{ port: number; close: () => void }> {
  const socks = new Set<net.Socket>();
  const server = net.createServer((a) => {
    const b = net.connect(port, host);
    for (const [from, to] of [[a, b], [b, a]] as const) {
      socks.add(from);
      from.on('data', (chunk) => setTimeout(() => to.destroyed || to.write(chunk), delayMs));
      from.on('end', () => setTimeout(() => to.destroyed || to.end(), delayMs));
      from.on('error', () => to.destroy());
      from.on('close', () => {
        socks.delete(from);
        setTimeout(() => to.destroy(), delayMs);
      });
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () => {
      server.close();
      for (const x of socks) x.destroy();
    },
  };
}

interface SimRun { id: string; node: number; log: RecordLog; step: number; marks: Array<{ end: number; at: number }> }

export async function simulate(o: SimOptions): Promise<SimResult> {
  const say = o.log ?? (() => {});
  const tickMs = o.tickMs ?? 200;
  const tag = Math.random().toString(36).slice(2, 8);
  const group = `sim-${tag}`;
  const keys = Array.from({ length: o.metrics }, (_, k) => `m${k}`);
  const stores: Store[] = [];
  const runs: SimRun[] = [];
  /** Each node's runs, and their logs (what one store commit syncs). */
  const nodeRuns: SimRun[][] = [];
  const logsOf = (n: number) => nodeRuns[n].map((x) => x.log);
  const indexRuns = (n: number) => {
    for (const x of nodeRuns[n]) stores[n].index.upsert(rowFromReplay(stores[n].replay(x.id, false).run));
  };
  const skew = (n: number) => (o.faults?.skewedNode?.node === n ? o.faults.skewedNode.offsetS : 0);
  /** A node's clock: what its daemon would stamp on runs and rows. */
  const clock = (n: number) => Date.now() / 1000 + skew(n);
  fs.mkdirSync(o.dir, { recursive: true });

  // The nodes' runs: RUN, WRITER and KEYS frames, durable before any uploader starts.
  for (let n = 0; n < o.nodes; n++) {
    const store = Store.open(path.join(o.dir, `node-${n}`));
    stores.push(store);
    nodeRuns.push([]);
    for (let r = 0; r < o.ranks; r++) {
      const rank = { rank: n * o.ranks + r, localRank: r, worldSize: o.nodes * o.ranks, nodeRank: n, localWorldSize: o.ranks };
      const meta: RunMeta = {
        id: `${tag}n${n}r${r}`, project: 'cluster-sim', name: `${group}/rank${rank.rank}`, group, jobType: 'train', tags: [], notes: '',
        mode: 'online', createdAt: clock(n), runToken: 'sim', ownerWriterId: 'w-sim', host: `node-${n}`, pid: process.pid, rank, config: { nodes: o.nodes, ranks: o.ranks },
      };
      const log = store.createRun(meta);
      log.append(FrameType.WRITER, jsonFrame({ idx: 0, writerId: 'w-sim', pid: process.pid, host: `node-${n}`, rank, joinedAt: clock(n) }));
      log.append(FrameType.KEYS, jsonFrame({ first: 0, names: keys }));
      const x: SimRun = { id: meta.id, node: n, log, step: 0, marks: [] };
      runs.push(x);
      nodeRuns[n].push(x);
    }
    await store.commit(logsOf(n));
    indexRuns(n);
  }
  say(`cluster-sim: ${o.nodes} nodes x ${o.ranks} ranks x ${o.metrics} metrics at ${o.stepsPerSec} steps/s for ${o.seconds} s (group ${group})`);

  const url = parseStoreUrl(o.url);
  let proxy: { port: number; close: () => void } | null = null;
  let slowUrl = url;
  if (o.faults?.slowNode) {
    const u = new URL(o.url);
    if (!u.hostname) throw new Error('cluster-sim: a slow node needs a TCP store URL (postgres://user:pw@host:port/db), not a socket one');
    proxy = await delayProxy(u.hostname, Number(u.port || 5432), o.faults.slowNode.delayMs);
    u.hostname = '127.0.0.1';
    u.port = String(proxy.port);
    slowUrl = parseStoreUrl(u.toString());
  }
  // The sim's own connection (figures and lag samples); made again after a store restart.
  let db = new pg.Client({ connectionString: o.url });
  await db.connect();
  let dbBroken = false;
  db.on('error', () => (dbBroken = true));
  const query = async (sql: string, args: unknown[] = []) => {
    if (dbBroken) {
      void db.end().catch(() => {});
      const fresh = new pg.Client({ connectionString: o.url });
      fresh.on('error', () => (dbBroken = true));
      await fresh.connect();
      db = fresh;
      dbBroken = false;
    }
    try {
      return await db.query(sql, args);
    } catch (e) {
      dbBroken = true;
      throw e;
    }
  };
  const uploaders = stores.map((s, n) => new Uploader({ url: n === o.faults?.slowNode?.node ? slowUrl : url, node: `node-${n}`, runs: new DataDirRuns(s.dataDir), log: () => {}, pollMs: o.pollMs ?? 200, backoffMaxMs: 2000, statusDir: null, batchRuns: o.batchRuns, compact: o.compact }));
  // The first one makes the schema; the rest find it.
  await uploaders[0].pass();
  const statsOf = async () => (await query(`SELECT xact_commit::float8 AS tx, deadlocks::float8 AS dl FROM pg_stat_database WHERE datname = current_database()`)).rows[0] as { tx: number; dl: number };
  const before = await statsOf();
  const cpu0 = postgresCpuS();
  let cpuCarried = 0;
  for (const u of uploaders) u.start();

  // Writers: every tick, each rank's due steps as one HISTORY frame, synced per node.
  const t0 = Date.now();
  const lagSamples = new Map<number, number[]>(Array.from({ length: o.nodes }, (_, n) => [n, []]));
  /** Every sample, when it was taken: for the recovery after a store restart. */
  const timeline: Array<{ t: number; worst: Map<number, number> }> = [];
  let lockWaits = 0;
  const sample = async () => {
    let cur: Map<string, number>;
    try {
      cur = new Map((await query(`SELECT run_id, log_offset::float8 AS off FROM logd_cursors WHERE run_id LIKE $1`, [`${tag}n%`])).rows.map((r) => [r.run_id as string, r.off as number]));
      lockWaits += Number((await query(`SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted`)).rows[0].n);
    } catch {
      return; // the store is away (a restart): no sample; the lag shows in the samples after it is back
    }
    const t = Date.now();
    const worst = new Map<number, number>();
    for (const x of runs) {
      const at = x.marks.find((m) => m.end > (cur.get(x.id) ?? 0))?.at;
      worst.set(x.node, Math.max(worst.get(x.node) ?? 0, at === undefined ? 0 : t - at));
    }
    for (const [n, ms] of worst) lagSamples.get(n)!.push(ms);
    timeline.push({ t, worst });
  };
  // The store restart, started from the write loop at its second and run beside it.
  const restart = o.faults?.storeRestart;
  let restartAt: { downAt: number; upAt: number } | null = null;
  let restarting: Promise<void> | null = null;
  const doRestart = async () => {
    const downAt = Date.now();
    say(`cluster-sim: stopping the store for ${restart!.downS} s`);
    const cpuStop = postgresCpuS();
    await restart!.stop();
    await new Promise((r) => setTimeout(r, restart!.downS * 1000));
    await restart!.start();
    // The server's processes are new: its CPU is counted up to the stop and again from here.
    const cpuStart = postgresCpuS();
    if (cpu0 !== null && cpuStop !== null && cpuStart !== null) cpuCarried = cpuStop - cpu0 - cpuStart;
    restartAt = { downAt, upAt: Date.now() };
    say('cluster-sim: the store is back');
  };
  let rowsWritten = 0;
  let sampling = Promise.resolve();
  let lastSample = 0;
  while (Date.now() - t0 < o.seconds * 1000) {
    const tickStart = Date.now();
    if (restart && !restarting && tickStart - t0 >= restart.atS * 1000) restarting = doRestart();
    const due = Math.floor(((tickStart - t0) / 1000) * o.stepsPerSec);
    for (const x of runs) {
      const k = due - x.step;
      if (k <= 0) continue;
      const steps = new Float64Array(k);
      const times = new Float64Array(k).fill(tickStart / 1000 + skew(x.node));
      const counts = new Uint32Array(k).fill(o.metrics);
      const ids = new Uint32Array(k * o.metrics);
      const values = new Float64Array(k * o.metrics);
      for (let i = 0; i < k; i++) {
        steps[i] = x.step + i;
        for (let m = 0; m < o.metrics; m++) {
          ids[i * o.metrics + m] = m;
          values[i * o.metrics + m] = Math.sin((x.step + i) / 100 + m) + x.node;
        }
      }
      const parts = encodeHistory({ writerIdx: 0, seq: x.step + k, rows: k, steps: bytesOf(steps), times: bytesOf(times), values: bytesOf(values), counts: bytesOf(counts), keyIds: bytesOf(ids) });
      x.log.append(FrameType.HISTORY, parts);
      x.step += k;
      rowsWritten += k;
    }
    await Promise.all(stores.map((s, n) => s.commit(logsOf(n))));
    const at = Date.now();
    for (const x of runs) x.marks.push({ end: x.log.durableBytes, at });
    if (at - lastSample >= 500) {
      lastSample = at;
      sampling = sampling.then(sample);
    }
    await new Promise((r) => setTimeout(r, Math.max(0, tickMs - (Date.now() - tickStart))));
  }
  const writeS = (Date.now() - t0) / 1000;
  await restarting;
  // The runs end (a STATE frame each), as their trainers' finish would make them.
  for (const x of runs) x.log.append(FrameType.STATE, jsonFrame({ state: 'finished', reason: '', exitCode: 0, finishedAt: clock(x.node) }));
  await Promise.all(stores.map((s, n) => s.commit(logsOf(n))));
  for (const x of runs) x.marks.push({ end: x.log.durableBytes, at: Date.now() });
  for (let n = 0; n < o.nodes; n++) indexRuns(n);

  // Drain: until every run's cursor is at its log's end and marked done.
  const deadline = Date.now() + (o.drainS ?? 120) * 1000;
  for (;;) {
    await sampling;
    const done = Number((await query(`SELECT count(*)::int AS n FROM logd_cursors WHERE run_id LIKE $1 AND done`, [`${tag}n%`]).catch(() => ({ rows: [{ n: -1 }] }))).rows[0].n);
    if (done === runs.length) break;
    if (Date.now() > deadline) throw new Error(`cluster-sim: the store has ${done} of ${runs.length} runs whole after ${o.drainS ?? 120} s of draining`);
    await sample();
    await new Promise((r) => setTimeout(r, 250));
  }
  const drainedS = (Date.now() - t0) / 1000;
  const after = await statsOf();
  const cpu1 = postgresCpuS();
  await Promise.all(uploaders.map((u) => u.stop(5000)));
  proxy?.close();

  const stored = (await query(`SELECT coalesce(sum(history_rows), 0)::float8 AS n FROM logd_runs WHERE grp = $1`, [group])).rows[0].n as number;
  const inChunks = (await query(`SELECT coalesce(sum(nrows), 0)::float8 AS n FROM logd_rows WHERE run_id LIKE $1 AND stream = 0`, [`${tag}n%`])).rows[0].n as number;
  const size = Number((await query(`SELECT pg_database_size(current_database())::float8 AS b`)).rows[0].b);
  const chunkRows = Number((await query(`SELECT count(*)::float8 AS n FROM logd_rows WHERE run_id LIKE $1`, [`${tag}n%`])).rows[0].n);
  let vacuumed: number | null = null;
  let chunkTables: number | null = null;
  if (o.vacuumFull) {
    await query('VACUUM FULL logd_rows, logd_values');
    vacuumed = Number((await query(`SELECT pg_database_size(current_database())::float8 AS b`)).rows[0].b);
    // The two chunk tables with their TOAST and indexes: what grows with the points (the rest is fixed or per run).
    chunkTables = Number((await query(`SELECT (pg_total_relation_size('logd_rows') + pg_total_relation_size('logd_values'))::float8 AS b`)).rows[0].b);
  }
  await db.end();
  for (const x of runs) x.log.close();
  for (const s of stores) s.close();

  const all = [...lagSamples.values()].flat();
  const perNode = [...lagSamples].map(([n, xs]) => ({ node: `node-${n}`, p50Ms: quantile(xs, 0.5), p99Ms: quantile(xs, 0.99), maxMs: Math.max(0, ...xs) }));
  let restartFigures: SimResult['restart'];
  const ra = restartAt as { downAt: number; upAt: number } | null;
  if (ra) {
    const before = timeline.filter((s) => s.t < ra.downAt);
    const level = (n: number) => Math.max(1000, 2 * quantile(before.map((s) => s.worst.get(n) ?? 0), 0.99));
    const back = timeline.find((s) => s.t >= ra.upAt && [...s.worst].every(([n, ms]) => ms <= level(n)));
    restartFigures = {
      ...ra, recoveredS: back ? (back.t - ra.upAt) / 1000 : null,
      worstLagMs: Math.max(0, ...timeline.filter((s) => s.t >= ra.downAt).flatMap((s) => [...s.worst.values()])),
    };
  }
  return {
    restart: restartFigures, startedAt: t0,
    rowsWritten, pointsWritten: rowsWritten * o.metrics, rowsStored: stored, rowsInChunks: inChunks, writeS, drainedS, group,
    lag: { p50Ms: quantile(all, 0.5), p99Ms: quantile(all, 0.99), maxMs: Math.max(0, ...all), perNode },
    store: {
      rowsPerS: stored / drainedS, pointsPerS: (stored * o.metrics) / drainedS, txPerS: (after.tx - before.tx) / drainedS,
      sizeBytes: size, bytesPerPoint: size / Math.max(1, stored * o.metrics), chunkRows,
      compactedBytesPerPoint: vacuumed === null ? null : vacuumed / Math.max(1, stored * o.metrics),
      chunkTablesBytesPerPoint: chunkTables === null ? null : chunkTables / Math.max(1, stored * o.metrics), lockWaitsSeen: lockWaits, deadlocks: after.dl - before.dl,
      pgCpuS: cpu0 !== null && cpu1 !== null ? (restartAt ? cpu1 + cpuCarried : cpu1 - cpu0) : null,
    },
  };
}
