// Rank health's cost (issue 21): "daemon CPU for the health work stays ≤ 0.1 %
// of a core for 8 ranks". Two figures, printed, asserting nothing:
//
// 1. The work itself, in process: a HealthMonitor judging one group of 8
//    ranks (real StepProgress fed like the live run feeds it, real
//    /proc/<pid>/stat reads of 8 real processes), ticked 2 000 times: CPU per
//    tick, and so % of a core at the daemon's one tick per second. Plus the
//    cost of feeding a 200-row batch's steps to a rank's progress.
// 2. End to end: a real daemon with health on (LOGD_HEALTH_TICK_MS=1000) and
//    off (0), 8 real writer processes of one group logging 20 steps/s of 10
//    metrics with explicit steps for 20 s: the daemon's CPU seconds over the
//    window (utime + stime of its /proc/<pid>/stat), alternating on/off rounds.
//
//   node dist/bench/health.js [--rounds N]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { HealthMonitor, type HealthRun } from '../daemon/health/monitor.js';
import { StepProgress } from '../daemon/health/progress.js';
import { HEALTH_DEFAULTS } from '../src/health.js';
import { readPidStat, TICKS_PER_SECOND } from '../daemon/sampler/proc.js';

const self = fileURLToPath(import.meta.url);
const root = path.resolve(path.dirname(self), '..', '..');
const CLI = path.join(root, 'dist', 'daemon', 'cli.js');
const roundsArg = process.argv.indexOf('--rounds');
const rounds = roundsArg > 0 ? Number(process.argv[roundsArg + 1]) : 2;
const RANKS = 8;

if (process.argv[2] === '--role') {
  const logd = await import('../client/index.js');
  const run = await logd.init({ project: 'bench', group: 'health-bench', name: `rank${process.argv[3]}` });
  const row = { loss: 0.5, acc: 0.9, lr: 0.001, m3: 3, m4: 4, m5: 5, m6: 6, m7: 7, m8: 8, m9: 9 };
  const t0 = Date.now();
  for (let s = 0; Date.now() - t0 < Number(process.argv[4]); s++) {
    run.log(row, { step: s });
    await new Promise((r) => setTimeout(r, 50));
  }
  await run.finish();
  process.exit(0);
}

function median(a: number[]): number {
  const s = [...a].sort((x, y) => x - y);
  return s[s.length >> 1];
}

function inProcess(): { usPerTick: number; pctOfCore: number; nsPerBatch: number } {
  const sleepers: ChildProcess[] = Array.from({ length: RANKS }, () => spawn('sleep', ['600'], { stdio: 'ignore' }));
  try {
    const now = Date.now() / 1000;
    const runs: HealthRun[] = sleepers.map((c, i) => {
      const progress = new StepProgress();
      for (let s = 0; s < 100; s++) progress.observe(Float64Array.of(s), Float64Array.of(now - 10 + s * 0.05), 1, now);
      return {
        id: `run${i}`, project: 'bench', group: 'g', rank: i, host: os.hostname(), pid: c.pid!, startTicks: readPidStat(c.pid!)!.startTicks,
        alive: true, ended: null, progress, config: {}, setHealth: () => {},
      };
    });
    const m = new HealthMonitor({ runs: () => runs, finalOf: () => null, stacksDir: os.tmpdir() }, { tickMs: 1000, defaults: HEALTH_DEFAULTS, onStall: null, onStallTimeoutMs: 1000, log: () => {} });
    const ticks = 2000;
    for (let i = 0; i < 200; i++) m.tick(now + i * 0.001);
    const c0 = process.cpuUsage();
    for (let i = 0; i < ticks; i++) {
      // Each rank steps between ticks, as in a healthy job.
      for (const r of runs) r.progress.observe(Float64Array.of(100 + i), Float64Array.of(now + 1 + i * 0.05), 1, now + 1 + i * 0.05);
      m.tick(now + 1 + i * 0.05);
    }
    const c = process.cpuUsage(c0);
    const usPerTick = (c.user + c.system) / ticks;
    // Feeding progress: a 200-row batch, one step per row.
    const p = new StepProgress();
    const steps = new Float64Array(200);
    const times = new Float64Array(200);
    const n = 20_000;
    const t0 = process.hrtime.bigint();
    for (let b = 0; b < n; b++) {
      for (let r = 0; r < 200; r++) {
        steps[r] = b * 200 + r;
        times[r] = now + (b * 200 + r) * 0.001;
      }
      p.observe(steps, times, 200, now + 1e6);
    }
    const nsPerBatch = Number(process.hrtime.bigint() - t0) / n;
    return { usPerTick, pctOfCore: (usPerTick / 1e6) * 100, nsPerBatch };
  } finally {
    for (const c of sleepers) c.kill('SIGKILL');
  }
}

function cpuSeconds(pid: number): number {
  const st = readPidStat(pid);
  return st ? st.cpuTicks / TICKS_PER_SECOND : NaN;
}

async function endToEnd(tickMs: number, seconds: number): Promise<number> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'logd-bench-health-'));
  const env: NodeJS.ProcessEnv = { ...process.env, LOGD_DIR: path.join(dir, 'data'), LOGD_RUNTIME_DIR: path.join(dir, 'rt'), LOGD_HEALTH_TICK_MS: String(tickMs), LOGD_SAMPLE_INTERVAL_MS: '0', LOGD_IDLE_TIMEOUT_MS: '60000' };
  delete env.LOGD_SERVICE;
  const daemon = spawn(process.execPath, [CLI, 'serve'], { env, stdio: 'ignore' });
  try {
    const svc = path.join(dir, 'rt', 'service.json');
    for (let i = 0; i < 200 && !fs.existsSync(svc); i++) await new Promise((r) => setTimeout(r, 50));
    const ranks = Array.from({ length: RANKS }, (_, i) => spawn(process.execPath, [self, '--role', String(i), String((seconds + 6) * 1000)], { env, stdio: 'inherit' }));
    await new Promise((r) => setTimeout(r, 4000)); // every rank created its run and steps
    const c0 = cpuSeconds(daemon.pid!);
    await new Promise((r) => setTimeout(r, seconds * 1000));
    const used = cpuSeconds(daemon.pid!) - c0;
    await Promise.all(ranks.map((p) => new Promise((r) => p.once('exit', r))));
    return (used / seconds) * 100;
  } finally {
    daemon.kill('SIGTERM');
    await new Promise((r) => daemon.once('exit', r));
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const a = inProcess();
console.log(`health monitor, one group of ${RANKS} ranks: ${a.usPerTick.toFixed(1)} µs CPU per tick = ${a.pctOfCore.toFixed(4)} % of a core at 1 tick/s; feeding a 200-row batch's steps: ${(a.nsPerBatch / 1000).toFixed(2)} µs`);
const on: number[] = [];
const off: number[] = [];
for (let i = 0; i < rounds; i++) {
  on.push(await endToEnd(1000, 20));
  off.push(await endToEnd(0, 20));
  console.log(`round ${i + 1}: daemon CPU with health ${on[i].toFixed(2)} % of a core, without ${off[i].toFixed(2)} %`);
}
if (rounds > 0) console.log(`daemon CPU, ${RANKS} writers × 20 steps/s × 10 metrics (median of ${rounds}): health on ${median(on).toFixed(2)} %, off ${median(off).toFixed(2)} % of a core (difference ${(median(on) - median(off)).toFixed(2)} points; the in-process figure above is the health work alone)`);
