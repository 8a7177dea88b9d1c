// The crash journal's cost (issue 22), with and without it in one run:
// alternates LOGD_JOURNAL_MB=0 (no journal) and the default (64) round by
// round, and prints medians. Asserts nothing.
//
//   node dist/bench/journal.js [--rounds N] [--only ingest|footprint] [--writers N]
//
// - client CPU per log() of 10 metrics (bench/core.ts's log-cost role: 300 k rows);
// - durable ingest from 8 writer processes × 200 k rows (core.ts's ingest role;
//   `--writers N` for another count), with the writers' and the daemon's CPU;
// - the journal's footprint per writer at steady state: a writer logging
//   about 20 k rows/s for 10 s; the journal file's allocated bytes (reserved
//   up front), its pages in the writer's memory (the mapping's Rss in
//   /proc/self/smaps) and the writer's RSS, sampled every second.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const self = fileURLToPath(import.meta.url);
const here = path.dirname(self);
const core = path.join(here, 'core.js');
const cli = path.join(here, '..', 'daemon', 'cli.js');
const roundsArg = process.argv.indexOf('--rounds');
const rounds = roundsArg > 0 ? Number(process.argv[roundsArg + 1]) : 3;
/** `--only ingest` / `--only footprint`: that figure alone. */
const only = process.argv.includes('--only') ? process.argv[process.argv.indexOf('--only') + 1] : null;
const onlyIngest = only === 'ingest';
/** `--writers N`: the ingest figure's writer processes (8 unless given). */
const writersArg = process.argv.indexOf('--writers');
const writers = writersArg > 0 ? Number(process.argv[writersArg + 1]) : 8;
if (!Number.isInteger(writers) || writers < 1 || writers > 64) throw new Error(`--writers takes a count from 1 to 64, not ${process.argv[writersArg + 1]}`);

if (process.argv[2] === '--role' && process.argv[3] === 'log-cost-yield') {
  // log() cost as a training loop pays it: the event loop turns every 200 rows (acks come in, the journal's pages are reused)
  const logd = await import('../client/index.js');
  const run = await logd.init({ project: 'bench', name: 'log-cost-yield' });
  const rows = Array.from({ length: 1000 }, () => ({ loss: Math.random(), acc: Math.random(), lr: 0.001, m3: 3, m4: 4, m5: 5, m6: 6, m7: 7, m8: 8, m9: 9 }));
  const n = 300_000;
  for (let i = 0; i < 20_000; i++) run.log(rows[i % 1000]);
  await run.flush(60_000);
  let cpu = 0;
  for (let i = 0; i < n; i += 200) {
    const c0 = process.cpuUsage();
    for (let k = 0; k < 200; k++) run.log(rows[(i + k) % 1000]);
    const c = process.cpuUsage(c0);
    cpu += c.user + c.system;
    await new Promise((r) => setImmediate(r));
  }
  await run.finish();
  console.log(JSON.stringify({ cpuUsPerLog: cpu / n }));
  process.exit(0);
}

if (process.argv[2] === '--role' && process.argv[3] === 'log-cost-warm') {
  // log() cost once the journal's pages are warm, as in a trainer that has logged a while: the first pass through
  // a fresh journal faults its pages in (the kernel zero-fills each from the file: a one-off cost per writer,
  // printed apart). CPU inside log() only, the whole process's and the calling (main) thread's.
  const logd = await import('../client/index.js');
  const mainNs = () => Number(fs.readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]);
  const run = await logd.init({ project: 'bench', name: 'log-cost-warm' });
  const rows = Array.from({ length: 1000 }, () => ({ loss: Math.random(), acc: Math.random(), lr: 0.001, m3: 3, m4: 4, m5: 5, m6: 6, m7: 7, m8: 8, m9: 9 }));
  const n = 300_000;
  const pass = () => {
    const c0 = process.cpuUsage();
    const m0 = mainNs();
    for (let i = 0; i < n; i++) run.log(rows[i % 1000]);
    const c = process.cpuUsage(c0);
    return { cpu: (c.user + c.system) / n, main: (mainNs() - m0) / 1000 / n };
  };
  const cold = pass();
  await run.flush(60_000);
  pass();
  await run.flush(60_000);
  const warm = pass();
  await run.finish();
  console.log(JSON.stringify({ cpuUsPerLog: warm.cpu, mainUsPerLog: warm.main, coldCpuUsPerLog: cold.cpu, coldMainUsPerLog: cold.main }));
  process.exit(0);
}

