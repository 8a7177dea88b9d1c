// System metrics in the daemon: one sampler per node, running while runs are
// open, stored ONCE per node in LOGD_DIR/system/records.log (one HISTORY frame
// per sample). A run sees the node's samples taken while it was alive, plus
// the process metrics of its own writers: no copy per run, however many ranks.
//
// Stored keys: node metrics as the sampler names them (`cpu`, `gpu.0.gpu`, …);
// a watched process's metrics as `@<pid>/<name>`. For a run, the owner's
// `@<pid>/proc.cpu.percent` reads as `proc.cpu.percent` and another writer's
// as `writer<idx>/proc.cpu.percent`; other processes' keys are left out.
import fs from 'node:fs';
import path from 'node:path';
import { RecordLog } from '../store/record-log.js';
import { FrameType, encodeHistory, decodeHistory, jsonFrame, parseFrameJson, type HistoryBatch } from '../store/format.js';
import { scanFrames } from '../../src/frames.js';
import { bytesOf } from '../../src/wire.js';
import { SystemSampler, type SystemSample, type GpuStaticInfo } from './sampler.js';
import { primeCpuBaseline } from './node-metrics.js';
import { systemLogIndex, StopRead, STOP_AFTER_S } from './system-index.js';

export interface RunWindow { from: number; to: number; ownerPid: number; writerPids: Map<number, number> }

export class SystemMetrics {
  private log: RecordLog;
  private readonly file: string;
  private keys: string[] = [];
  private keyIndex = new Map<string, number>();
  private sampler: SystemSampler | null = null;
  private watched = new Set<number>();
  private seq = 0;
  private lastGpus: GpuStaticInfo[] = [];
  last: SystemSample | null = null;

  private runningIntervalMs = 0;

  constructor(dataDir: string, private intervalMs: number, private logLine: (l: string) => void, private nvidiaSmi?: string) {
    primeCpuBaseline(); // the first run's first sample measures CPU % from the daemon's start
    const dir = path.join(dataDir, 'system');
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    this.file = path.join(dir, 'records.log');
    const index = systemLogIndex(this.file).fromScan(); // the opening scan builds the read index too
    const opened = RecordLog.open(this.file, (type, p, offset) => {
      index.frame(type, p, offset);
      if (type !== FrameType.KEYS) return;
      const k = parseFrameJson<{ first: number; names: string[] }>(p);
      for (let i = 0; i < k.names.length; i++) this.intern1(k.names[i], k.first + i);
    });
    index.done(opened.scan.validBytes);
    this.log = opened.log;
    for (const d of opened.scan.damaged) this.logLine(`sampler: ${this.file}: ${d.bytes} bytes at offset ${d.offset} fail their checksum; skipped to the next valid frame`);
  }

  private intern1(name: string, id: number): void {
    this.keys[id] = name;
    this.keyIndex.set(name, id);
  }

  /** The daemon's own interval (LOGD_SAMPLE_INTERVAL_MS or --sample-interval). */
  get defaultIntervalMs(): number {
    return this.intervalMs;
  }

  get running(): boolean {
    return this.sampler !== null;
  }

  /**
   * Starts sampling (in the background: a broken driver must not delay
   * serving) at `intervalMs`, or restarts the sampler when a run asks for a
   * shorter interval than the one it runs at.
   */
  ensureRunning(intervalMs = this.intervalMs): void {
    this.cancelIdleStop();
    if (this.sampler && intervalMs >= this.runningIntervalMs) return;
    if (this.sampler) {
      const old = this.sampler;
      this.sampler = null;
      void old.stop();
      this.logLine(`sampler: a run asked for a ${intervalMs} ms interval; sampling every ${intervalMs} ms from now on`);
    }
    this.runningIntervalMs = intervalMs;
    const s = new SystemSampler({ intervalMs, log: (l) => this.sayOnce(l), nvidiaSmi: this.nvidiaSmi });
    s.onSample((x) => this.record(x));
    this.sampler = s;
    this.watched.clear();
    void s.start().catch((e) => this.logLine(`sampler: could not start: ${(e as Error).message}`));
  }

  /**
   * The sampler starts again with each run after a pause; what it finds at
   * start (no nvidia-smi, or these GPUs) is said once per daemon, not once per
   * run, unless it changes.
   */
  private said = '';
  private sayOnce(line: string): void {
    const found = /^sampler: (no \S+ found|\d+ GPU\(s\) )/.test(line);
    if (found && line === this.said) return;
    if (found) this.said = line;
    this.logLine(line);
  }

