// compute-apps: which process holds how much memory on which GPU, from one-shot
// `nvidia-smi --query-compute-apps` runs with a deadline.
//
// Why polled, and rarely: a loop (-lms) prints nothing in an iteration where no
// process uses a GPU, so "no process" and "hung tool" look alike; and every
// one-shot run pays an NVML initialisation plus a spawn (bench/RESULTS-sampler.md).
// The pid → memory map only changes when a process allocates or frees, which
// shows in the per-GPU `memory.used` the loop already reports each interval. So
// a poll runs when a pid starts being watched, when some GPU's used memory has
// moved by ≥ 1 % of its total since the last poll, and at least every maxAgeMs;
// never more often than minIntervalMs, never two at once.
import { computeAppsArgs, parseComputeApps, runOnce, type ComputeApp } from './nvidia-smi.js';

export interface ComputeAppsPollerOptions {
  file: string;
  minIntervalMs: number;
  maxAgeMs: number;
  deadlineMs: number;
  signal: AbortSignal;
}

export class ComputeAppsPoller {
  private result: { apps: ComputeApp[]; atMs: number } | null = null;
  private startedAtMs = 0;
  private memoryAtPoll = new Map<number, number>();
  private dirty = true;
  private pollCount = 0;
  /** The poll in progress, if any (stop() waits for it, bounded). */
  inFlight: Promise<void> | null = null;

  constructor(private readonly opts: ComputeAppsPollerOptions) {}

  get polls(): number {
    return this.pollCount;
  }

  /** A pid started being watched: its memory should be known soon. */
  markDirty(): void {
    this.dirty = true;
  }

  /**
   * Starts a poll if one is due. `gpuMemory`: per GPU index, used and total
   * bytes as the loop reported them last.
   */
  maybePoll(gpuMemory: ReadonlyMap<number, { usedBytes: number; totalBytes: number }>, nowMs = Date.now()): void {
    if (this.inFlight || !this.isDue(gpuMemory, nowMs)) return;
    this.dirty = false;
    this.startedAtMs = nowMs;
    this.memoryAtPoll = new Map([...gpuMemory].map(([i, m]) => [i, m.usedBytes]));
    this.pollCount++;
    this.inFlight = runOnce(this.opts.file, computeAppsArgs(), this.opts.deadlineMs, 1000, this.opts.signal).then((r) => {
      this.inFlight = null;
      if (r.ok) this.result = { apps: parseComputeApps(r.stdout), atMs: Date.now() };
    });
  }

  private isDue(gpuMemory: ReadonlyMap<number, { usedBytes: number; totalBytes: number }>, nowMs: number): boolean {
    const age = nowMs - this.startedAtMs;
    if (age < this.opts.minIntervalMs) return false;
    if (this.dirty || age >= this.opts.maxAgeMs) return true;
    for (const [index, { usedBytes, totalBytes }] of gpuMemory) {
      const before = this.memoryAtPoll.get(index);
      if (before === undefined || Math.abs(usedBytes - before) >= 0.01 * totalBytes) return true;
    }
    return false;
  }

  /** The last successful answer, unless it is older than a missed max-age poll allows. */
  latest(nowMs = Date.now()): ComputeApp[] | null {
    if (!this.result || nowMs - this.result.atMs > this.opts.maxAgeMs + 2 * this.opts.deadlineMs) return null;
    return this.result.apps;
  }
}