if (process.argv[2] === '--role') {
  // steady-state writer for the footprint figure
  const logd = await import('../client/index.js');
  const run = await logd.init({ project: 'bench', name: 'journal-footprint' });
  const spool = path.join(process.env.LOGD_DIR!, 'spool');
  const samples: Array<{ blocksMb: number; rssMb: number; journalRssMb: number }> = [];
  // The journal's pages in this process's memory: the Rss of its mapping (/proc/self/smaps).
  const journalRss = (): number => {
    const lines = fs.readFileSync('/proc/self/smaps', 'utf8').split('\n');
    for (let l = 0; l < lines.length; l++) {
      if (!lines[l].endsWith('.journal')) continue;
      for (let k = l + 1; k < lines.length && !/^[0-9a-f]+-/.test(lines[k]); k++) {
        const m = /^Rss:\s+(\d+) kB/.exec(lines[k]);
        if (m) return Number(m[1]) * 1024;
      }
    }
    return 0;
  };
  const row = { loss: 0.5, acc: 0.9, lr: 0.001, m3: 3, m4: 4, m5: 5, m6: 6, m7: 7, m8: 8, m9: 9 };
  const t0 = Date.now();
  let i = 0;
  let nextSample = t0 + 1000;
  while (Date.now() - t0 < 10_000) {
    for (let k = 0; k < 200; k++) run.log(row, { step: i++ });
    await new Promise((r) => setTimeout(r, 10)); // about 20 k rows/s: 2-3 MB of journal a second
    if (Date.now() >= nextSample) {
      nextSample += 1000;
      const f = fs.readdirSync(spool).find((n) => n.endsWith('.journal'));
      const blocks = f ? fs.statSync(path.join(spool, f)).blocks * 512 : 0;
      const rss = Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync('/proc/self/status', 'utf8'))![1]) * 1024;
      samples.push({ blocksMb: blocks / 1048576, rssMb: rss / 1048576, journalRssMb: journalRss() / 1048576 });
    }
  }
  await run.finish();
  console.log(JSON.stringify({ rows: i, samples }));
  process.exit(0);
}

function env(base: string, journalMb: number): NodeJS.ProcessEnv {
  const e: NodeJS.ProcessEnv = { ...process.env, LOGD_DIR: path.join(base, 'data'), LOGD_RUNTIME_DIR: path.join(base, 'rt'), LOGD_IDLE_TIMEOUT_MS: '60000', LOGD_JOURNAL_MB: String(journalMb) };
  delete e.LOGD_SERVICE;
  return e;
}

function run(file: string, args: string[], e: NodeJS.ProcessEnv, onLine?: (l: string) => void): Promise<any> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [file, ...args], { env: e, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    p.stdout.on('data', (d) => {
      out += d;
      if (onLine) for (const l of String(d).split('\n')) if (l) onLine(l.trim());
    });
    // 'close', not 'exit': a child's last line may still be in the pipe when 'exit' fires
    p.on('close', (code) => (code === 0 ? resolve(JSON.parse(out.trim().split('\n').pop()!)) : reject(new Error(`${path.basename(file)} ${args.join(' ')} exited with ${code}`))));
  });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/**
 * One round of the 8-writer ingest on a daemon of its own, stopped (and waited for) afterwards: a daemon keeps
 * working for a while after its runs finish (their checkpoints, memory given back), and a round that shared it
 * would pay for the one before.
 */
