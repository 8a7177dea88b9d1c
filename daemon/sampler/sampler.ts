// sampler: the node's system-metric sampler, one per daemon. Contract: every
// interval it emits one SystemSample (node metrics + one entry per watched root
// pid) to its subscribers; it never throws into the daemon, never logs a failure
// twice in a row, and stop() returns within its deadline whatever nvidia-smi does.
// Metric names and units: README.md next to this file.
import { statfs } from 'node:fs/promises';
import { GpuLoop, probeGpus } from './gpu-loop.js';
import { readMemory } from './memory.js';
import { GPU_QUERY_FIELDS, computeAppsArgs, parseComputeApps, resolveExecutable, runOnce, type ComputeApp, type GpuReading } from './nvidia-smi.js';
import { ProcessTreeTracker, gpuProcessMetrics } from './process-metrics.js';
import { ProcessSnapshot, cpuPercent, isCountedDisk, parseDiskstats, parseNetDev, parseProcStat, readText, type CpuTimes, type IoBytes } from './proc.js';

export interface SystemSample {
  /** Unix seconds. */
  time: number;
  node: Record<string, number>;
  /** Per watched root pid: its own and its descendants' metrics. */
  processes: Map<number, Record<string, number>>;
}

export interface GpuStaticInfo {
  index: number;
  name: string;
  uuid: string;
  driverVersion: string;
  memoryTotalBytes: number;
}

export interface SystemSamplerOptions {
  /** Sampling period; default 2000 ms. */
  intervalMs?: number;
  /** nvidia-smi path or name looked up on PATH; default 'nvidia-smi'. */
  nvidiaSmi?: string;
  /** Filesystem whose usage is reported; default '/'. */
  diskPath?: string;
  log?: (line: string) => void;
  /** Also report `cpu.<n>.cpu_percent` for every core; default false. */
  perCoreCpu?: boolean;
  /** How often per-process GPU memory is polled while a pid is watched; default max(interval, 5000) ms. */
  computeAppsIntervalMs?: number;
  /** nvidia-smi silent this long counts as hung; default 3 × interval + 5000 ms. */
  gpuHangTimeoutMs?: number;
  gpuInitialBackoffMs?: number;
  gpuMaxBackoffMs?: number;
  /** Deadline for one-shot nvidia-smi queries (start-up probe, compute-apps); default 10000 ms. */
  queryDeadlineMs?: number;
  /** stop() resolves within this; default 3000 ms. */
  stopDeadlineMs?: number;
}

const MB = 1024 * 1024;

export class SystemSampler {
  private readonly intervalMs: number;
  private readonly log: (line: string) => void;
  private readonly diskPath: string;
  private readonly appsIntervalMs: number;
  private readonly queryDeadlineMs: number;
  private readonly subscribers = new Set<(s: SystemSample) => void>();
  private readonly watched = new Map<number, { refs: number; tracker: ProcessTreeTracker }>();
  private readonly gpuStatic = new Map<number, GpuStaticInfo>();
  private readonly gpuLatest = new Map<number, { reading: GpuReading; atMs: number }>();
  private gpuLoop: GpuLoop | null = null;
  private smiPath: string | null = null;
  private apps: { list: ComputeApp[]; atMs: number } | null = null;
  private appsInFlight: Promise<void> | null = null;
  private appsStartedAtMs = 0;
  private readonly abort = new AbortController();
  private timer: NodeJS.Timeout | null = null;
  private ticking = false;
  private state: 'new' | 'started' | 'stopped' = 'new';
  private prevCpu: { all: CpuTimes; cores: CpuTimes[] } | null = null;
  private diskBase: IoBytes | null = null;
  private netBase: { recvBytes: number; sentBytes: number } | null = null;
  private statfsInFlight: Promise<unknown> | null = null;
  private callbackFailed = false;

