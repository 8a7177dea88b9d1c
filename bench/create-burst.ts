// Issue 32: 500 concurrent init() in one process, against one daemon. Each
// round runs the burst in a fresh process and prints the p50 and p99 of
// init()'s wall time; `--client A,B` alternates two client builds (the bundle
// of two checkouts, say) round by round against the same daemon, so their
// figures are measured in one run.
//
//   node dist/bench/create-burst.js [--n 500] [--rounds 5] [--client /a/dist/client/logd.js,/b/dist/client/logd.js]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const cli = path.join(root, 'dist', 'daemon', 'cli.js');
const arg = (name: string, dflt: string) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : dflt);
const n = Number(arg('--n', '500'));
const rounds = Number(arg('--rounds', '5'));
const clients = arg('--client', path.join(root, 'dist', 'client', 'logd.js')).split(',');

const BURST = `
const logd = await import(process.argv[1]);
const n = Number(process.argv[2]);
const got = await Promise.all(Array.from({ length: n }, async (_, i) => {
  const t0 = performance.now();
  const run = await logd.init({ project: 'burst', name: 'r' + i });
  return { ms: performance.now() - t0, run };
}));
await Promise.all(got.map((g) => g.run.finish()));
const ms = got.map((g) => g.ms).sort((a, b) => a - b);
console.log(JSON.stringify({ p50: ms[Math.floor(n * 0.5)], p99: ms[Math.min(n - 1, Math.floor(n * 0.99))] }));
`;

function burst(client: string, env: NodeJS.ProcessEnv): Promise<{ p50: number; p99: number }> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ['--input-type=module', '-e', BURST, client, String(n)], { env, stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString()));
    p.on('close', (code) => (code === 0 ? resolve(JSON.parse(out.trim().split('\n').pop()!)) : reject(new Error(`burst exited ${code}`))));
  });
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'logd-burst-'));
const env: NodeJS.ProcessEnv = { ...process.env, LOGD_DIR: path.join(dir, 'data'), LOGD_RUNTIME_DIR: path.join(dir, 'rt'), LOGD_IDLE_TIMEOUT_MS: '600000', LOGD_SAMPLE_INTERVAL_MS: '0' };
delete env.LOGD_SERVICE;
const daemon = spawn(process.execPath, [cli, 'serve'], { env, stdio: 'ignore', detached: true });
try {
  for (let i = 0; i < 100 && !fs.existsSync(path.join(dir, 'rt', 'service.json')); i++) await new Promise((r) => setTimeout(r, 100));
  const res = clients.map(() => ({ p50: [] as number[], p99: [] as number[] }));
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 ? [...clients.keys()].reverse() : [...clients.keys()];
    for (const c of order) {
      const got = await burst(clients[c], env);
      res[c].p50.push(got.p50);
      res[c].p99.push(got.p99);
      console.log(`round ${r + 1} client ${'AB'[c] ?? c}: p50 ${got.p50.toFixed(0)} ms, p99 ${got.p99.toFixed(0)} ms`);
    }
  }
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  console.log(`\n| ${n} concurrent init() in one process (median of ${rounds}) | p50 ms | p99 ms |\n|---|---|---|`);
  clients.forEach((c, i) => console.log(`| client ${'AB'[i] ?? i} (${c}) | ${med(res[i].p50).toFixed(0)} | ${med(res[i].p99).toFixed(0)} |`));
} finally {
  try {
    execFileSync(process.execPath, [cli, 'stop'], { env, stdio: 'ignore' });
  } catch {
    daemon.kill('SIGKILL');
  }
  fs.rmSync(dir, { recursive: true, force: true });
}
