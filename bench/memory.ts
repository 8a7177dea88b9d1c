// Daemon memory under a flood and after it: prints figures, asserts nothing.
//
//   node dist/bench/memory.js [--quick] [--streams 500] [--batches 400] [--rows 20] [--procs 10] [--after-s 60]
//
// Starts a daemon on a fresh data dir, then --procs flooding client processes
// (bench/flood.ts) that together open --streams write streams and write
// --batches batches of --rows rows x 10 metrics into each without waiting for
// acknowledgements. Samples the daemon's RSS every 100 ms: before, the peak
// under load, and for --after-s seconds after the last client has gone.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const cli = path.join(here, '..', 'daemon', 'cli.js');
const flood = path.join(here, 'flood.js');

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
}

export function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

async function main(): Promise<void> {
  const quick = process.argv.includes('--quick'); // make bench's short run: a fifth of the streams, 10 s after
  const streams = arg('streams', quick ? 100 : 500), batches = arg('batches', 400), rows = arg('rows', 20), procs = arg('procs', quick ? 4 : 10), afterS = arg('after-s', quick ? 10 : 60);
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'ldmem-'));
  const env: NodeJS.ProcessEnv = { ...process.env, LOGD_DIR: path.join(base, 'data'), LOGD_RUNTIME_DIR: path.join(base, 'rt'), LOGD_SAMPLE_INTERVAL_MS: '0' };
  delete env.LOGD_SERVICE;
  const daemonLog = path.join(os.tmpdir(), `ldmem-daemon-${process.pid}.log`);
  const logFd = fs.openSync(daemonLog, 'w');
  const daemon = spawn(process.execPath, [cli, 'serve'], { env, stdio: ['ignore', 'ignore', logFd] });
  fs.closeSync(logFd);
  const svcFile = path.join(base, 'rt', 'service.json');
  const t0 = Date.now();
  while (!fs.existsSync(svcFile)) {
    if (Date.now() - t0 > 30_000) throw new Error('the daemon did not start within 30 s');
    await new Promise((r) => setTimeout(r, 20));
  }
  const svc = JSON.parse(fs.readFileSync(svcFile, 'utf8'));
  const pid = daemon.pid!;
  try {
    await new Promise((r) => setTimeout(r, 1000));
    const before = rssMb(pid);
    let peak = before;
    const sampler = setInterval(() => (peak = Math.max(peak, rssMb(pid))), 100);
    const per = Math.ceil(streams / procs);
    const started = Date.now();
    const clients = Array.from({ length: procs }, (_, i) => new Promise<void>((resolve, reject) => {
      const n = Math.min(per, streams - i * per);
      const p = spawn(process.execPath, [flood, String(n), String(batches), String(rows)], { env: { ...env, LOGD_SERVICE: `${svc.socket}#${svc.token}` }, stdio: ['ignore', 'ignore', 'inherit'] });
      p.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`flood client ${i} exited with ${code}`))));
    }));
    await Promise.all(clients);
    const loadS = (Date.now() - started) / 1000;
    const atEnd = rssMb(pid);
    const after: Array<[number, number]> = [];
    for (const s of [5, 10, 20, 30, 45, 60].filter((x) => x <= afterS)) {
      while (Date.now() - started - loadS * 1000 < s * 1000) await new Promise((r) => setTimeout(r, 100));
      after.push([s, rssMb(pid)]);
    }
    clearInterval(sampler);
    const mb = (x: number) => `${x.toFixed(0)} MB`;
    console.log(`bench: load: ${streams} streams x ${batches} batches x ${rows} rows x 10 metrics from ${procs} processes, ${loadS.toFixed(1)} s`);
    console.log(`bench: daemon RSS before: ${mb(before)}`);
    console.log(`bench: daemon RSS peak under load: ${mb(peak)} (target <= 250 MB)`);
    console.log(`bench: daemon RSS when the last client had gone: ${mb(atEnd)}`);
    for (const [s, v] of after) console.log(`bench: daemon RSS ${s} s after: ${mb(v)}${s === 60 ? ' (target < 150 MB)' : ''}`);
  } finally {
    daemon.kill('SIGTERM');
    await new Promise((r) => daemon.once('exit', r));
    fs.rmSync(base, { recursive: true, force: true });
    console.log(`bench: the daemon's log: ${daemonLog}`);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main();
