// Alerts (issue 35): how soon an event reaches a webhook, and what a receiver
// that never answers costs the trainers. Prints figures, asserts nothing.
//
//   node dist/bench/alerts.js [--rounds N]
//
// 1. Event to POST, against a local HTTP receiver: a crash (a TypeScript
//    trainer exits with code 3 without finish(): from its exit to the POST)
//    and a rule (a run logs a NaN loss: from that log() to the POST; the rule
//    looks every 2 s). N of each.
// 2. Ingest (bench/core.ts's ingest role: 4 writers x 200 k rows x 10 metrics)
//    with no alerts, against alerts on with a receiver that never answers and
//    30 alerts pending to it (retried all along), alternated round by round.
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { AddressInfo } from 'node:net';

const here = path.dirname(fileURLToPath(import.meta.url));
const CLI = path.join(here, '..', 'daemon', 'cli.js');
const CLIENT = path.join(here, '..', 'client', 'index.js');
const CORE = path.join(here, 'core.js');
const rounds = process.argv.includes('--rounds') ? Number(process.argv[process.argv.indexOf('--rounds') + 1]) : 5;
const base = fs.mkdtempSync(path.join(os.tmpdir(), 'logd-bench-alerts-'));
const median = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];

async function receiver(hang: boolean): Promise<{ url: string; posts: Array<{ at: number; body: any }>; close: () => void }> {
  const posts: Array<{ at: number; body: any }> = [];
  const server = http.createServer((req, res) => {
    let d = '';
    req.on('data', (c) => (d += c));
    req.on('end', () => {
      posts.push({ at: Date.now(), body: JSON.parse(d) });
      if (!hang) res.end('ok');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, posts, close: () => (server.closeAllConnections(), server.close()) };
}

function daemon(name: string, env: NodeJS.ProcessEnv): { env: NodeJS.ProcessEnv; proc: ChildProcess } {
  const dir = path.join(base, name);
  const e: NodeJS.ProcessEnv = { ...process.env, LOGD_DIR: path.join(dir, 'data'), LOGD_RUNTIME_DIR: path.join(dir, 'rt'), LOGD_IDLE_TIMEOUT_MS: '600000', ...env };
  for (const k of ['LOGD_SERVICE', 'LOGD_ALERT_WEBHOOK', 'LOGD_ALERTS']) if (!(k in env)) delete e[k];
  const proc = spawn(process.execPath, [CLI, 'serve'], { env: e, stdio: 'ignore' });
  return { env: e, proc };
}

async function ready(env: NodeJS.ProcessEnv): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (fs.existsSync(path.join(env.LOGD_RUNTIME_DIR!, 'service.json'))) return;
    await new Promise((r) => setTimeout(r, 50));
  }
}

function runScript(env: NodeJS.ProcessEnv, body: string): Promise<{ out: string; exitAt: number }> {
  const file = path.join(base, `s${Math.random().toString(36).slice(2)}.mjs`);
  fs.writeFileSync(file, `import * as logd from ${JSON.stringify(CLIENT)};\n${body}\n`);
  const p = spawn(process.execPath, [file], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  p.stdout!.on('data', (b) => (out += b));
  return new Promise((r) => p.once('exit', () => r({ out, exitAt: Date.now() })));
}

// 1. Event to POST.
const rx = await receiver(false);
const d1 = daemon('latency', { LOGD_ALERT_WEBHOOK: rx.url });
await ready(d1.env);
const crash: number[] = [], rule: number[] = [];
for (let i = 0; i < rounds; i++) {
  const n = rx.posts.length;
  const { exitAt } = await runScript(d1.env, `const run = await logd.init({ project: 'bench', name: 'crash${i}' }); run.log({ x: 1 }); await run.flush(); process.exit(3);`);
  while (rx.posts.length === n) await new Promise((r) => setTimeout(r, 5));
  crash.push(rx.posts[n].at - exitAt);
  const m = rx.posts.length;
  const { out } = await runScript(d1.env, `const run = await logd.init({ project: 'bench', name: 'nan${i}' }); run.log({ loss: 1 }); await run.flush();
    console.log(Date.now()); run.log({ loss: NaN }); await run.flush(); await new Promise((r) => setTimeout(r, 4000)); await run.finish();`);
  const loggedAt = Number(out.trim().split('\n')[0]);
  const hit = rx.posts.slice(m).find((p) => p.body.kind === 'metric');
  if (hit) rule.push(hit.at - loggedAt);
}
console.log(`bench/alerts: ${rounds} rounds, ${os.cpus().length} cores, load ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}`);
console.log(`event to POST: a crash median ${median(crash)} ms, worst ${Math.max(...crash)} ms; a rule (loss non-finite, looked at every 2 s) median ${median(rule)} ms, worst ${Math.max(...rule)} ms`);
d1.proc.kill('SIGTERM');
rx.close();

// 2. Ingest with a hung receiver and pending alerts, against no alerts.
const hung = await receiver(true);
const rate: Record<string, number[]> = { off: [], hung: [] };
async function ingest(name: string, env: Record<string, string>): Promise<number> {
  const d = daemon(name, env);
  await ready(d.env);
  if (env.LOGD_ALERT_WEBHOOK) {
    // 30 alerts pending to the receiver that never answers, retried while the writers ingest.
    await runScript(d.env, `const runs = await Promise.all(Array.from({ length: 30 }, (_, i) => logd.init({ project: 'bench', name: 'p' + i }))); for (const r of runs) r.log({ x: 1 }); await Promise.all(runs.map((r) => r.flush())); process.exit(3);`);
    await new Promise((r) => setTimeout(r, 1000));
  }
  const go = path.join(base, `${name}.go`);
  const ends: Array<Promise<{ start: number; end: number }>> = [];
  const procs: ChildProcess[] = [];
  for (let w = 0; w < 4; w++) {
    const p = spawn(process.execPath, [CORE, '--role', 'ingest', '200000'], { env: { ...d.env, RANK: String(w), WORLD_SIZE: '4', BENCH_GO: go }, stdio: ['ignore', 'pipe', 'inherit'] });
    procs.push(p);
    let buf = '';
    ends.push(new Promise((resolve) => p.stdout!.on('data', (b) => {
      buf += b;
      const line = buf.split('\n').find((l) => l.startsWith('{'));
      if (line) resolve(JSON.parse(line));
    })));
  }
  await new Promise((r) => setTimeout(r, 3000));
  fs.writeFileSync(go, '');
  const got = await Promise.all(ends);
  const secs = (Math.max(...got.map((g) => g.end)) - Math.min(...got.map((g) => g.start))) / 1000;
  d.proc.kill('SIGTERM');
  await new Promise((r) => d.proc.once('exit', r));
  return (4 * 200_000 * 10) / secs / 1e6;
}
for (let r = 0; r < rounds; r++) {
  rate.off.push(await ingest(`off${r}`, {}));
  rate.hung.push(await ingest(`hung${r}`, { LOGD_ALERT_WEBHOOK: hung.url }));
  console.log(`  round ${r + 1}: no alerts ${rate.off[r].toFixed(2)}, a hung receiver with 30 alerts pending ${rate.hung[r].toFixed(2)} M points/s`);
}
console.log(`durable ingest, 4 writers x 200 k rows x 10 metrics: no alerts ${median(rate.off).toFixed(2)}, hung receiver ${median(rate.hung).toFixed(2)} M points/s (${((median(rate.hung) / median(rate.off) - 1) * 100).toFixed(1)} %)`);
hung.close();
fs.rmSync(base, { recursive: true, force: true });
process.exit(0);