  constructor(private readonly opts: SystemSamplerOptions = {}) {
    this.intervalMs = Math.max(10, opts.intervalMs ?? 2000);
    this.log = opts.log ?? ((line) => process.stderr.write(`${line}\n`));
    this.diskPath = opts.diskPath ?? '/';
    this.appsIntervalMs = opts.computeAppsIntervalMs ?? Math.max(this.intervalMs, 5000);
    this.queryDeadlineMs = opts.queryDeadlineMs ?? 10_000;
  }

  /** Finds the GPUs (bounded by the query deadline) and starts sampling. */
  async start(): Promise<void> {
    if (this.state !== 'new') return;
    this.state = 'started';
    this.prevCpu = this.readCounters().cpu; // baselines: CPU % and byte counters are measured from here
    await this.startGpus();
    if (this.state !== 'started') return; // stopped while probing
    this.timer = setInterval(() => void this.tick(), this.intervalMs);
    this.timer.unref();
  }

  private async startGpus(): Promise<void> {
    const name = this.opts.nvidiaSmi ?? 'nvidia-smi';
    this.smiPath = resolveExecutable(name);
    if (this.smiPath === null) {
      this.log(`sampler: no ${name} found${name.includes('/') ? '' : ' on PATH'}; GPU metrics are off`);
      return;
    }
    const probe = await probeGpus(this.smiPath, GPU_QUERY_FIELDS, this.queryDeadlineMs);
    if (probe.ok) {
      for (const r of probe.readings) this.noteStatic(r);
      const names = [...new Set(probe.readings.map((r) => r.name ?? 'unknown'))].join(', ');
      const dropped = GPU_QUERY_FIELDS.filter((f) => !probe.fields.includes(f));
      this.log(
        `sampler: ${probe.readings.length} GPU(s) (${names}), driver ${probe.readings[0]?.driverVersion ?? 'unknown'}` +
          (dropped.length ? `; this nvidia-smi lacks ${dropped.join(', ')}` : ''),
      );
    } else {
      this.log(`sampler: ${this.smiPath} failed (${probe.reason}); GPU metrics are off until it works, retrying with backoff`);
    }
    if (this.state !== 'started') return;
    this.gpuLoop = new GpuLoop({
      file: this.smiPath,
      fields: probe.fields,
      intervalMs: this.intervalMs,
      hangTimeoutMs: this.opts.gpuHangTimeoutMs,
      initialBackoffMs: this.opts.gpuInitialBackoffMs,
      maxBackoffMs: this.opts.gpuMaxBackoffMs,
      alreadyFailing: !probe.ok,
      log: this.log,
      onReading: (reading, atMs) => {
        this.noteStatic(reading);
        this.gpuLatest.set(reading.index, { reading, atMs });
      },
    });
    this.gpuLoop.start();
  }

  private noteStatic(r: GpuReading): void {
    if (this.gpuStatic.has(r.index)) return;
    if (r.uuid === null) return;
    this.gpuStatic.set(r.index, {
      index: r.index,
      name: r.name ?? 'unknown',
      uuid: r.uuid,
      driverVersion: r.driverVersion ?? 'unknown',
      memoryTotalBytes: r.memoryTotalBytes ?? 0,
    });
  }

  /** Watches a run writer's root pid; counted, so two runs may watch one pid. */
  watch(pid: number): void {
    const entry = this.watched.get(pid);
    if (entry) entry.refs++;
    else {
      const tracker = new ProcessTreeTracker(pid);
      tracker.measure(new ProcessSnapshot(), null, Date.now()); // CPU baseline, so the next sample has CPU %
      this.watched.set(pid, { refs: 1, tracker });
    }
  }

  unwatch(pid: number): void {
    const entry = this.watched.get(pid);
    if (entry && --entry.refs <= 0) this.watched.delete(pid);
  }

  onSample(cb: (s: SystemSample) => void): () => void {
    this.subscribers.add(cb);
    return () => this.subscribers.delete(cb);
  }

