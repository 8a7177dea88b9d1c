// Rank health's figures on real DDP jobs (issue 21): torchrun, Debian's torch
// (gloo, CPU), 4 ranks of test/python/fixtures/health_train.py, each rank its
// own run of one group, into a fresh daemon per job. Prints, asserts nothing:
//
// - stall detection delay: rank 2 sleeps inside step 30; the delay from the
//   ranks' last step to the `job stalled` event (the daemon's clock), median
//   and worst of --stalls N (default 5), and whether rank 2 was named;
// - straggler detection delay: rank 3 adds 30 % compute from step 50; from the
//   row time of step 50 to the `straggler` event, median and worst;
// - false events in --healthy N healthy 300-step jobs (target 0).
//
//   node dist/bench/health-ddp.js [--stalls N] [--stragglers N] [--healthy N]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import net from 'node:net';
import { spawn, execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const CLI = path.join(root, 'dist', 'daemon', 'cli.js');
const PYTHON = process.env.LOGD_TEST_PYTHON || path.join(root, '.venv-python', 'bin', 'python');
const FIXTURE = path.join(root, 'test', 'python', 'fixtures', 'health_train.py');
const arg = (name: string, d: number) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : d;
};

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

interface Event { at: number; kind: string; ranks: Array<number | null>; cause?: { ranks: Array<number | null> } }
interface Group { ranks: Array<{ rank: number; runId: string; stepAt: number }>; events: Event[] }

async function job(mode: string, extra: Record<string, string> = {}): Promise<{ group: Group; dir: string; env: NodeJS.ProcessEnv }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'logd-bench-ddp-'));
  const env: NodeJS.ProcessEnv = {
    ...process.env, LOGD_DIR: path.join(dir, 'data'), LOGD_RUNTIME_DIR: path.join(dir, 'rt'), LOGD_IDLE_TIMEOUT_MS: '120000',
    LOGD_BIN: path.join(dir, 'logd'), OMP_NUM_THREADS: '1', PYTHONUNBUFFERED: '1', ...extra,
  };
  delete env.LOGD_SERVICE;
  fs.writeFileSync(env.LOGD_BIN!, `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(CLI)} "$@"\n`, { mode: 0o755 });
  const out = path.join(dir, 'out');
  fs.mkdirSync(out);
  const p = spawn(PYTHON, ['-m', 'torch.distributed.run', '--nproc_per_node', '4', '--master_port', String(await freePort()), '--monitor_interval', '1',
    '--redirects', '1', '--tee', '1', '--log_dir', path.join(dir, 'tl'), FIXTURE, mode, out, 'g'], { env, stdio: 'ignore' });
  const code = await new Promise<number | null>((r) => p.once('exit', r));
  if (code !== 0) throw new Error(`torchrun ${mode} exited ${code} (logs in ${dir})`);
  const group = (JSON.parse(execFileSync(process.execPath, [CLI, 'health', 'g', '--json'], { env, encoding: 'utf8' })) as Group[])[0];
  return { group, dir, env };
}

function done(j: { dir: string; env: NodeJS.ProcessEnv }): void {
  try {
    execFileSync(process.execPath, [CLI, 'stop'], { env: j.env, stdio: 'ignore' });
  } catch {
    /* stopped */
  }
  fs.rmSync(j.dir, { recursive: true, force: true });
}

const stat = (a: number[]) => {
  const s = [...a].sort((x, y) => x - y);
  return a.length ? `median ${s[s.length >> 1].toFixed(1)} s, worst ${s[s.length - 1].toFixed(1)} s` : 'none measured';
};

const stallDelays: number[] = [];
let named = 0;
const stalls = arg('--stalls', 5);
for (let i = 0; i < stalls; i++) {
  const j = await job('stall', { HEALTH_STALL_S: '15' });
  const e = j.group.events.find((x) => x.kind === 'job stalled');
  // The ranks' last step before the stall: step 29, the newest progress of each rank before the event.
  if (e) {
    // Stall detection delay: from the last row before the stall (exported step 29) to the event.
    const rows = execFileSync(process.execPath, [CLI, 'export', j.group.ranks[0].runId, '--format', 'jsonl'], { env: j.env, encoding: 'utf8' })
      .trim().split('\n').map((l) => JSON.parse(l) as { _step: number; _time: number });
    const before = rows.filter((r) => r._step <= 29).reduce((m, r) => Math.max(m, r._time), 0);
    stallDelays.push(e.at - before);
    if (e.cause?.ranks.length === 1 && e.cause.ranks[0] === 2) named++;
  }
  console.log(`stall ${i + 1}: ${e ? `job stalled after ${(stallDelays[stallDelays.length - 1]).toFixed(1)} s, cause rank ${e.cause?.ranks.join(',') ?? '?'}` : 'NOT DETECTED'}`);
  done(j);
}

const stragglerDelays: number[] = [];
const stragglers = arg('--stragglers', 3);
for (let i = 0; i < stragglers; i++) {
  const j = await job('straggler');
  const e = j.group.events.find((x) => x.kind === 'straggler');
  const r3 = j.group.ranks.find((r) => r.rank === 3)!;
  const rows = execFileSync(process.execPath, [CLI, 'export', r3.runId, '--format', 'jsonl'], { env: j.env, encoding: 'utf8' })
    .trim().split('\n').map((l) => JSON.parse(l) as { _step: number; _time: number });
  const at50 = rows.find((r) => r._step === 50)?._time ?? NaN;
  if (e) stragglerDelays.push(e.at - at50);
  console.log(`straggler ${i + 1}: ${e ? `rank ${e.ranks.join(',')} after ${(e.at - at50).toFixed(1)} s` : 'NOT DETECTED'}; other events: ${j.group.events.filter((x) => x !== e).map((x) => x.kind).join(', ') || 'none'}`);
  done(j);
}

let falseEvents = 0;
const healthy = arg('--healthy', 10);
for (let i = 0; i < healthy; i++) {
  const j = await job('healthy');
  falseEvents += j.group.events.length;
  console.log(`healthy ${i + 1}: ${j.group.events.length} event(s)${j.group.events.length ? `: ${j.group.events.map((x) => `${x.kind} ${x.ranks.join(',')}`).join('; ')}` : ''}`);
  done(j);
}

console.log(`stall detection (${stalls} jobs): ${stat(stallDelays)}; rank 2 named ${named}/${stalls}`);
console.log(`straggler detection (${stragglers} jobs): ${stat(stragglerDelays)}`);
console.log(`false events in ${healthy} healthy 300-step jobs: ${falseEvents}`);
