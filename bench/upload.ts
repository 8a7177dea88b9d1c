// Upload benchmarks (issue 10), against a real PostgreSQL (a throwaway
// cluster, or --store URL): upload throughput, local ingest with and without
// uploading, one metric of a large run read back from the store against the
// local read, and the upload lag of a paced 8-writer job.
//
//   node dist/bench/upload.js [--quick] [--store postgres://…]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { startPg, pgUnavailable, type PgCluster } from './pg-cluster.js';
import { DataDirRuns } from '../daemon/upload/local-runs.js';
import { Uploader } from '../daemon/upload/uploader.js';
import { parseStoreUrl } from '../daemon/upload/url.js';
import { readStatus } from '../daemon/upload/status.js';

const self = fileURLToPath(import.meta.url);
const CLI = path.join(path.dirname(self), '..', 'daemon', 'cli.js');
const args = process.argv.slice(2);
const quick = args.includes('--quick');

// ---- worker roles (this file spawned with --role) ----
async function worker(role: string, rows: number): Promise<void> {
  const logd = await import('../client/index.js');
  const row = { loss: 0.5, acc: 0.25, lr: 0.001, m3: 3, m4: 4, m5: 5, m6: 6, m7: 7, m8: 8, m9: 9 };
  const run = await logd.init({ project: 'bench-upload', name: `${role}-${process.env.RANK ?? 0}`, group: process.env.BENCH_GROUP ?? '' });
  console.log(`ready ${run.id}`);
  const go = process.env.BENCH_GO;
  while (go && !fs.existsSync(go)) await new Promise((r) => setTimeout(r, 2));
  const start = Date.now();
  if (role === 'ingest') {
    for (let i = 0; i < rows; i++) {
      row.loss = i;
      run.log(row);
      if (i % 20_000 === 0) await new Promise((r) => setImmediate(r));
    }
  } else {
    // paced: 1000 rows/s in steps of 50, like a trainer that logs every few ms
    for (let i = 0; i < rows; i += 50) {
      for (let j = 0; j < 50; j++) run.log({ ...row, loss: i + j });
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  await run.finish({ timeoutMs: 300_000 });
  console.log(JSON.stringify({ start, end: Date.now(), id: run.id }));
}

function envFor(dir: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const e: NodeJS.ProcessEnv = { ...process.env, LOGD_DIR: path.join(dir, 'data'), LOGD_RUNTIME_DIR: path.join(dir, 'rt'), LOGD_IDLE_TIMEOUT_MS: '120000', LOGD_SAMPLE_INTERVAL_MS: '1000', ...extra };
  delete e.LOGD_SERVICE;
  delete e.LOGD_UPLOAD_URL;
  return { ...e, ...extra };
}

/** `writers` worker processes that start logging together; points/s from the first start to the last finish. */
async function job(e: NodeJS.ProcessEnv, role: string, writers: number, rows: number, base: string, onRunning?: () => Promise<void>): Promise<{ pointsPerS: number; ids: string[] }> {
  const go = path.join(base, `go-${Math.random().toString(36).slice(2)}`);
  let ready = 0;
  const outs: Array<{ start: number; end: number; id: string }> = [];
  const procs = Array.from({ length: writers }, (_, rank) => new Promise<void>((resolve, reject) => {
    const p = spawn(process.execPath, [self, '--role', role, String(rows)], { env: { ...e, RANK: String(rank), BENCH_GO: go }, stdio: ['ignore', 'pipe', 'inherit'] });
    let buf = '';
    p.stdout.on('data', (d: Buffer) => {
      buf += d.toString();
      const lines = buf.split('\n');
      buf = lines.pop()!;
      for (const l of lines) {
        if (l.startsWith('ready')) ready++;
        else if (l.startsWith('{')) outs.push(JSON.parse(l));
      }
    });
    p.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`bench worker exited with ${code}`))));
  }));
  while (ready < writers) await new Promise((r) => setTimeout(r, 10));
  fs.writeFileSync(go, '');
  const side = onRunning?.();
  await Promise.all(procs);
  await side;
  const t0 = Math.min(...outs.map((o) => o.start));
  const t1 = Math.max(...outs.map((o) => o.end));
  return { pointsPerS: (writers * rows * 10) / ((t1 - t0) / 1000), ids: outs.map((o) => o.id) };
}

function cli(e: NodeJS.ProcessEnv, argv: string[]): number {
  const t0 = performance.now();
  execFileSync(process.execPath, [CLI, ...argv], { env: e, stdio: ['ignore', 'ignore', 'pipe'], maxBuffer: 1 << 30 });
  return performance.now() - t0;
}

/** Waits (at most 2 minutes) until the daemon of this data dir has nothing left to upload. */
async function drained(dataDir: string): Promise<void> {
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    const st = readStatus(dataDir);
    if (st && st.state === 'idle' && st.backlog.runs === 0) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error('the uploading daemon did not drain its backlog within 2 minutes');
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];

