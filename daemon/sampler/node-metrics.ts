// node-metrics: the node's CPU, memory, disk and network figures. CPU % covers
// the time since the previous reading; disk and network bytes count from the
// first reading (the sampler's start), as wandb's `disk.in`/`network.sent` do.
import { statfs } from 'node:fs/promises';
import { readMemory, type MemoryReading } from './memory.js';
import { cpuPercent, isCountedDisk, parseDiskstats, parseNetDev, parseProcStat, readText, type IoBytes } from './proc.js';

const MB = 1024 * 1024;
/** Fewest ticks (summed over all cores) a CPU % is measured over: 50 ms on 2 cores, far less on big nodes. */
const MIN_CPU_TICKS = 10;

/** The daemon's last reading of /proc/stat that a CPU % was measured to: a new sampler's first baseline. */
let lastCpuReading: { cpu: ReturnType<typeof parseProcStat>; atMs: number } | null = null;

/** Reads /proc/stat once (the daemon starts): the first sampler's first sample measures CPU % from here. */
export function primeCpuBaseline(): void {
  if (lastCpuReading) return;
  const stat = readText('/proc/stat');
  if (stat !== null) lastCpuReading = { cpu: parseProcStat(stat), atMs: Date.now() };
}

export class NodeCounters {
  private prevCpu: ReturnType<typeof parseProcStat> | null = null;
  private prevCpuAtMs = 0;
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
   * whole span. A sampler's first baseline is the daemon's last reading of
   * /proc/stat (an earlier sampler's, or the one at daemon start, see
   * primeCpuBaseline), so a run's first sample, taken milliseconds after the
   * sampler started, has a figure too: the CPU since that reading.
   */
  private addCpu(node: Record<string, number>, cpu: ReturnType<typeof parseProcStat> | null): void {
    if (!cpu) return;
    const now = Date.now();
    if (!this.prevCpu) {
      const earlier = lastCpuReading;
      this.prevCpu = earlier?.cpu ?? cpu;
      this.prevCpuAtMs = earlier?.atMs ?? now;
      if (!earlier) lastCpuReading = { cpu, atMs: now };
    }
    const base = this.prevCpu;
    const ticks = cpu.all.busy + cpu.all.idle - (base.all.busy + base.all.idle);
    if (ticks < MIN_CPU_TICKS) {
      if (this.lastCpu) Object.assign(node, this.lastCpu);
      return; // too few ticks to measure: the baseline stays, and cpuMeasurableAt says when there are enough
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
    this.prevCpuAtMs = now;
    lastCpuReading = { cpu, atMs: now };
  }

  /**
   * When a reading can first measure CPU % (MIN_CPU_TICKS since the baseline: /proc/stat counts 100 ticks a second
   * per CPU, so 50 ms on 2 CPUs, a millisecond on 128); 0 (now) once a figure is known.
   */
  cpuMeasurableAt(): number {
    if (!this.prevCpu || this.lastCpu) return 0;
    const cpus = Math.max(1, this.prevCpu.cores.length);
    return this.prevCpuAtMs + Math.ceil(((MIN_CPU_TICKS + 2) * 10) / cpus) + 5; // a margin: ticks land late
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