  /**
   * No run is open: sampling stops after `graceMs`, unless a run opens meanwhile (ensureRunning). Back-to-back
   * short runs (a test suite, a sweep, one process after another) keep one sampler instead of starting it again
   * for each: its start reads /proc and probes for nvidia-smi, which CreateRun would otherwise wait behind.
   */
  stopWhenIdle(graceMs: number): void {
    if (!this.sampler || this.idleStop) return;
    this.idleStop = setTimeout(() => {
      this.idleStop = null;
      void this.stop().catch((e) => this.logLine(`sampler: could not stop: ${(e as Error).message}`));
    }, graceMs);
    this.idleStop.unref();
  }

  private idleStop: NodeJS.Timeout | null = null;

  private cancelIdleStop(): void {
    if (this.idleStop) clearTimeout(this.idleStop);
    this.idleStop = null;
  }

  /** Stops sampling after one last sample (no open runs left). */
  async stop(): Promise<void> {
    this.cancelIdleStop();
    const s = this.sampler;
    if (!s) return;
    this.sampler = null;
    this.lastGpus = s.gpus();
    await s.stop({ finalSample: true });
    await this.log.sync().catch(() => {});
  }

  /**
   * A sample soon (a run begins), after what the daemon is answering now: the runs that begin in one turn of the
   * event loop share one (a burst of 500 runs reads /proc far fewer than 500 times). An older sample never stands
   * in for it: taken before the run was created, it would not be the run's.
   */
  sampleSoon(): void {
    if (this.sampleDue) return;
    this.sampleDue = true;
    // A sampler that has just started waits until it can measure CPU % (50 ms on 2 CPUs): a start sample without
    // `cpu` would leave the run's CPU chart with its end alone.
    const wait = Math.max(0, (this.sampler?.cpuMeasurableAt() ?? 0) - Date.now());
    const take = (): void => {
      this.sampleDue = false;
      void this.sampleNow().catch(() => undefined);
    };
    if (wait > 0) setTimeout(take, wait).unref();
    else setImmediate(take);
  }

  private sampleDue = false;

  /** A sample now (a run is finishing), recorded like any other; bounded by its deadline. */
  async sampleNow(timeoutMs = 1000): Promise<void> {
    const s = this.sampler;
    if (!s) return;
    const sample = await Promise.race([s.sampleNow(), new Promise<null>((r) => setTimeout(() => r(null), timeoutMs).unref())]);
    if (sample) this.record(sample);
  }

  gpus(): GpuStaticInfo[] {
    return this.sampler?.gpus() ?? this.lastGpus;
  }

  /** Watches exactly these local processes (the writers of open runs). */
  reconcile(pids: Iterable<number>): void {
    const s = this.sampler;
    if (!s) return;
    const want = new Set(pids);
    for (const pid of want) if (!this.watched.has(pid)) (s.watch(pid), this.watched.add(pid));
    for (const pid of this.watched) if (!want.has(pid)) (s.unwatch(pid), this.watched.delete(pid));
  }

  private record(sample: SystemSample): void {
    this.last = sample;
    const names: string[] = [];
    const values: number[] = [];
    for (const [k, v] of Object.entries(sample.node)) (names.push(k), values.push(v));
    for (const [pid, m] of sample.processes) for (const [k, v] of Object.entries(m)) (names.push(`@${pid}/${k}`), values.push(v));
    if (names.length === 0) return;
    const added: string[] = [];
    const first = this.keys.length;
    const ids = new Uint32Array(names.length);
    names.forEach((n, i) => {
      let id = this.keyIndex.get(n);
      if (id === undefined) {
        id = this.keys.length;
        this.intern1(n, id);
        added.push(n);
      }
      ids[i] = id;
    });
    if (added.length) this.log.append(FrameType.KEYS, jsonFrame({ first, names: added }));
    this.log.append(FrameType.HISTORY, encodeHistory({
      writerIdx: 0, seq: ++this.seq, rows: 1,
      steps: bytesOf(new Float64Array([this.seq])), times: bytesOf(new Float64Array([sample.time])),
      values: bytesOf(new Float64Array(values)), counts: bytesOf(new Uint32Array([names.length])), keyIds: bytesOf(ids),
    }));
    this.log.sync().catch((e) => this.storeFailed(e as Error));
  }

