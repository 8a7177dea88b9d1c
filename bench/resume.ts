// Resume figures (issue 19): init(resume='allow') of an existing 1 M-row run
// against a fresh init() (target <= 2x), and, with a real PostgreSQL, the time
// until the first log() is accepted when a node continues a run that only the
// shared store has. Prints figures; asserts nothing.
//
//   node dist/bench/resume.js [--quick] [--rounds N]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { startPg, pgUnavailable } from './pg-cluster.js';
import { readStatus } from '../daemon/upload/status.js';

const self = fileURLToPath(import.meta.url);
const CLI = path.join(path.dirname(self), '..', 'daemon', 'cli.js');
const args = process.argv.slice(2);
const quick = args.includes('--quick');
const roundsArg = args.indexOf('--rounds');
const rounds = roundsArg >= 0 ? Number(args[roundsArg + 1]) : 5;

// ---- worker roles (this file spawned with --role) ----
async function role(name: string, a: string[]): Promise<void> {
  const logd = await import('../client/index.js');
  if (name === 'fill') {
    // One run of `rows` rows x 10 metrics, finished.
    const [id, rows] = [a[0]!, Number(a[1])];
    const run = await logd.init({ project: 'bench-resume', id, resume: 'never' });
    const row = { loss: 0.5, acc: 0.25, lr: 0.001, m3: 3, m4: 4, m5: 5, m6: 6, m7: 7, m8: 8, m9: 9 };
    for (let i = 0; i < rows; i++) {
      row.loss = i;
      run.log(row, { step: i });
      if (i % 20_000 === 0) await new Promise((r) => setImmediate(r));
    }
    await run.flush(300_000);
    const t0 = performance.now();
    await run.finish({ timeoutMs: 300_000 });
    console.log(JSON.stringify({ finish: performance.now() - t0 }));
    return;
  }
  // 'init': one timed init() (fresh id, or resume='allow' of a[0]), then the first log() until the daemon has it.
  const id = a[0] === '-' ? undefined : a[0];
  const t0 = performance.now();
  const run = await logd.init({ project: 'bench-resume', ...(id ? { id, resume: 'allow' as const } : {}) });
  const tInit = performance.now() - t0;
  run.log({ loss: 1 });
  await run.flush(60_000);
  const tFirst = performance.now() - t0;
  await run.finish({ timeoutMs: 60_000 });
  console.log(JSON.stringify({ init: tInit, first: tFirst }));
}

function envFor(dir: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const e: NodeJS.ProcessEnv = { ...process.env, LOGD_DIR: path.join(dir, 'data'), LOGD_RUNTIME_DIR: path.join(dir, 'rt'), LOGD_IDLE_TIMEOUT_MS: '300000', LOGD_SAMPLE_INTERVAL_MS: '0' };
  delete e.LOGD_SERVICE;
  delete e.LOGD_UPLOAD_URL;
  return { ...e, ...extra };
}

function run(e: NodeJS.ProcessEnv, argv: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [self, '--role', ...argv], { env: e, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString()));
    p.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`bench role ${argv[0]} exited with ${code}`))));
  });
}

const timed = async (e: NodeJS.ProcessEnv, id: string) => JSON.parse((await run(e, ['init', id])).trim().split('\n').pop()!) as { init: number; first: number };
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const stop = (e: NodeJS.ProcessEnv) => {
  try {
    execFileSync(process.execPath, [CLI, 'stop'], { env: e, stdio: 'ignore' });
  } catch {
    /* not running */
  }
};

async function drained(dataDir: string): Promise<void> {
  const deadline = Date.now() + 300_000;
  while (Date.now() < deadline) {
    const st = readStatus(dataDir);
    if (st && st.state === 'idle' && st.backlog.runs === 0) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error('the uploading daemon did not drain its backlog within 5 minutes');
}

async function main(): Promise<void> {
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'ldbench-resume-'));
  const rows = quick ? 100_000 : 1_000_000;
  try {
    // 1. On one node: resume='allow' of a run of `rows` rows against a fresh init(), alternated.
    const e = envFor(path.join(base, 'local'));
    const filled = JSON.parse((await run(e, ['fill', 'big', String(rows)])).trim().split('\n').pop()!) as { finish: number };
    console.log(`finish() of the ${rows}-row run, its rows acknowledged (its checkpoint is read on a thread, not waited for): ${filled.finish.toFixed(1)} ms`);
    await timed(e, '-'); // warm-up: the daemon and the page cache
    const fresh: number[] = [], resumed: number[] = [], freshFirst: number[] = [], resumedFirst: number[] = [];
    for (let r = 0; r < rounds; r++) {
      for (const which of r % 2 ? ['resume', 'fresh'] : ['fresh', 'resume']) {
        const t = await timed(e, which === 'fresh' ? '-' : 'big');
        (which === 'fresh' ? fresh : resumed).push(t.init);
        (which === 'fresh' ? freshFirst : resumedFirst).push(t.first);
      }
    }
    stop(e);
    const f = median(fresh), s = median(resumed);
    console.log(`bench: init() of a fresh run: ${f.toFixed(1)} ms; first log() durable ${median(freshFirst).toFixed(1)} ms (median of ${rounds})`);
    console.log(`bench: init(resume='allow') of a ${rows}-row run: ${s.toFixed(1)} ms = ${(s / f).toFixed(2)}x fresh; first log() durable ${median(resumedFirst).toFixed(1)} ms (target <= 2x)`);
    console.log(`bench:   per round, fresh: ${fresh.map((x) => x.toFixed(0)).join(', ')}; resumed: ${resumed.map((x) => x.toFixed(0)).join(', ')} ms`);

    // 2. Across nodes: runs logged on node a, continued on node b, which has none of them.
    const why = pgUnavailable();
    if (why) {
      console.log(`bench: across nodes skipped: ${why}`);
      return;
    }
    const cluster = await startPg();
    try {
      const n = Math.max(3, Math.min(rounds, 5));
      const storeRows = quick ? 20_000 : 100_000;
      const a = envFor(path.join(base, 'a'), { LOGD_NODE: 'node-a', LOGD_UPLOAD_URL: cluster.url });
      const b = envFor(path.join(base, 'b'), { LOGD_NODE: 'node-b', LOGD_UPLOAD_URL: cluster.url });
      for (let i = 0; i < n; i++) await run(a, ['fill', `xn${i}`, String(storeRows)]);
      await drained(a.LOGD_DIR!);
      stop(a);
      await timed(b, '-'); // node b's daemon up, its store connection made
      const first: number[] = [], init: number[] = [];
      for (let i = 0; i < n; i++) {
        const t = await timed(b, `xn${i}`);
        init.push(t.init);
        first.push(t.first);
      }
      stop(b);
      console.log(`bench: continuing on node b a ${storeRows}-row run only the shared store has: init() ${median(init).toFixed(1)} ms, first log() durable ${median(first).toFixed(1)} ms (median of ${n}; per run: ${first.map((x) => x.toFixed(0)).join(', ')} ms)`);
    } finally {
      cluster.destroy();
    }
  } finally {
    fs.rmSync(base, { recursive: true, force: true });
  }
}

if (args[0] === '--role') await role(args[1]!, args.slice(2));
else await main();