async function main(): Promise<void> {
  const storeArg = args.indexOf('--store');
  let cluster: PgCluster | null = null;
  let baseUrl: string;
  if (storeArg >= 0) baseUrl = args[storeArg + 1];
  else {
    const why = pgUnavailable();
    if (why) {
      console.log(`bench: upload skipped: ${why}; or pass --store postgres://… (an empty database)`);
      return;
    }
    cluster = await startPg();
    baseUrl = cluster.url;
  }
  /** A fresh database per measurement, so each starts from an empty store. */
  const freshDb = (name: string) => {
    if (!cluster) return baseUrl;
    cluster.createDatabase(name);
    return cluster.urlFor(name);
  };
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'ldbench-up-'));
  const say = (what: string, value: string, target: string) => console.log(`bench: ${what}: ${value} (target ${target})`);
  try {
    // 1. A large run, ingested locally without uploading.
    const bigRows = quick ? 200_000 : 1_000_000;
    const local = envFor(path.join(base, 'big'));
    const big = await job(local, 'ingest', 1, bigRows, base);
    const bigId = big.ids[0];

    // 2. Upload throughput: the uploader over that data dir into an empty store.
    const url = freshDb('bench_big');
    const up = new Uploader({ url: parseStoreUrl(url), node: 'bench', runs: new DataDirRuns(local.LOGD_DIR!), log: () => {}, pollMs: 0, backoffMaxMs: 0, statusDir: null, encoderThread: true });
    const t0 = performance.now();
    while (await up.pass()) { /* one slice per pass */ }
    const upMs = performance.now() - t0;
    await up.stop(1000);
    say(`upload throughput (1 run, ${bigRows} rows x 10 metrics, log read + chunking on the encoder thread + binary COPY)`, `${((bigRows * 10) / (upMs / 1000) / 1e6).toFixed(2)} M points/s (${(upMs / 1000).toFixed(2)} s)`, '>= 2 M points/s');
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    const size = (await c.query("SELECT pg_total_relation_size('logd_values') + pg_total_relation_size('logd_rows') AS b")).rows[0].b;
    await c.end();
    say('store size per point (rows + values tables, indexes included)', `${(Number(size) / (bigRows * 10)).toFixed(1)} bytes`, '~8 bytes');

    // 3. One metric of the large run, whole CLI process, local vs shared store (median of 3).
    const out = path.join(base, 'one.jsonl');
    const readLocal = median([0, 1, 2].map(() => cli(local, ['export', bigId, '--keys', 'loss', '--output', out, '--force'])));
    // The URL holds the password: it goes in the environment, never on a command line (logd refuses that).
    const readShared = median([0, 1, 2].map(() => cli({ ...local, LOGD_STORE_URL: url }, ['export', bigId, '--keys', 'loss', '--output', out, '--force'])));
    say(`one metric of a ${bigRows}-row run, export --keys loss: local`, `${readLocal.toFixed(0)} ms`, '-');
    say(`one metric of a ${bigRows}-row run, export --keys loss: --store`, `${readShared.toFixed(0)} ms (${(readShared / readLocal).toFixed(2)}x local)`, '<= 2x local');
    cli(local, ['stop']);

    // 4. Local durable ingest with and without uploading, in the same run:
    // alternated three times each (the machine's load moves), medians compared.
    const W = 4, R = quick ? 50_000 : 200_000;
    const plainEnv = envFor(path.join(base, 'plain'));
    const upEnv = envFor(path.join(base, 'up'), { LOGD_UPLOAD_URL: freshDb('bench_ingest') });
    const plain: number[] = [], withUp: number[] = [];
    for (let rep = 0; rep < 3; rep++) {
      plain.push((await job(plainEnv, 'ingest', W, R, base)).pointsPerS);
      withUp.push((await job(upEnv, 'ingest', W, R, base)).pointsPerS);
      await drained(upEnv.LOGD_DIR!); // each round starts with nothing left to upload
    }
    say(`durable ingest, ${W} writers x ${R} rows x 10 metrics, no upload (median of 3: ${plain.map((x) => (x / 1e6).toFixed(2)).join(', ')})`, `${(median(plain) / 1e6).toFixed(2)} M points/s`, '-');
    say(`durable ingest while uploading (median of 3: ${withUp.map((x) => (x / 1e6).toFixed(2)).join(', ')})`, `${(median(withUp) / 1e6).toFixed(2)} M points/s (${((median(withUp) / median(plain)) * 100).toFixed(0)} % of without)`, '>= 80 %');
    cli(plainEnv, ['stop']);
    cli(upEnv, ['stop']);

    // 5. Upload lag of a paced 8-writer job: newest row in the store against the wall clock.
    const lagUrl = freshDb('bench_lag');
    const lagEnv = envFor(path.join(base, 'lag'), { LOGD_UPLOAD_URL: lagUrl, BENCH_GROUP: 'lag' });
    const lags: number[] = [];
    const pc = new pg.Client({ connectionString: lagUrl });
    let polling = true;
    const paced = quick ? 5_000 : 15_000;
    await job(lagEnv, 'paced', 8, paced, base, async () => {
      await pc.connect();
      await new Promise((r) => setTimeout(r, 2000)); // past the runs' start
      while (polling) {
        const r = await pc.query('SELECT max(times[nrows]) AS t FROM logd_rows WHERE stream = 0').catch(() => null);
        const t = r?.rows[0]?.t;
        if (t) lags.push(Date.now() - t * 1000);
        await new Promise((res) => setTimeout(res, 200));
        if (lags.length >= ((paced / 1000) - 3) * 5) polling = false;
      }
    });
    await pc.end();
    say(`upload lag, 8 paced writers (8 k rows/s, 80 k points/s), newest stored row vs now, ${lags.length} samples`, `p50 ${(pct(lags, 0.5) / 1000).toFixed(2)} s, p95 ${(pct(lags, 0.95) / 1000).toFixed(2)} s`, 'p95 <= 2 s');
    cli(envFor(path.join(base, 'lag')), ['stop']);
  } finally {
    cluster?.destroy();
    fs.rmSync(base, { recursive: true, force: true });
  }
}

if (args[0] === '--role') void worker(args[1], Number(args[2]));
else main().then(() => process.exit(0), (e) => {
  console.error(`bench/upload: ${(e as Error).message}`);
  process.exit(1);
});