async function ingest(base: string, journalMb: number, per: number): Promise<number> {
  const dir = fs.mkdtempSync(path.join(base, `ingest-${journalMb}-`));
  const e = env(dir, journalMb);
  const go = path.join(dir, 'go');
  let ready = 0;
  const ends = Array.from({ length: writers }, (_, r) => run(core, ['--role', 'ingest', String(per)], { ...e, RANK: String(r), WORLD_SIZE: String(writers), BENCH_GO: go }, (l) => {
    if (l === 'ready') ready++;
  }));
  const t = Date.now();
  while (ready < writers && Date.now() - t < 60_000) await new Promise((r) => setTimeout(r, 10));
  const daemon = daemonPid(e);
  const d0 = cpuSeconds(daemon);
  const s0 = cpuSeconds(daemon, 'system');
  fs.writeFileSync(go, '');
  const spans = await Promise.all(ends);
  daemonCpu[journalMb ? 'on' : 'off'].push(cpuSeconds(daemon) - d0);
  daemonSys[journalMb ? 'on' : 'off'].push(cpuSeconds(daemon, 'system') - s0);
  const secs = (Math.max(...spans.map((s) => s.end)) - Math.min(...spans.map((s) => s.start))) / 1000;
  writerCpu[journalMb ? 'on' : 'off'].push(spans.reduce((a, s) => a + s.cpuS, 0));
  await stopDaemon(e);
  return (writers * per * 10) / secs / 1e6;
}

/** The pid of the daemon serving `e`'s runtime dir (0 when none). */
function daemonPid(e: NodeJS.ProcessEnv): number {
  try {
    return JSON.parse(fs.readFileSync(path.join(e.LOGD_RUNTIME_DIR!, 'service.json'), 'utf8')).pid;
  } catch {
    return 0;
  }
}

/** A process's CPU seconds so far, all its threads (those that exited included), from /proc; 0 when unknown. */
function cpuSeconds(pid: number, which: 'all' | 'system' = 'all'): number {
  try {
    const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    // utime + stime, in clock ticks (100 a second)
    return ((which === 'all' ? Number(f[11]) : 0) + Number(f[12])) / 100;
  } catch {
    return 0;
  }
}

