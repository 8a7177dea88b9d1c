// Core benchmarks: prints figures, asserts nothing. Run: `make bench` or
// `node dist/bench/core.js [--quick]`. Each figure is measured in this run,
// against a real daemon, on a fresh data dir.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const self = fileURLToPath(import.meta.url);
const root = path.resolve(path.dirname(self), '..', '..');
const cli = path.join(root, 'dist', 'daemon', 'cli.js');
const quick = process.argv.includes('--quick');

// ---- worker roles (this file spawned with --role) ----
async function worker(role: string, arg: number): Promise<void> {
  const logd = await import('../client/index.js');
  const metrics = () => ({ loss: Math.random(), acc: Math.random(), lr: 0.001, m3: 3, m4: 4, m5: 5, m6: 6, m7: 7, m8: 8, m9: 9 });
  if (role === 'log-cost') {
    const run = await logd.init({ project: 'bench', name: 'log-cost' });
    const rows = Array.from({ length: 1000 }, metrics);
    for (let i = 0; i < 20_000; i++) run.log(rows[i % 1000]); // warm-up (JIT)
    await run.flush(60_000);
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    for (let i = 0; i < arg; i++) run.log(rows[i % 1000]);
    const tLog = performance.now() - t0;
    await run.flush(120_000);
    const c = process.cpuUsage(c0);
    const f0 = performance.now();
    await run.finish();
    const tFinish = performance.now() - f0;
    console.log(JSON.stringify({ cpuUsPerLog: (c.user + c.system) / arg, wallUsPerLogCall: (tLog * 1000) / arg, finishMs: tFinish }));
  } else if (role === 'ingest') {
    // Start together: every worker inits, then waits for the go file, so
    // process start-up is not counted as ingest time.
    const run = await logd.init({ project: 'bench', name: `ingest-${process.env.RANK}` });
    console.log('ready');
    const go = process.env.BENCH_GO!;
    while (!fs.existsSync(go)) await new Promise((r) => setTimeout(r, 2));
    const row = metrics();
    const start = Date.now();
    const c0 = process.cpuUsage();
    for (let i = 0; i < arg; i++) {
      run.log(row);
      if (i % 20_000 === 0) await new Promise((r) => setImmediate(r)); // let acks in
    }
    await run.finish({ timeoutMs: 120_000 });
    const c = process.cpuUsage(c0);
    console.log(JSON.stringify({ start, end: Date.now(), cpuS: (c.user + c.system) / 1e6 }));
  } else if (role === 'finish') {
    // A trainer that has logged a million points is long warm: warm up the
    // same code paths once, then measure.
    const row = metrics();
    const warm = await logd.init({ project: 'bench', name: 'finish-warm-up' });
    for (let i = 0; i < arg / 10; i++) warm.log(row);
    await warm.finish({ timeoutMs: 60_000 });
    const run = await logd.init({ project: 'bench', name: 'finish' });
    for (let i = 0; i < arg / 10; i++) run.log(row);
    const t0 = performance.now();
    const r = await run.finish({ timeoutMs: 60_000 });
    console.log(JSON.stringify({ finishMs: performance.now() - t0, state: r.state }));
  } else if (role === 'init') {
    const t0 = performance.now();
    const run = await logd.init({ project: 'bench', name: 'init' });
    const ms = performance.now() - t0;
    await run.finish();
    // A second init in the same (now warm) process: what every later run costs.
    const t1 = performance.now();
    const again = await logd.init({ project: 'bench', name: 'init-2' });
    const ms2 = performance.now() - t1;
    await again.finish();
    console.log(JSON.stringify({ initMs: ms, warmInitMs: ms2 }));
  } else if (role === 'open-runs') {
    const runs = [];
    for (let i = 0; i < arg; i++) runs.push(await logd.init({ project: 'bench', name: `open-${i}` }));
    for (const r of runs) for (let s = 0; s < 1000; s++) r.log(metrics());
    await Promise.all(runs.map((r) => r.flush(60_000)));
    console.log(JSON.stringify({ ready: runs.length }));
    await new Promise((r) => process.stdin.once('data', r));
    process.stdin.destroy(); // a paused-but-open stdin would keep this process alive
    await Promise.all(runs.map((r) => r.finish()));
  } else if (role === 'big-run') {
    const run = await logd.init({ project: 'bench', name: 'big', id: 'bigrun' });
    const row = metrics();
    for (let i = 0; i < arg; i++) {
      run.log(row);
      if (i % 50_000 === 0) await new Promise((r) => setImmediate(r));
    }
    await run.finish({ timeoutMs: 120_000 });
    console.log(JSON.stringify({ id: run.id }));
  }
}

// ---- the driver ----
function env(dataDir: string, runtimeDir: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const e: NodeJS.ProcessEnv = { ...process.env, LOGD_DIR: dataDir, LOGD_RUNTIME_DIR: runtimeDir, ...extra };
  delete e.LOGD_SERVICE;
  return e;
}

function runRole(e: NodeJS.ProcessEnv, role: string, arg: number, extraEnv: Record<string, string> = {}, onLine?: (l: string) => void): Promise<any> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [self, '--role', role, String(arg)], { env: { ...e, ...extraEnv }, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    p.stdout.on('data', (d) => {
      out += d;
      if (onLine) for (const l of String(d).split('\n')) if (l) onLine(l.trim());
    });
    const timer = setTimeout(() => p.kill('SIGKILL'), 300_000);
    // 'close', not 'exit': a child's last line may still be in the pipe when 'exit' fires
    p.on('close', (code) => {
      clearTimeout(timer);
      if (code !== 0) reject(new Error(`bench worker ${role} exited with ${code}`));
      else resolve(JSON.parse(out.trim().split('\n').pop()!));
    });
  });
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

