// allReduce bus bandwidth: logd's native gloo binding vs torch.distributed
// (gloo) from /usr/bin/python3, same machine, same run, same loop.
//
//   node dist/bench/allreduce.js [--ranks 2,4] [--min 4096] [--max 67108864] [--rounds 3] [--quick]
//
// busbw = 2 (n - 1) / n * bytes / time (the NCCL-tests convention), float32,
// iterations per size = clamp(128 MiB / bytes, 5, 200) after 20 warm-up calls.
// The implementations run alternately for --rounds rounds and each size keeps
// its best round, so load from other processes on a shared machine hits both
// sides alike instead of whichever happened to run during a spike.
// logd is measured twice: with the default per-collective fingerprint check
// and with checkCollectives: false (torch does no such check by default).
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const here = fileURLToPath(import.meta.url);
const repoRoot = join(dirname(here), '..', '..'); // dist/bench/allreduce.js -> repo root
const BUDGET = 128 * 1024 * 1024;
const WARMUP = 20; // also lets V8 tier up the JS loop; same count on the torch side
const PYTHON = '/usr/bin/python3';

interface Point {
  bytes: number;
  iters: number;
  seconds: number;
}

async function worker(sizes: number[], check: boolean): Promise<void> {
  const { initProcessGroup } = await import('../native/index.js');
  const pg = await initProcessGroup({ backend: 'gloo', initMethod: 'env://', timeoutMs: 120_000, checkCollectives: check });
  for (const bytes of sizes) {
    const t = new Float32Array(bytes / 4).fill(1);
    const iters = Math.max(5, Math.min(200, Math.floor(BUDGET / bytes)));
    for (let i = 0; i < WARMUP; i++) await pg.allReduce(t, 'sum');
    await pg.barrier();
    const t0 = performance.now();
    for (let i = 0; i < iters; i++) await pg.allReduce(t, 'sum');
    const seconds = (performance.now() - t0) / 1000 / iters;
    if (pg.rank === 0) console.log(JSON.stringify({ bytes, iters, seconds }));
  }
  await pg.destroy();
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer().once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

/** Runs `n` ranks of one implementation and returns rank 0's points; kills everything at the deadline. */
async function runRanks(n: number, cmd: string, args: string[], deadlineMs: number): Promise<Point[]> {
  const port = await freePort();
  const children = Array.from({ length: n }, (_, rank) =>
    spawn(cmd, args, {
      env: { ...process.env, MASTER_ADDR: '127.0.0.1', MASTER_PORT: String(port), RANK: String(rank), WORLD_SIZE: String(n) },
      stdio: ['ignore', 'pipe', 'inherit'],
    }),
  );
  let out = '';
  children[0]!.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  for (const c of children.slice(1)) c.stdout!.resume();
  const timer = setTimeout(() => children.forEach((c) => c.kill('SIGKILL')), deadlineMs);
  const codes = await Promise.all(children.map((c) => new Promise<number | null>((r) => c.on('close', (code) => r(code)))));
  clearTimeout(timer);
  if (codes.some((c) => c !== 0)) throw new Error(`bench: ${cmd} ${args.join(' ')} failed (exit codes ${codes.join(',')})`);
  return out.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Point);
}

const busbw = (n: number, p: Point) => ((2 * (n - 1)) / n) * (p.bytes / p.seconds) / 1e9;
const human = (b: number) => (b >= 1 << 20 ? `${b / (1 << 20)} MiB` : `${b / 1024} KiB`);

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      worker: { type: 'string' },
      sizes: { type: 'string' },
      ranks: { type: 'string', default: '2,4' },
      min: { type: 'string', default: '4096' },
      max: { type: 'string', default: String(64 * 1024 * 1024) },
      rounds: { type: 'string', default: '3' },
      // `make bench`'s run-all --quick: sizes up to 4 MiB, one round.
      quick: { type: 'boolean', default: false },
    },
  });
  if (values.quick) {
    values.max = String(4 * 1024 * 1024);
    values.rounds = '1';
  }
  if (values.worker) return worker(values.sizes!.split(',').map(Number), values.worker === 'checked');

  const sizes: number[] = [];
  for (let b = Number(values.min); b <= Number(values.max); b *= 4) sizes.push(b);
  const torchScript = join(repoRoot, 'bench', 'allreduce_torch.py');
  if (!existsSync(torchScript)) throw new Error(`bench: ${torchScript} is missing`);
  const rounds = Number(values.rounds);
  console.log(`allReduce float32, gloo over loopback; busbw in GB/s (best of ${rounds} alternating rounds); node ${process.version}; ${cpus().length} CPUs; load average at start ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  const best = (a: Point[] | null, b: Point[]) => (a === null ? b : a.map((p, i) => (b[i]!.seconds < p.seconds ? b[i]! : p)));
  for (const n of values.ranks.split(',').map(Number)) {
    const deadline = 300_000;
    let torch: Point[] | null = null;
    let fast: Point[] | null = null;
    let checked: Point[] | null = null;
    for (let r = 0; r < rounds; r++) {
      torch = best(torch, await runRanks(n, PYTHON, [torchScript, sizes.join(','), String(BUDGET)], deadline));
      fast = best(fast, await runRanks(n, process.execPath, [here, '--worker', 'unchecked', '--sizes', sizes.join(',')], deadline));
      checked = best(checked, await runRanks(n, process.execPath, [here, '--worker', 'checked', '--sizes', sizes.join(',')], deadline));
    }
    console.log(`\n${n} ranks`);
    console.log('| size | iters | torch busbw | logd busbw (check off) | ratio | logd busbw (default, check on) | ratio |');
    console.log('|---:|---:|---:|---:|---:|---:|---:|');
    sizes.forEach((bytes, i) => {
      const [t, f, c] = [torch![i]!, fast![i]!, checked![i]!];
      const [bt, bf, bc] = [busbw(n, t), busbw(n, f), busbw(n, c)];
      console.log(`| ${human(bytes)} | ${t.iters} | ${bt.toFixed(3)} | ${bf.toFixed(3)} | ${(bf / bt).toFixed(2)}x | ${bc.toFixed(3)} | ${(bc / bt).toFixed(2)}x |`);
    });
  }
  // Load from other processes is the main source of noise on small machines; show it.
  console.log(`\nload average at end ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
}

main().catch((err: Error) => {
  console.error(err.message);
  process.exit(1);
});