/** Stops the daemon of `e`'s data dir and waits (up to 60 s) until its process is gone. */
async function stopDaemon(e: NodeJS.ProcessEnv): Promise<void> {
  const pid = daemonPid(e);
  if (!pid) return; // none running
  await new Promise((r) => spawn(process.execPath, [cli, 'stop'], { env: e, stdio: 'ignore' }).on('exit', r));
  const t = Date.now();
  for (;;) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    if (Date.now() - t > 60_000) throw new Error(`the daemon (pid ${pid}) did not stop within 60 s`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const base = fs.mkdtempSync(path.join(os.tmpdir(), 'ldjournal-'));
const cost: Record<string, number[]> = { off: [], on: [] };
const costYield: Record<string, number[]> = { off: [], on: [] };
const rate: Record<string, number[]> = { off: [], on: [] };
/** The writers' CPU seconds together, per ingest round, and the daemon's (all its threads). */
const writerCpu: Record<string, number[]> = { off: [], on: [] };
const daemonCpu: Record<string, number[]> = { off: [], on: [] };
const daemonSys: Record<string, number[]> = { off: [], on: [] };
const warm: Record<string, Array<{ cpuUsPerLog: number; mainUsPerLog: number; coldCpuUsPerLog: number; coldMainUsPerLog: number }>> = { off: [], on: [] };
console.log(`bench/journal: ${rounds} rounds, journal off (LOGD_JOURNAL_MB=0) and on (64) alternated; load average ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}`);
for (let r = 0; r < (only === 'footprint' ? 0 : rounds); r++) {
  for (const [name, mb] of (r % 2 ? [['on', 64], ['off', 0]] : [['off', 0], ['on', 64]]) as Array<[string, number]>) {
    if (onlyIngest) {
      rate[name].push(await ingest(base, mb, 200_000));
      console.log(`  round ${r + 1}, journal ${name}: ingest ${rate[name][rate[name].length - 1].toFixed(2)} M points/s, writers' CPU ${writerCpu[name][writerCpu[name].length - 1].toFixed(2)} s, daemon's CPU ${daemonCpu[name][daemonCpu[name].length - 1].toFixed(2)} s (${daemonSys[name][daemonSys[name].length - 1].toFixed(2)} s of it in the kernel)`);
      continue;
    }
    const lc = await run(core, ['--role', 'log-cost', '300000'], env(base, mb));
    cost[name].push(lc.cpuUsPerLog);
    costYield[name].push((await run(self, ['--role', 'log-cost-yield'], env(base, mb))).cpuUsPerLog);
    const w = await run(self, ['--role', 'log-cost-warm'], env(base, mb));
    warm[name].push(w);
    rate[name].push(await ingest(base, mb, 200_000));
    console.log(`  round ${r + 1}, journal ${name}: log() ${lc.cpuUsPerLog.toFixed(3)} µs CPU in a loop that never yields, ${costYield[name][costYield[name].length - 1].toFixed(3)} µs yielding every 200 rows; warm, inside log(): process ${w.cpuUsPerLog.toFixed(3)} µs, calling thread ${w.mainUsPerLog.toFixed(3)} µs (first pass ${w.coldCpuUsPerLog.toFixed(3)}, ${w.coldMainUsPerLog.toFixed(3)}); ingest ${rate[name][rate[name].length - 1].toFixed(2)} M points/s`);
  }
}
if (onlyIngest) {
  console.log(`durable ingest, ${writers} writer(s) x 200 k rows x 10 metrics: journal off ${median(rate.off).toFixed(2)}, on ${median(rate.on).toFixed(2)} M points/s (${((median(rate.on) / median(rate.off) - 1) * 100).toFixed(1)} %); load average ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}`);
  fs.rmSync(base, { recursive: true, force: true });
  process.exit(0);
}
const fp = await run(self, ['--role', 'footprint'], env(base, 64));
const steady = fp.samples.slice(2);
if (only !== 'footprint') {
  console.log(`client CPU per log() of 10 metrics, 300 k rows in a loop that never yields: journal off ${median(cost.off).toFixed(3)} µs, on ${median(cost.on).toFixed(3)} µs (medians of ${rounds})`);
  console.log(`client CPU per log() of 10 metrics, yielding every 200 rows (the calling thread's CPU inside log() only): journal off ${median(costYield.off).toFixed(3)} µs, on ${median(costYield.on).toFixed(3)} µs`);
  const wm = (name: string, k: 'cpuUsPerLog' | 'mainUsPerLog' | 'coldCpuUsPerLog' | 'coldMainUsPerLog') => median(warm[name].map((x) => x[k])).toFixed(3);
  console.log(`log() of 10 metrics, warm (a third pass of 300 k rows that never yield, CPU inside log() only): process journal off ${wm('off', 'cpuUsPerLog')}, on ${wm('on', 'cpuUsPerLog')} µs; calling thread off ${wm('off', 'mainUsPerLog')}, on ${wm('on', 'mainUsPerLog')} µs`);
  console.log(`  the first pass through a fresh journal: process off ${wm('off', 'coldCpuUsPerLog')}, on ${wm('on', 'coldCpuUsPerLog')} µs; calling thread off ${wm('off', 'coldMainUsPerLog')}, on ${wm('on', 'coldMainUsPerLog')} µs`);
  console.log(`durable ingest, ${writers} writer(s) x 200 k rows x 10 metrics: journal off ${median(rate.off).toFixed(2)}, on ${median(rate.on).toFixed(2)} M points/s (${((median(rate.on) / median(rate.off) - 1) * 100).toFixed(1)} %)`);
}
console.log(`journal footprint at about 20 k rows/s (${fp.rows} rows in 10 s): disk ${Math.max(...steady.map((s: any) => s.blocksMb)).toFixed(2)} MiB (reserved up front); its pages in memory ${Math.max(...steady.map((s: any) => s.journalRssMb)).toFixed(2)} MiB at most; writer RSS ${median(steady.map((s: any) => s.rssMb)).toFixed(1)} MiB`);
fs.rmSync(base, { recursive: true, force: true });
