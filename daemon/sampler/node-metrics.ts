// node-metrics: the node's CPU, memory, disk and network figures. CPU % covers
// the time since the previous reading; disk and network bytes count from the
// first reading (the sampler's start), as wandb's `disk.in`/`network.sent` do.
import { statfs } from 'node:fs/promises';
import { readMemory, type MemoryReading } from './memory.js';
import { cpuPercent, isCountedDisk, parseDiskstats, parseNetDev, parseProcStat, readText, type IoBytes } from './proc.js';

const MB = 1024 * 1024;
/** Fewest ticks (summed over all cores) a CPU % is measured over: 50 ms on 2 cores, far less on big nodes. */
const MIN_CPU_TICKS = 10;

export class NodeCounters {
  private prevCpu: ReturnType<typeof parseProcStat> | null = null;
  private lastCpu: Record<string, number> | null = null;
  private diskBase: IoBytes | null = null;
  private netBase: ReturnType<typeof parseNetDev> | null = null;
  private statfsInFlight: Promise<unknown> | null = null;
  private readonly countedDisks = new Map<string, boolean>();

  constructor(
    private readonly diskPath: string,
    private readonly perCoreCpu: boolean,
    /** Longest wait for statfs in one sample. */
    private readonly statfsDeadlineMs: number,
  ) {}

  /** Reads counters into `node`; returns the memory reading (its limit scales per-process memory %). */
  read(node: Record<string, number>): MemoryReading | null {
    const stat = readText('/proc/stat');
    const diskstats = readText('/proc/diskstats');
    const netdev = readText('/proc/net/dev');
    const cpu = stat === null ? null : parseProcStat(stat);
    const disk = diskstats === null ? null : parseDiskstats(diskstats, (name) => this.counted(name));
    const net = netdev === null ? null : parseNetDev(netdev);
    this.addCpu(node, cpu);
    this.diskBase ??= disk;
    this.netBase ??= net;
    if (disk && this.diskBase) {
      node['disk.in'] = (disk.readBytes - this.diskBase.readBytes) / MB;
      node['disk.out'] = (disk.writeBytes - this.diskBase.writeBytes) / MB;
    }
    if (net && this.netBase) {
      node['network.recv'] = net.recvBytes - this.netBase.recvBytes;
      node['network.sent'] = net.sentBytes - this.netBase.sentBytes;
    }
    const memory = readMemory();
    if (memory) {
      node.memory_percent = memory.percent;
      node['memory.usedBytes'] = memory.usedBytes;
      node['memory.limitBytes'] = memory.limitBytes;
      node['proc.memory.availableMB'] = memory.availableBytes / MB;
    }
    return memory;
  }

  /**
   * CPU % since the baseline reading. /proc/stat counts in 10 ms ticks, so a
   * reading a few ms after the last one (two runs finishing together each take
   * a sample) may see no tick at all, or one: a figure from so few ticks is
   * noise or nothing. Such a reading repeats the last figure and keeps the
   * baseline, so every sample carries `cpu` and the next one measures the
   * whole span.
   */
  private addCpu(node: Record<string, number>, cpu: ReturnType<typeof parseProcStat> | null): void {
    if (!cpu) return;
    const base = this.prevCpu;
    if (!base) {
      this.prevCpu = cpu;
      return;
    }
    const ticks = cpu.all.busy + cpu.all.idle - (base.all.busy + base.all.idle);
    if (ticks < MIN_CPU_TICKS && this.lastCpu) {
      Object.assign(node, this.lastCpu);
      return;
    }
    const figures: Record<string, number> = {};
    const all = cpuPercent(base.all, cpu.all);
    if (all === undefined) return;
    figures.cpu = all;
    if (this.perCoreCpu) {
      cpu.cores.forEach((core, i) => {
        const prev = base.cores[i];
        const pct = prev ? cpuPercent(prev, core) : undefined;
        if (pct !== undefined) figures[`cpu.${i}.cpu_percent`] = pct;
      });
    }
    Object.assign(node, figures);
    this.lastCpu = figures;
    this.prevCpu = cpu;
  }

  private counted(name: string): boolean {
    let known = this.countedDisks.get(name);
    if (known === undefined) this.countedDisks.set(name, (known = isCountedDisk(name)));
    return known;
  }

  /**
   * Adds `disk.<path>.usagePercent`/`usageGB`. statfs can block on a dead network
   * mount, so the wait is bounded and a call still pending is never doubled.
   */
  async addDiskUsage(node: Record<string, number>): Promise<void> {
    if (this.statfsInFlight) return;
    const call = statfs(this.diskPath).then(
      (s) => {
        const used = (s.blocks - s.bfree) * s.bsize;
        const usable = used + s.bavail * s.bsize; // as df: blocks reserved for root are not usable
        return usable > 0 ? { percent: (used / usable) * 100, usedBytes: used } : null;
      },
      () => null,
    );
    this.statfsInFlight = call;
    void call.finally(() => {
      if (this.statfsInFlight === call) this.statfsInFlight = null;
    });
    const usage = await withDeadline(call, this.statfsDeadlineMs, null);
    if (usage) {
      node[`disk.${this.diskPath}.usagePercent`] = usage.percent;
      node[`disk.${this.diskPath}.usageGB`] = usage.usedBytes / 1024 ** 3;
    }
  }
}

export function withDeadline<T, D>(p: Promise<T>, ms: number, fallback: D): Promise<T | D> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<D>((resolve) => {
    timer = setTimeout(() => resolve(fallback), ms);
    timer.unref();
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}
