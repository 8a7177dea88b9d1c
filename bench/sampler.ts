// Benchmark: the sampler's own CPU cost, in % of one core, with 8 GPUs (the
// fixture-driven fake nvidia-smi) at a 1 s interval; and the same node sampled
// the wandb way, by 8 samplers (one per rank). Prints figures, times nothing in CI.
//
//   npx tsc -p tsconfig.json && node dist/bench/sampler.js [--seconds 20 | --quick] [--real]
//
// --real: use the nvidia-smi found on PATH (a GPU node) instead of the fake.
//
// Cost = this process's CPU (process.cpuUsage) + the live nvidia-smi loop
// children's CPU (/proc/<pid>/stat utime+stime) + reaped one-shot children
// (compute-apps polls; /proc/self/stat cutime+cstime).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runOnce } from '../daemon/sampler/nvidia-smi.js';
import { TICKS_PER_SECOND, readText } from '../daemon/sampler/proc.js';
import { SystemSampler } from '../daemon/sampler/sampler.js';

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, '..', '..'); // dist/bench → repo root
const fake = join(repo, 'test', 'fixtures', 'nvidia-smi', 'fake-nvidia-smi');
const secondsArg = process.argv.indexOf('--seconds');
// --quick (from `make bench`'s run-all): 5 s per scenario, figures coarser.
const SECONDS = secondsArg > 0 ? Number(process.argv[secondsArg + 1]) : process.argv.includes('--quick') ? 5 : 20;
const INTERVAL_MS = 1000;

/** utime+stime (and, with `children`, cutime+cstime) of a pid, in seconds. */
function cpuSeconds(pid: number | 'self', children = false): number {
  const text = readText(`/proc/${pid}/stat`);
  if (text === null) return 0;
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ').map(Number);
  const ticks = children ? f[13]! + f[14]! : f[11]! + f[12]!; // fields 16,17 / 14,15 of proc(5)
  return ticks / TICKS_PER_SECOND;
}

const selfCpu = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface Result {
  label: string;
  daemonPct: number;
  loopChildrenPct: number;
  reapedChildrenPct: number;
  totalPct: number;
  samples: number;
  loops: number;
  polls: number;
}

/** Runs `samplerCount` samplers for SECONDS; each watches `watchPerSampler` of the rank pids. */
async function scenario(label: string, samplerCount: number, ranks: number[], watchPerSampler: number, fixture = 'h100x8.csv'): Promise<Result> {
  process.env.FAKE_NVSMI_FIXTURE = fixture;
  const samplers = Array.from({ length: samplerCount }, () => new SystemSampler({ intervalMs: INTERVAL_MS, log: () => {} }));
  let samples = 0;
  for (const s of samplers) s.onSample(() => samples++);
  await Promise.all(samplers.map((s) => s.start()));
  samplers.forEach((s, i) => ranks.slice(i * watchPerSampler, (i + 1) * watchPerSampler).forEach((pid) => s.watch(pid)));
  await sleep(INTERVAL_MS * 1.5); // past start-up: the probe and the loops' first output
  const loopPids = samplers.map((s) => s.diagnostics().gpuToolPid).filter((p): p is number => p !== undefined);
  const t0 = performance.now();
  const self0 = selfCpu();
  const loops0 = loopPids.map((p) => cpuSeconds(p));
  const reaped0 = cpuSeconds('self', true);
  samples = 0;
  const polls0 = samplers.reduce((n, s) => n + s.diagnostics().computeAppsPolls, 0);
  await sleep(SECONDS * 1000);
  const polls = samplers.reduce((n, s) => n + s.diagnostics().computeAppsPolls, 0) - polls0;
  const wall = (performance.now() - t0) / 1000;
  const self = selfCpu() - self0;
  const loops = loopPids.reduce((sum, p, i) => sum + cpuSeconds(p) - loops0[i]!, 0);
  const reaped = cpuSeconds('self', true) - reaped0;
  await Promise.all(samplers.map((s) => s.stop()));
  const pct = (s: number): number => (s / wall) * 100;
  return {
    label,
    daemonPct: pct(self),
    loopChildrenPct: pct(loops),
    reapedChildrenPct: pct(reaped),
    totalPct: pct(self + loops + reaped),
    samples,
    loops: loopPids.length,
    polls,
  };
}

