// gpu-loop: keeps ONE long-lived `nvidia-smi --query-gpu=… -lms <interval>`
// running and turns its lines into readings. Starting nvidia-smi costs an NVML
// initialisation each time, so one process in loop mode is far cheaper than one
// per sample. Contract:
// - any exit is followed by a restart after an exponential backoff, which resets
//   once a process has stayed healthy for `healthyResetMs`;
// - a process that prints no GPU reading for `hangTimeoutMs` (nothing, or only
//   error lines) is killed (SIGTERM, then SIGKILL after `killGraceMs`) and
//   replaced without waiting for it to exit;
// - a failure streak is logged once, its recovery once: no error spam;
// - stop() never takes longer than its deadline.
import type { ResultPromise } from 'execa';
import { createInterface } from 'node:readline';
import { firstLine, gpuLoopArgs, gpuOnceArgs, parseGpuLine, runOnce, loadExeca, loadedExeca, type GpuReading } from './nvidia-smi.js';

export interface GpuLoopOptions {
  file: string;
  fields: readonly string[];
  intervalMs: number;
  /** No GPU reading for this long means hung. Default 3 × interval + 5000 ms. */
  hangTimeoutMs?: number;
  initialBackoffMs?: number;
  maxBackoffMs?: number;
  healthyResetMs?: number;
  killGraceMs?: number;
  /** The caller already logged that nvidia-smi fails: stay quiet until it recovers. */
  alreadyFailing?: boolean;
  log: (line: string) => void;
  onReading: (reading: GpuReading, atMs: number) => void;
}

type Child = ResultPromise<{ stdin: 'ignore'; buffer: false; reject: false }>;

export class GpuLoop {
  private child: Child | null = null;
  private generation = 0;
  private live = new Set<Promise<unknown>>();
  private stopping = false;
  private restartTimer: NodeJS.Timeout | null = null;
  private watchdog: NodeJS.Timeout | null = null;
  private spawnedAt = 0;
  /** Last GPU reading from the current process (or its spawn time): a tool printing only errors is as good as hung. */
  private lastReadingAt = 0;
  private lastBadLine = '';
  private lastGoodAt = 0;
  private backoffMs: number;
  private failing = false;
  private loggedAtMax = false;
  private restartCount = 0;
  private readonly hangTimeoutMs: number;
  private readonly initialBackoffMs: number;
  private readonly maxBackoffMs: number;
  private readonly healthyResetMs: number;
  private readonly killGraceMs: number;

  constructor(private readonly opts: GpuLoopOptions) {
    this.hangTimeoutMs = opts.hangTimeoutMs ?? 3 * opts.intervalMs + 5000;
    this.initialBackoffMs = opts.initialBackoffMs ?? 1000;
    this.maxBackoffMs = opts.maxBackoffMs ?? 60_000;
    this.healthyResetMs = opts.healthyResetMs ?? 30_000;
    this.killGraceMs = opts.killGraceMs ?? 1000;
    this.backoffMs = this.initialBackoffMs;
    this.failing = opts.alreadyFailing ?? false;
  }

  /** How many times the tool has been restarted after dying or hanging. */
  get restarts(): number {
    return this.restartCount;
  }