  /** Static facts of each GPU, known once the start-up probe or the loop has reported. */
  gpus(): GpuStaticInfo[] {
    return [...this.gpuStatic.values()].sort((a, b) => a.index - b.index);
  }

  /** For benchmarks and tests: the nvidia-smi loop process and how often it was restarted. */
  diagnostics(): { gpuToolPid: number | undefined; gpuToolRestarts: number; gpuEnabled: boolean } {
    return { gpuToolPid: this.gpuLoop?.pid, gpuToolRestarts: this.gpuLoop?.restarts ?? 0, gpuEnabled: this.gpuLoop !== null };
  }

  private async tick(): Promise<void> {
    if (this.ticking || this.state !== 'started') return;
    this.ticking = true;
    try {
      this.maybePollApps();
      this.emit(await this.sampleNow());
    } finally {
      this.ticking = false;
    }
  }

  private emit(sample: SystemSample): void {
    for (const cb of this.subscribers) {
      try {
        cb(sample);
      } catch (err) {
        if (!this.callbackFailed) this.log(`sampler: a sample subscriber threw (${String(err)}); further throws are not logged`);
        this.callbackFailed = true;
      }
    }
  }

  /** Takes one sample now (also between ticks); the GPU part is the loop's latest fresh reading. */
  async sampleNow(): Promise<SystemSample> {
    const nowMs = Date.now();
    const node: Record<string, number> = {};
    const diskUsage = this.diskUsage();
    this.addCounters(node);
    const memory = readMemory();
    if (memory) {
      node.memory_percent = memory.percent;
      node['memory.usedBytes'] = memory.usedBytes;
      node['memory.limitBytes'] = memory.limitBytes;
      node['proc.memory.availableMB'] = memory.availableBytes / MB;
    }
    const freshMs = Math.max(2.5 * this.intervalMs, this.intervalMs + 1000);
    for (const [index, { reading, atMs }] of this.gpuLatest) {
      if (nowMs - atMs > freshMs) continue; // a stale GPU reading is worse than none
      for (const [key, value] of Object.entries(reading.metrics)) node[`gpu.${index}.${key}`] = value;
    }
    const processes = new Map<number, Record<string, number>>();
    if (this.watched.size > 0) {
      const snap = new ProcessSnapshot();
      const apps = this.freshApps(nowMs);
      const indexByUuid = new Map(this.gpus().map((g) => [g.uuid, g.index]));
      for (const [pid, { tracker }] of this.watched) {
        const measured = tracker.measure(snap, memory?.limitBytes ?? null, nowMs);
        if (!measured) continue; // the root is gone; the daemon unwatches it
        const metrics = measured.metrics;
        if (apps) Object.assign(metrics, gpuProcessMetrics(measured.pids, apps, indexByUuid, node));
        processes.set(pid, metrics);
      }
    }
    const usage = await diskUsage;
    if (usage) {
      node[`disk.${this.diskPath}.usagePercent`] = usage.percent;
      node[`disk.${this.diskPath}.usageGB`] = usage.usedBytes / 1024 ** 3;
    }
    return { time: nowMs / 1000, node, processes };
  }

  private readCounters(): { cpu: ReturnType<typeof parseProcStat> | null; disk: IoBytes | null; net: ReturnType<typeof parseNetDev> | null } {
    const stat = readText('/proc/stat');
    const diskstats = readText('/proc/diskstats');
    const netdev = readText('/proc/net/dev');
    const counters = {
      cpu: stat === null ? null : parseProcStat(stat),
      disk: diskstats === null ? null : parseDiskstats(diskstats, countedDisk),
      net: netdev === null ? null : parseNetDev(netdev),
    };
    this.diskBase ??= counters.disk;
    this.netBase ??= counters.net;
    return counters;
  }