/** Daemon-side and tool-side CPU of one one-shot nvidia-smi query (as a compute-apps poll does). */
async function oneShotCost(n: number): Promise<{ daemonMs: number; toolMs: number }> {
  const self0 = selfCpu();
  const reaped0 = cpuSeconds('self', true);
  for (let i = 0; i < n; i++) await runOnce('nvidia-smi', ['--query-compute-apps=pid,gpu_uuid,used_memory', '--format=csv,noheader,nounits'], 10_000);
  return { daemonMs: ((selfCpu() - self0) / n) * 1000, toolMs: ((cpuSeconds('self', true) - reaped0) / n) * 1000 };
}

async function main(): Promise<void> {
  const real = process.argv.includes('--real');
  const bin = mkdtempSync(join(tmpdir(), 'logd-bench-'));
  if (!real) {
    symlinkSync(fake, join(bin, 'nvidia-smi'));
    process.env.PATH = `${bin}:${process.env.PATH ?? ''}`;
  }
  delete process.env.FAKE_NVSMI_MODE;
  // Eight idle "ranks" to watch, as in the many-process pattern, each with a few
  // dozen threads like a PyTorch rank (finding descendants reads one file per thread).
  // They exit on their own if this process dies without killing them.
  const rank =
    "const { Worker } = require('node:worker_threads'); for (let i = 0; i < 16; i++) new Worker('setInterval(() => {}, 1 << 30)', { eval: true });" +
    `setInterval(() => { try { process.kill(${process.pid}, 0); } catch { process.exit(0); } }, 1000);`;
  const ranks: ChildProcess[] = Array.from({ length: 8 }, () => spawn(process.execPath, ['-e', rank], { stdio: 'ignore' }));
  await sleep(2000);
  try {
    const pids = ranks.map((r) => r.pid!);
    const procs = readdirSync('/proc').filter((n) => /^\d+$/.test(n)).length;
    const gpus = real ? `real nvidia-smi on PATH` : '8 GPUs (fake nvidia-smi, h100x8.csv)';
    console.log(`sampler bench: ${gpus}, interval ${INTERVAL_MS} ms, ${SECONDS} s per scenario, ${procs} processes on this machine, node ${process.version}`);
    const results = [
      await scenario('baseline: this process with no sampler (the floor every figure includes)', 0, pids, 0),
      await scenario('1 sampler per node, no pid watched (one-process pattern)', 1, pids, 0),
      await scenario('1 sampler per node, 8 rank pids watched, steady GPU memory (compute-apps polled once, at watch)', 1, pids, 8),
      await scenario('1 sampler per node, 8 rank pids watched, GPU memory moving every second (worst case: compute-apps every 5 s)', 1, pids, 8, 'h100x8-alloc.csv'),
      await scenario('8 samplers, one per rank, 1 pid each (the wandb way)', 8, pids, 1),
    ];
    for (const r of results) {
      console.log(
        `${r.label}\n  total ${r.totalPct.toFixed(3)} % of one core = daemon ${r.daemonPct.toFixed(3)} % + nvidia-smi loop x${r.loops} ${r.loopChildrenPct.toFixed(3)} % + ${r.polls} compute-apps queries ${r.reapedChildrenPct.toFixed(3)} %  (${r.samples} samples)`,
      );
    }
    const shot = await oneShotCost(10);
    console.log(`one one-shot query (compute-apps poll): daemon side ${shot.daemonMs.toFixed(1)} ms CPU (execa spawn), tool side ${shot.toolMs.toFixed(1)} ms CPU (the fake is a Node script)`);
  } finally {
    for (const r of ranks) r.kill('SIGKILL');
    rmSync(bin, { recursive: true, force: true });
  }
}

await main();