function daemonPid(runtimeDir: string): number {
  return JSON.parse(fs.readFileSync(path.join(runtimeDir, 'service.json'), 'utf8')).pid;
}

function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

function cpuTicks(pid: number): number {
  const s = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
  return Number(f[11]) + Number(f[12]);
}

async function main(): Promise<void> {
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'ldbench-'));
  const dataDir = path.join(base, 'data');
  const rt = path.join(base, 'rt');
  const e = env(dataDir, rt, { LOGD_IDLE_TIMEOUT_MS: '60000' });
  const results: Array<[string, string, string]> = [];
  const say = (what: string, value: string, target: string) => {
    results.push([what, value, target]);
    console.log(`bench: ${what}: ${value} (target ${target})`);
  };
  try {
    // init that has to auto-start the daemon (fresh runtime dir each time)
    const cold: number[] = [];
    for (let i = 0; i < (quick ? 2 : 5); i++) {
      const r = path.join(base, `rt-cold-${i}`);
      cold.push((await runRole(env(path.join(base, `data-cold-${i}`), r, { LOGD_IDLE_TIMEOUT_MS: '500' }), 'init', 0)).initMs);
    }
    say('init with daemon auto-start (median, fresh process)', `${median(cold).toFixed(1)} ms`, '<= 400 ms');

    // start the daemon used by the rest
    await runRole(e, 'init', 0);
    const dpid = daemonPid(rt);
    const first: number[] = [];
    const warm: number[] = [];
    for (let i = 0; i < (quick ? 3 : 7); i++) {
      const r = await runRole(e, 'init', 0);
      first.push(r.initMs);
      warm.push(r.warmInitMs);
    }
    say('init against a running daemon, first init of a fresh process (median)', `${median(first).toFixed(1)} ms`, '<= 10 ms');
    say('init against a running daemon, a later init in the same process (median)', `${median(warm).toFixed(1)} ms`, '<= 10 ms');

    const n = quick ? 200_000 : 1_000_000;
    const lc = await runRole(e, 'log-cost', n);
    say(`client CPU per log() of 10 metrics (${n} records, encode + send + acks included)`, `${lc.cpuUsPerLog.toFixed(2)} µs`, '<= 1 µs');
    say('wall time per log() call (the trainer-visible cost)', `${lc.wallUsPerLogCall.toFixed(2)} µs`, '-');

    const fin = await runRole(e, 'finish', 1_000_000);
    say('finish right after 1 M points (100 k rows x 10) were logged', `${fin.finishMs.toFixed(1)} ms`, '<= 100 ms');

    // durable ingest: 8 writer processes
    const per = quick ? 100_000 : 400_000;
    const go = path.join(base, 'go');
    const ends = Array.from({ length: 8 }, (_, r) => runRole(e, 'ingest', per, { RANK: String(r), WORLD_SIZE: '8', BENCH_GO: go }, (line) => {
      if (line === 'ready') readyCount++;
    }));
    let readyCount = 0;
    const waitStart = Date.now();
    while (readyCount < 8 && Date.now() - waitStart < 60_000) await new Promise((r) => setTimeout(r, 10));
    const c0 = cpuTicks(dpid);
    fs.writeFileSync(go, '');
    const spans = await Promise.all(ends);
    const secs = (Math.max(...spans.map((s) => s.end)) - Math.min(...spans.map((s) => s.start))) / 1000;
    const daemonCpu = (cpuTicks(dpid) - c0) / 100;
    say(`durable ingest, 8 writer processes x ${per} rows x 10 metrics (first log() to last finish() returned)`, `${((8 * per * 10) / secs / 1e6).toFixed(2)} M points/s (${secs.toFixed(2)} s, daemon CPU ${daemonCpu.toFixed(2)} s)`, '>= 5 M points/s');

    // 64 open runs
    const holder = spawn(process.execPath, [self, '--role', 'open-runs', '64'], { env: e, stdio: ['pipe', 'pipe', 'inherit'] });
    await new Promise<void>((resolve) => holder.stdout.on('data', (d) => String(d).includes('ready') && resolve()));
    say('daemon RSS with 64 open runs (1000 rows each)', `${rssMb(dpid).toFixed(1)} MB`, '<= 150 MB');
    holder.stdin.end('go\n');
    await new Promise((r) => holder.on('exit', r));

    // history query on a 1 M-row run
    const rows = quick ? 200_000 : 1_000_000;
    const big = await runRole(e, 'big-run', rows);
    const q0 = performance.now();
    const out = execFileSync(process.execPath, [cli, 'export', big.id, '--keys', 'loss', '--raw'], { env: e, maxBuffer: 1 << 30 });
    const qms = performance.now() - q0;
    const lines = out.toString().trim().split('\n').length;
    say(`one metric of a ${rows}-row run, read back and exported as JSON lines (CLI process included)`, `${qms.toFixed(0)} ms for ${lines} rows`, 'fast');
    const s0 = performance.now();
    execFileSync(process.execPath, [cli, 'show', big.id, '--rows', '1'], { env: e });
    say(`logd show on the ${rows}-row run`, `${(performance.now() - s0).toFixed(0)} ms`, 'fast');
  } finally {
    try {
      execFileSync(process.execPath, [cli, 'stop'], { env: e, stdio: 'ignore' });
    } catch {
      /* already gone */
    }
    fs.rmSync(base, { recursive: true, force: true });
  }
  console.log('\n| what | measured | target |\n|---|---|---|');
  for (const [a, b, c] of results) console.log(`| ${a} | ${b} | ${c} |`);
}

const i = process.argv.indexOf('--role');
if (i >= 0) void worker(process.argv[i + 1], Number(process.argv[i + 2]));
else void main();