  private addCounters(node: Record<string, number>): void {
    const prevCpu = this.prevCpu;
    const { cpu, disk, net } = this.readCounters();
    if (cpu && prevCpu) {
      const all = cpuPercent(prevCpu.all, cpu.all);
      if (all !== undefined) node.cpu = all;
      if (this.opts.perCoreCpu) {
        cpu.cores.forEach((core, i) => {
          const prev = prevCpu.cores[i];
          const pct = prev ? cpuPercent(prev, core) : undefined;
          if (pct !== undefined) node[`cpu.${i}.cpu_percent`] = pct;
        });
      }
    }
    if (cpu) this.prevCpu = cpu;
    if (disk && this.diskBase) {
      node['disk.in'] = (disk.readBytes - this.diskBase.readBytes) / MB;
      node['disk.out'] = (disk.writeBytes - this.diskBase.writeBytes) / MB;
    }
    if (net && this.netBase) {
      node['network.recv'] = net.recvBytes - this.netBase.recvBytes;
      node['network.sent'] = net.sentBytes - this.netBase.sentBytes;
    }
  }

  /** statfs can block on a dead network mount: bounded wait, and never two at once. */
  private async diskUsage(): Promise<{ percent: number; usedBytes: number } | null> {
    if (this.statfsInFlight) return null;
    const call = statfs(this.diskPath).then(
      (s) => {
        const used = (s.blocks - s.bfree) * s.bsize;
        const usable = used + s.bavail * s.bsize; // as df: space root reserves is not usable
        return usable > 0 ? { percent: (used / usable) * 100, usedBytes: used } : null;
      },
      () => null,
    );
    this.statfsInFlight = call;
    void call.finally(() => {
      if (this.statfsInFlight === call) this.statfsInFlight = null;
    });
    return withDeadline(call, Math.min(this.intervalMs, 1000), null);
  }

  private maybePollApps(): void {
    if (!this.gpuLoop || !this.smiPath || this.watched.size === 0 || this.appsInFlight) return;
    if (Date.now() - this.appsStartedAtMs < this.appsIntervalMs - this.intervalMs / 2) return;
    this.appsStartedAtMs = Date.now();
    const deadline = Math.min(this.queryDeadlineMs, Math.max(this.appsIntervalMs, 2000));
    this.appsInFlight = runOnce(this.smiPath, computeAppsArgs(), deadline, 1000, this.abort.signal).then((r) => {
      this.appsInFlight = null;
      if (r.ok) this.apps = { list: parseComputeApps(r.stdout), atMs: Date.now() };
    });
  }

  private freshApps(nowMs: number): ComputeApp[] | null {
    if (!this.apps || nowMs - this.apps.atMs > 2 * this.appsIntervalMs + this.queryDeadlineMs) return null;
    return this.apps.list;
  }

  /**
   * Stops sampling and kills nvidia-smi; with `finalSample`, first emits one last
   * sample to the subscribers. Resolves within `stopDeadlineMs` in every case.
   */
  async stop(opts: { finalSample?: boolean } = {}): Promise<void> {
    if (this.state === 'stopped') return;
    const wasStarted = this.state === 'started';
    this.state = 'stopped';
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    const deadlineMs = this.opts.stopDeadlineMs ?? 3000;
    const work = (async () => {
      if (opts.finalSample && wasStarted) this.emit(await this.sampleNow());
      this.abort.abort();
      await Promise.all([this.gpuLoop?.stop(Math.max(100, deadlineMs - 500)), this.appsInFlight]);
    })();
    await withDeadline(work, deadlineMs, undefined);
  }
}

function countedDisk(name: string): boolean {
  let known = countedDiskCache.get(name);
  if (known === undefined) countedDiskCache.set(name, (known = isCountedDisk(name)));
  return known;
}
const countedDiskCache = new Map<string, boolean>();

function withDeadline<T, D>(p: Promise<T>, ms: number, fallback: D): Promise<T | D> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<D>((resolve) => {
    timer = setTimeout(() => resolve(fallback), ms);
    timer.unref();
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}