  /** The pid of the current nvidia-smi process, if one runs. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  start(): void {
    if (this.stopping || this.child || this.restartTimer) return;
    this.spawn();
    const every = Math.max(50, Math.min(this.opts.intervalMs, 1000, this.hangTimeoutMs / 4));
    this.watchdog = setInterval(() => this.checkHung(), every);
    this.watchdog.unref();
  }

  private spawn(): void {
    const execa = loadedExeca();
    if (!execa) {
      // Not loaded yet (the loop started without a probe first): spawn once it is.
      void loadExeca().then(() => {
        if (!this.stopping && !this.child) this.spawn();
      });
      return;
    }
    const gen = ++this.generation;
    const child: Child = execa(this.opts.file, gpuLoopArgs(this.opts.intervalMs, this.opts.fields), {
      stdin: 'ignore',
      buffer: false,
      reject: false,
      cleanup: true,
      forceKillAfterDelay: this.killGraceMs,
    });
    this.child = child;
    this.spawnedAt = this.lastReadingAt = Date.now();
    this.lastGoodAt = 0;
    this.lastBadLine = '';
    let badLine = '';
    let stderrTail = '';
    child.stderr?.on('data', (d: Buffer) => {
      stderrTail = (stderrTail + d.toString()).slice(-1024);
    });
    if (child.stdout) {
      createInterface({ input: child.stdout, crlfDelay: Infinity }).on('line', (line) => {
        if (gen !== this.generation) return;
        const now = Date.now();
        const parsed = parseGpuLine(line, this.opts.fields);
        if (parsed.ok) {
          this.lastGoodAt = this.lastReadingAt = now;
          this.opts.onReading(parsed.value, now);
        } else if (line.trim() !== '') {
          this.lastBadLine = line.trim().slice(0, 300);
          badLine ||= this.lastBadLine;
        }
      });
    }
    const settled = child.then(
      (result) => {
        if (gen !== this.generation || this.stopping) return;
        const how = result.exitCode !== undefined ? `exit ${result.exitCode}` : (result.signal ?? 'failed to start');
        const detail = badLine || firstLine(stderrTail) || (result.exitCode === undefined ? result.shortMessage : '');
        this.onDead(`exited (${how}${detail ? `: ${detail}` : ''})`);
      },
      () => undefined,
    );
    this.live.add(settled);
    void settled.finally(() => this.live.delete(settled));
  }

  private checkHung(): void {
    const child = this.child;
    if (!child || this.stopping) return;
    const now = Date.now();
    const silentMs = now - this.lastReadingAt;
    if (silentMs <= this.hangTimeoutMs) {
      // Recovered only once a process has lived and reported for a few intervals:
      // a tool that prints one frame and dies must not log "recovered" each time.
      const recovered = this.lastGoodAt > 0 && now - this.spawnedAt >= 3 * this.opts.intervalMs && now - this.lastGoodAt <= 2 * this.opts.intervalMs;
      if (this.failing && recovered) this.noteRecovered();
      return;
    }
    // Replace it now; the old one gets SIGTERM, then SIGKILL from execa after killGraceMs.
    this.generation++;
    child.kill('SIGTERM');
    const what = this.lastBadLine ? `gave no GPU reading for ${silentMs} ms, only lines like "${this.lastBadLine}"` : `printed nothing for ${silentMs} ms`;
    this.onDead(`${what} (pid ${child.pid}); killed`);
  }

  private onDead(reason: string): void {
    this.child = null;
    const ranHealthy = this.lastGoodAt > 0 && this.lastGoodAt - this.spawnedAt >= this.healthyResetMs;
    if (ranHealthy) {
      this.backoffMs = this.initialBackoffMs;
      this.loggedAtMax = false;
    }
    const delay = this.backoffMs;
    this.backoffMs = Math.min(this.backoffMs * 2, this.maxBackoffMs);
    if (!this.failing) {
      this.failing = true;
      this.opts.log(`sampler: nvidia-smi ${reason}; restarting in ${delay} ms, backing off up to ${this.maxBackoffMs} ms`);
    } else if (delay >= this.maxBackoffMs && !this.loggedAtMax) {
      this.loggedAtMax = true;
      this.opts.log(`sampler: nvidia-smi still failing after ${this.restartCount} restarts (last: ${reason}); retrying every ${delay} ms`);
    }
    this.restartTimer = setTimeout(() => {
      this.restartTimer = null;
      if (this.stopping) return;
      this.restartCount++;
      this.spawn();
    }, delay);
    this.restartTimer.unref();
  }

  private noteRecovered(): void {
    if (!this.failing) return;
    this.failing = false;
    this.opts.log(`sampler: nvidia-smi is reporting again after ${this.restartCount} restart(s)`);
  }

  /** Stops the loop: no more restarts, the child is killed; resolves within `deadlineMs`. */
  async stop(deadlineMs = 2000): Promise<void> {
    this.stopping = true;
    if (this.restartTimer) clearTimeout(this.restartTimer);
    if (this.watchdog) clearInterval(this.watchdog);
    this.restartTimer = this.watchdog = null;
    const child = this.child;
    this.child = null;
    this.generation++;
    child?.kill('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), deadlineMs);
      timer.unref();
    });
    const outcome = await Promise.race([Promise.all([...this.live]).then(() => 'done' as const), deadline]);
    clearTimeout(timer);
    if (outcome === 'late') {
      this.opts.log(`sampler: nvidia-smi did not exit within ${deadlineMs} ms of SIGTERM/SIGKILL; abandoned`);
    }
  }
}

export type GpuProbe =
  | { ok: true; fields: string[]; readings: GpuReading[] }
  | { ok: false; fields: string[]; reason: string };

/**
 * One query at start: learns the GPUs' static facts, and drops any field this
 * driver's nvidia-smi does not know (it refuses the whole query otherwise).
 */
export async function probeGpus(file: string, fields: readonly string[], deadlineMs: number, signal?: AbortSignal): Promise<GpuProbe> {
  let current = [...fields];
  for (let attempt = 0; attempt < 5; attempt++) {
    const r = await runOnce(file, gpuOnceArgs(current), deadlineMs, 1000, signal);
    const unknown = /Field "([^"]+)" is not a valid field to query/.exec(r.stdout + r.reason)?.[1];
    if (!r.ok && unknown && unknown !== 'index' && current.includes(unknown)) {
      current = current.filter((f) => f !== unknown);
      continue;
    }
    if (!r.ok) return { ok: false, fields: current, reason: r.reason };
    const readings: GpuReading[] = [];
    for (const line of r.stdout.split('\n')) {
      const p = parseGpuLine(line, current);
      if (p.ok) readings.push(p.value);
    }
    if (readings.length === 0) return { ok: false, fields: current, reason: `no GPU lines: ${firstLine(r.stdout) || 'empty output'}` };
    return { ok: true, fields: current, readings };
  }
  return { ok: false, fields: current, reason: 'too many unknown fields' };
}