  private storeError = '';
  private storeErrorAt = 0;
  /** A full disk fails every sample: said once, and again each minute it lasts (or when the reason changes). */
  private storeFailed(e: Error): void {
    const now = Date.now();
    if (e.message === this.storeError && now - this.storeErrorAt < 60_000) return;
    this.storeError = e.message;
    this.storeErrorAt = now;
    this.logLine(`sampler: cannot store system metrics: ${e.message} (said again each minute while it lasts)`);
  }

  /** The run's view of one sample's keys (null: not this run's). */
  static runKey(name: string, w: RunWindow): string | null {
    if (name[0] !== '@') return name;
    const slash = name.indexOf('/');
    const pid = Number(name.slice(1, slash));
    const rest = name.slice(slash + 1);
    if (pid === w.ownerPid) return rest;
    const idx = w.writerPids.get(pid);
    return idx === undefined ? null : `writer${idx}/${rest}`;
  }

  /**
   * The samples taken while the run was alive, keys as the run sees them: read from the index's mark before the
   * run's start (system-index.ts) to the first sample well past its end, not the whole log.
   */
  readForRun(w: RunWindow, wanted: Set<string>, onChunk: (b: HistoryBatch, newKeys: string[]) => void): void {
    const out: string[] = [];
    const outIndex = new Map<string, number>();
    const map: number[] = []; // stored id -> output id, -1 dropped
    let reported = 0;
    const keys = (first: number, names: string[]) => {
      for (let i = 0; i < names.length; i++) {
        const name = SystemMetrics.runKey(names[i], w);
        if (name === null || (wanted.size > 0 && !wanted.has(name))) map[first + i] = -1;
        else {
          let id = outIndex.get(name);
          if (id === undefined) (id = out.length, out.push(name), outIndex.set(name, id));
          map[first + i] = id;
        }
      }
    };
    const ix = systemLogIndex(this.file);
    const start = ix.startFor(w.from);
    keys(0, start.names);
    const stopAt = ix.ordered ? w.to + STOP_AFTER_S : Infinity;
    try {
      scanFrames(this.file, (type, p) => {
        if (type === FrameType.KEYS) {
          const k = parseFrameJson<{ first: number; names: string[] }>(p);
          return keys(k.first, k.names);
        }
        if (type !== FrameType.HISTORY) return;
        const b = decodeHistory(p);
        if (b.times[0] > stopAt) throw new StopRead();
        if (b.times[0] < w.from || b.times[0] > w.to) return;
        const ids: number[] = [];
        const vals: number[] = [];
        for (let i = 0; i < b.keyIds.length; i++) {
          const id = map[b.keyIds[i]];
          if (id >= 0) (ids.push(id), vals.push(b.values[i]));
        }
        if (ids.length === 0) return;
        onChunk({
          writerIdx: 0, seq: b.seq, rows: 1, steps: b.steps, times: b.times, counts: new Uint32Array([ids.length]),
          keyIds: new Uint32Array(ids), values: new Float64Array(vals),
        }, out.slice(reported));
        reported = out.length;
      }, 1024 * 1024, start.offset);
    } catch (e) {
      if (!(e instanceof StopRead)) throw e;
    }
  }

  /** The last sample as the run sees it (for `logd show`). */
  lastForRun(w: RunWindow): Record<string, number> | null {
    if (!this.last) return null;
    const o: Record<string, number> = {};
    for (const [k, v] of Object.entries(this.last.node)) o[k] = v;
    for (const [pid, m] of this.last.processes) {
      for (const [k, v] of Object.entries(m)) {
        const name = SystemMetrics.runKey(`@${pid}/${k}`, w);
        if (name) o[name] = v;
      }
    }
    return o;
  }

  close(): void {
    this.log.close();
  }
}

/** What a run's view of the node's samples depends on: its lifetime and the pids of its writers. */
export interface RunSpan { createdAt: number; finishedAt: number; ownerPid: number; writers: Array<{ idx: number; pid: number }> }

export function runWindow(run: RunSpan): RunWindow {
  const writerPids = new Map<number, number>();
  for (const w of run.writers) if (w.pid !== run.ownerPid) writerPids.set(w.pid, w.idx);
  return { from: run.createdAt - 1, to: run.finishedAt || Infinity, ownerPid: run.ownerPid, writerPids };
}
