// sampler: the node's system-metric sampler, one per daemon. Contract: every
// interval it emits one SystemSample (node metrics + one entry per watched root
// pid) to its subscribers; it never throws into the daemon, never logs a failure
// twice in a row, and stop() returns within its deadline whatever nvidia-smi does.
// Metric names and units: README.md next to this file.
import { GpuLoop, probeGpus } from './gpu-loop.js';
import { NodeCounters, withDeadline } from './node-metrics.js';
import { ComputeAppsPoller } from './compute-apps.js';
import { GPU_QUERY_FIELDS, resolveExecutable, type GpuReading } from './nvidia-smi.js';
import { ProcessTreeTracker, gpuProcessMetrics } from './process-metrics.js';
import { ProcessSnapshot } from './proc.js';

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
  /**
   * Per-process GPU memory (compute-apps) is polled while a pid is watched: when a
   * pid is added or a GPU's used memory moves, at most this often; default max(interval, 5000) ms.
   */
  computeAppsIntervalMs?: number;
  /** ...and at least this often; default 60000 ms. */
  computeAppsMaxAgeMs?: number;
  /** How often a watched pid's descendants are looked for again; default max(interval, 5000) ms. */
  processDiscoveryMs?: number;
  /** nvidia-smi silent this long counts as hung; default 3 × interval + 5000 ms. */
  gpuHangTimeoutMs?: number;
  gpuInitialBackoffMs?: number;
  gpuMaxBackoffMs?: number;
  /** Deadline for one-shot nvidia-smi queries (start-up probe, compute-apps); default 10000 ms. */
  queryDeadlineMs?: number;
  /** stop() resolves within this; default 3000 ms. */
  stopDeadlineMs?: number;
}

export class SystemSampler {
  private readonly intervalMs: number;
  private readonly log: (line: string) => void;
  private readonly queryDeadlineMs: number;
  private readonly subscribers = new Set<(s: SystemSample) => void>();
  private readonly watched = new Map<number, { refs: number; tracker: ProcessTreeTracker }>();
  private readonly gpuStatic = new Map<number, GpuStaticInfo>();
  private readonly gpuLatest = new Map<number, { reading: GpuReading; atMs: number }>();
  private gpuLoop: GpuLoop | null = null;
  private smiPath: string | null = null;
  private apps: ComputeAppsPoller | null = null;
  private readonly abort = new AbortController();
  private timer: NodeJS.Timeout | null = null;
  private ticking = false;
  private state: 'new' | 'started' | 'stopped' = 'new';
  private readonly counters: NodeCounters;
  private callbackFailed = false;

  constructor(private readonly opts: SystemSamplerOptions = {}) {
    this.intervalMs = Math.max(10, opts.intervalMs ?? 2000);
    this.log = opts.log ?? ((line) => process.stderr.write(`${line}\n`));
    this.counters = new NodeCounters(opts.diskPath ?? '/', opts.perCoreCpu ?? false, Math.min(this.intervalMs, 1000));
    this.queryDeadlineMs = opts.queryDeadlineMs ?? 10_000;
  }

  /** Finds the GPUs (bounded by the query deadline) and starts sampling. */
  async start(): Promise<void> {
    if (this.state !== 'new') return;
    this.state = 'started';
    this.counters.read({}); // baselines: CPU % and byte counters are measured from here
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
    const probe = await probeGpus(this.smiPath, GPU_QUERY_FIELDS, this.queryDeadlineMs, this.abort.signal);
    if (this.state !== 'started') return; // stopped while probing: the probe was cancelled
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
    this.apps = new ComputeAppsPoller({
      file: this.smiPath,
      minIntervalMs: this.opts.computeAppsIntervalMs ?? Math.max(this.intervalMs, 5000),
      maxAgeMs: this.opts.computeAppsMaxAgeMs ?? 60_000,
      deadlineMs: this.queryDeadlineMs,
      signal: this.abort.signal,
    });
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
      const tracker = new ProcessTreeTracker(pid, this.opts.processDiscoveryMs ?? Math.max(this.intervalMs, 5000));
      tracker.measure(new ProcessSnapshot(), null, Date.now()); // CPU baseline, so the next sample has CPU %
      this.watched.set(pid, { refs: 1, tracker });
      this.apps?.markDirty();
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
  diagnostics(): { gpuToolPid: number | undefined; gpuToolRestarts: number; gpuEnabled: boolean; computeAppsPolls: number } {
    return {
      gpuToolPid: this.gpuLoop?.pid,
      gpuToolRestarts: this.gpuLoop?.restarts ?? 0,
      gpuEnabled: this.gpuLoop !== null,
      computeAppsPolls: this.apps?.polls ?? 0,
    };
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

  /** When a sample can first carry CPU % (a sampler just started has too few ticks since its baseline); 0: now. */
  cpuMeasurableAt(): number {
    return this.counters.cpuMeasurableAt();
  }

  /** Takes one sample now (also between ticks); the GPU part is the loop's latest fresh reading. */
  async sampleNow(): Promise<SystemSample> {
    const nowMs = Date.now();
    const node: Record<string, number> = {};
    const diskUsage = this.counters.addDiskUsage(node);
    const memory = this.counters.read(node);
    const freshMs = Math.max(2.5 * this.intervalMs, this.intervalMs + 1000);
    for (const [index, { reading, atMs }] of this.gpuLatest) {
      if (nowMs - atMs > freshMs) continue; // a stale GPU reading is worse than none
      for (const [key, value] of Object.entries(reading.metrics)) node[`gpu.${index}.${key}`] = value;
    }
    const processes = new Map<number, Record<string, number>>();
    if (this.watched.size > 0) {
      const snap = new ProcessSnapshot();
      const apps = this.apps?.latest(nowMs) ?? null;
      const indexByUuid = new Map(this.gpus().map((g) => [g.uuid, g.index]));
      for (const [pid, { tracker }] of this.watched) {
        const measured = tracker.measure(snap, memory?.limitBytes ?? null, nowMs);
        if (!measured) continue; // the root is gone; the daemon unwatches it
        const metrics = measured.metrics;
        if (apps) Object.assign(metrics, gpuProcessMetrics(measured.pids, apps, indexByUuid, node));
        processes.set(pid, metrics);
      }
    }
    await diskUsage;
    return { time: nowMs / 1000, node, processes };
  }

  private maybePollApps(): void {
    if (!this.apps || this.watched.size === 0) return;
    const memory = new Map<number, { usedBytes: number; totalBytes: number }>();
    for (const [index, { reading }] of this.gpuLatest) {
      const usedBytes = reading.metrics.memoryAllocatedBytes;
      const totalBytes = this.gpuStatic.get(index)?.memoryTotalBytes;
      if (usedBytes !== undefined && totalBytes) memory.set(index, { usedBytes, totalBytes });
    }
    this.apps.maybePoll(memory);
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
      await Promise.all([this.gpuLoop?.stop(Math.max(100, deadlineMs - 500)), this.apps?.inFlight]);
    })();
    await withDeadline(work, deadlineMs, undefined);
  }
}
