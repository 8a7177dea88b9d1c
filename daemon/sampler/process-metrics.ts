// process-metrics: metrics of one watched process tree (a run writer and its
// children, e.g. dataloader workers): CPU, RSS, and the GPU memory the tree
// holds according to nvidia-smi's compute-apps list.
import type { ComputeApp } from './nvidia-smi.js';
import { TICKS_PER_SECOND, type ProcessSnapshot } from './proc.js';

const MB = 1024 * 1024;

/**
 * Remembers a tree's CPU ticks between samples so that CPU % covers exactly the
 * interval. Keys are pid + start time, so a reused pid never inherits ticks.
 *
 * Finding descendants means reading a `children` file per thread of every
 * member (a PyTorch rank has dozens of threads) or scanning all of /proc, so it
 * is redone every `rediscoverMs`; in between only the known members' stat files
 * are read. A new child process is therefore counted at most `rediscoverMs` late.
 */
export class ProcessTreeTracker {
  private prevTicks: Map<string, number> | null = null;
  private prevAtMs = 0;
  private members: Map<number, number> | null = null; // pid → start ticks
  private discoveredAtMs = 0;

  constructor(
    readonly root: number,
    private readonly rediscoverMs = 0,
  ) {}

  private currentMembers(snap: ProcessSnapshot, nowMs: number): number[] {
    if (this.members === null || nowMs - this.discoveredAtMs >= this.rediscoverMs) {
      const pids = snap.tree(this.root);
      this.members = new Map(pids.map((pid) => [pid, snap.stat(pid)?.startTicks ?? -1]));
      this.discoveredAtMs = nowMs;
      return pids;
    }
    const alive: number[] = [];
    for (const [pid, start] of this.members) {
      if (snap.stat(pid)?.startTicks === start) alive.push(pid);
      else this.members.delete(pid); // exited, or the pid now belongs to someone else
    }
    return alive[0] === this.root ? alive : [];
  }

  /**
   * The tree's metrics now, or null when the root process is gone.
   * `proc.cpu.percent` is in % of one core (like `top`), absent on the first
   * call, which only sets the baseline.
   */
  measure(snap: ProcessSnapshot, memoryLimitBytes: number | null, nowMs: number): { pids: number[]; metrics: Record<string, number> } | null {
    const pids = this.currentMembers(snap, nowMs);
    if (pids.length === 0) return null;
    const ticks = new Map<string, number>();
    let rssBytes = 0;
    let threads = 0;
    for (const pid of pids) {
      const st = snap.stat(pid);
      if (!st) continue;
      ticks.set(`${pid}:${st.startTicks}`, st.cpuTicks);
      threads += Number.isFinite(st.threads) ? st.threads : 0;
      rssBytes += Number.isFinite(st.rssBytes) ? st.rssBytes : 0;
    }
    const metrics: Record<string, number> = {
      'proc.memory.rssMB': rssBytes / MB,
      'proc.cpu.threads': threads,
      'proc.count': ticks.size,
    };
    if (memoryLimitBytes) metrics['proc.memory.percent'] = (rssBytes / memoryLimitBytes) * 100;
    if (this.prevTicks !== null && nowMs > this.prevAtMs) {
      let delta = 0;
      // A process born since the last sample counts in full: its ticks all fall in the interval.
      for (const [key, t] of ticks) delta += Math.max(0, t - (this.prevTicks.get(key) ?? 0));
      metrics['proc.cpu.percent'] = (delta / TICKS_PER_SECOND / ((nowMs - this.prevAtMs) / 1000)) * 100;
    }
    this.prevTicks = ticks;
    this.prevAtMs = nowMs;
    return { pids, metrics };
  }
}

/**
 * GPU metrics for one tree: the bytes its processes hold (all GPUs and per GPU),
 * and, as wandb does, the node metrics of each GPU it uses copied under
 * `gpu.process.<index>.…` so a rank's run shows its own GPU prominently.
 */
export function gpuProcessMetrics(
  pids: readonly number[],
  apps: readonly ComputeApp[],
  indexByUuid: ReadonlyMap<string, number>,
  node: Readonly<Record<string, number>>,
): Record<string, number> {
  const inTree = new Set(pids);
  const byIndex = new Map<number, number>();
  let total = 0;
  for (const app of apps) {
    if (!inTree.has(app.pid)) continue;
    const index = indexByUuid.get(app.gpuUuid);
    const bytes = app.usedMemoryBytes ?? 0;
    total += bytes;
    if (index !== undefined) byIndex.set(index, (byIndex.get(index) ?? 0) + bytes);
  }
  const out: Record<string, number> = {
    'gpu.process.memoryAllocatedBytes': total,
    'gpu.process.gpus': byIndex.size,
  };
  for (const [index, bytes] of byIndex) {
    const prefix = `gpu.${index}.`;
    for (const [key, value] of Object.entries(node)) {
      if (key.startsWith(prefix)) out[`gpu.process.${index}.${key.slice(prefix.length)}`] = value;
    }
    out[`gpu.process.${index}.processMemoryAllocatedBytes`] = bytes;
  }
  return out;
}
