// Start-up and finish costs of the TypeScript client, each in a fresh process:
// importing logd (against a bare `node -e 0`), the first init() against a
// running daemon, and finish() of a run with 100 rows. Wall time and the
// process's own CPU time (which a loaded machine inflates far less) are
// printed as medians. `--client A,B` compares client builds (the bundle
// dist/client/logd.js, or index.js, of two checkouts, say), alternated round
// by round against one daemon; the default is this checkout's bundle, what
// `import 'logd'` loads.
//
//   node dist/bench/startup.js [--rounds 15] [--client /path/a/dist/client/index.js,/path/b/dist/client/logd.js]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const self = fileURLToPath(import.meta.url);
const root = path.resolve(path.dirname(self), '..', '..');
const cli = path.join(root, 'dist', 'daemon', 'cli.js');
const arg = (name: string, dflt: string) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : dflt);

const cpuMs = (c: NodeJS.CpuUsage) => (c.user + c.system) / 1000;

/** The measured process: import, init, log 100 rows of 10 floats, finish; or only the import. */
async function probe(client: string, what: string): Promise<void> {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const logd = await import(client);
  const t1 = performance.now();
  const c1 = process.cpuUsage();
  const out: Record<string, number> = { bootCpu: cpuMs(c0), importMs: t1 - t0, importCpu: cpuMs(c1) - cpuMs(c0) };
  if (what === 'run') {
    const run = await logd.init({ project: 'startup', name: 'probe' });
    const t2 = performance.now();
    const c2 = process.cpuUsage();
    for (let i = 0; i < 100; i++) {
      const row: Record<string, number> = {};
      for (let j = 0; j < 10; j++) row[`m${j}`] = i + j / 10;
      run.log(row, { step: i });
    }
    const t3 = performance.now();
    const c3 = process.cpuUsage();
    const res = await run.finish();
    const t4 = performance.now();
    if (res.state !== 'finished') throw new Error(`startup: the run ended ${res.state}: ${res.message}`);
    Object.assign(out, { initMs: t2 - t1, initCpu: cpuMs(c2) - cpuMs(c1), finishMs: t4 - t3, finishCpu: cpuMs(process.cpuUsage()) - cpuMs(c3) });
  }
  out.totalCpu = cpuMs(process.cpuUsage());
  console.log(JSON.stringify(out));
}

function run(argv: string[], env: NodeJS.ProcessEnv): Promise<{ ms: number; out: Record<string, number> }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const p = spawn(process.execPath, argv, { env, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    const timer = setTimeout(() => p.kill('SIGKILL'), 120_000);
    p.on('exit', (code) => {
      clearTimeout(timer);
      const ms = performance.now() - t0;
      if (code !== 0) reject(new Error(`startup: ${argv.join(' ')} exited with ${code}`));
      else resolve({ ms, out: out.trim() ? JSON.parse(out.trim().split('\n').pop()!) : {} });
    });
  });
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

async function main(): Promise<void> {
  const rounds = Number(arg('--rounds', '15'));
  const clients = arg('--client', path.join(root, 'dist', 'client', 'logd.js')).split(',').map((c) => path.resolve(c));
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'startup-'));
  const env: NodeJS.ProcessEnv = { ...process.env, LOGD_DIR: path.join(base, 'data'), LOGD_RUNTIME_DIR: path.join(base, 'rt'), LOGD_IDLE_TIMEOUT_MS: '600000' };
  delete env.LOGD_SERVICE;
  const figures = new Map<string, number[]>();
  const put = (k: string, v: number) => (figures.get(k) ?? figures.set(k, []).get(k)!).push(v);
  try {
    execFileSync(process.execPath, [cli, 'runs'], { env, stdio: 'ignore' }); // starts the daemon the probes use
    // One run of each first, unmeasured: the file cache and the daemon are warm for every measured round alike.
    for (const c of clients) await run([self, '--probe', c, 'run'], env);
    for (let r = 0; r < rounds; r++) {
      const bare = await run(['-e', 'console.log(JSON.stringify({ totalCpu: (process.cpuUsage().user + process.cpuUsage().system) / 1000 }))'], env);
      put('bare node: process wall ms', bare.ms);
      put('bare node: process CPU ms', bare.out.totalCpu);
      for (const [i, c] of clients.entries()) {
        const tag = clients.length > 1 ? `client ${String.fromCharCode(65 + i)}: ` : '';
        const imp = await run([self, '--probe', c, 'import'], env);
        put(`${tag}import only: process wall ms, above bare node`, imp.ms - bare.ms);
        put(`${tag}import only: process CPU ms, above bare node`, imp.out.totalCpu - bare.out.totalCpu);
        put(`${tag}import: in-process wall ms`, imp.out.importMs);
        const full = await run([self, '--probe', c, 'run'], env);
        put(`${tag}first init, daemon running: wall ms`, full.out.initMs);
        put(`${tag}first init, daemon running: CPU ms`, full.out.initCpu);
        put(`${tag}finish of 100 rows: wall ms`, full.out.finishMs);
        put(`${tag}finish of 100 rows: CPU ms`, full.out.finishCpu);
        put(`${tag}whole process (import, init, 100 rows, finish, exit): wall ms`, full.ms);
      }
    }
  } finally {
    try {
      execFileSync(process.execPath, [cli, 'stop'], { env, stdio: 'ignore', timeout: 30_000 });
    } catch {
      /* already gone */
    }
    fs.rmSync(base, { recursive: true, force: true });
  }
  console.log(`# start-up (${new Date().toISOString()}, ${rounds} rounds, load average ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}, ${os.cpus().length} cores)`);
  clients.forEach((c, i) => clients.length > 1 && console.log(`client ${String.fromCharCode(65 + i)}: ${c}`));
  console.log('\n| figure | median | min |\n|---|---|---|');
  for (const [k, v] of figures) console.log(`| ${k} | ${median(v).toFixed(1)} | ${Math.min(...v).toFixed(1)} |`);
}

const i = process.argv.indexOf('--probe');
if (i >= 0) void probe(process.argv[i + 1], process.argv[i + 2]);
else void main();
