// Run registry entry: one live run, its writers and its per-run bookkeeping.
// States: running -> finishing -> finished | crashed | killed.
import os from 'node:os';
import type * as grpc from '@grpc/grpc-js';
import type { RecordLog } from '../store/record-log.js';
import { FrameType, encodeHistory, jsonFrame, FINAL_STATES, type Attempt, type ConsoleEntry, type MediaEntry, type MediaIndex, indexMedia, type RunMeta, type RunStateName, type WriterMeta, type RankMeta } from '../store/format.js';
import { RunSummary, cappedSummary } from '../store/summary.js';
import { bytesOf, type WriteRequestMsg, type WriteResponseMsg, type RunInfo } from '../../src/wire.js';
import type { CheckedBatch } from './validate.js';
import { processStartTime } from './liveness.js';
import { toJson, ownRecord } from '../../src/json.js';
import { runWindow, type RunSpan, type SystemMetrics } from '../sampler/system-metrics.js';
import { splitEnvironment } from '../../src/environment.js';
import { LastLines, oomCounters, type OomCounters } from './process-end.js';
import type { RunEnd } from '../../src/story/end.js';
import { StepProgress } from '../health/progress.js';
import type { RunHealth } from '../../src/health.js';

export type WriteCall = grpc.ServerDuplexStream<WriteRequestMsg, WriteResponseMsg>;

export class Writer {
  /** writer-local key id -> run-global key id */
  keyMap: number[] = [];
  stream: WriteCall | null = null;
  appendedSeq: number;
  durableSeq: number;
  /** Bytes of this writer's batches appended and not yet durable (daemon/runs/backpressure.ts). */
  pendingBytes = 0;
  /** The writer said finish (or its process is gone): it no longer counts as attached. */
  detached = false;
  lastSeen = Date.now();
  readonly startTime: number | null;
  /** Same host as the daemon: watched by pid (checked every 500 ms, so decided once). */
  readonly local: boolean;
  /** The OOM-kill counters covering the process when it joined (process-end.ts): an OOM kill is told from them. */
  readonly oom: OomCounters | null;

  constructor(readonly meta: WriterMeta, durableSeq: number) {
    this.appendedSeq = durableSeq;
    this.durableSeq = durableSeq;
    this.local = meta.host === os.hostname();
    this.startTime = this.local ? processStartTime(meta.pid) : null;
    this.oom = this.local && this.startTime !== null ? oomCounters(meta.pid) : null;
  }
}

export class LiveRun {
  state: RunStateName = 'running';
  reason = '';
  exitCode = 0;
  finishedAt = 0;
  /** How the owner's process ended (set as the run is finalised; src/story/end.ts). */
  end: RunEnd | null = null;
  /** The owner's end as the daemon read it from /proc, waiting for a spill file's exit to finalise the run with it. */
  pendingEnd: RunEnd | null = null;
  /** The last console lines, for the end record. */
  readonly lastLines = new LastLines();
  readonly keyIndex = new Map<string, number>();
  readonly writers = new Map<string, Writer>();
  /** Writers by index, including ones that left. */
  readonly writerList: Writer[] = [];
  crashTimer: NodeJS.Timeout | null = null;
  finishArrivedAt = 0;
  /** Rows recovered from writers' crash journals (runs/journal.ts), and what could not be. */
  journalRecoveredRows = 0;
  readonly journalProblems: string[] = [];
  /** The node's sampler, for this run's view of system metrics. */
  system: SystemMetrics | null = null;
  /** Finalised while its log could not be written (a full disk): kept here until the final state is durable. */
  finalNotDurable = false;
  /** The sampling interval this run asked for (0: the daemon's). */
  sampleIntervalMs = 0;
  /** CreateRun calls for this run still being answered, and whether one was answered (see Registry.abandon). */
  createsInFlight = 0;
  createAnswered = false;
  /** The run's step progress (daemon/health/), fed as batches commit, and what the health monitor made of it. */
  readonly progress = new StepProgress();
  health: RunHealth | null = null;
  /** The create key of the call that continued this run (a retried continue gets the same attempt back). */
  attemptKey = '';
  /** The run's attempts (a continued run has more than one); the last one's end is this run's final state. */
  attempts: Attempt[];
  /** The run's histogram, image and text keys so far (metadata "media"). */
  media: MediaIndex = ownRecord() as MediaIndex;
  /** Rows of earlier attempts that a rewind superseded (kept in the log, out of the summary and default reads). */
  supersededRows = 0;

  constructor(
    readonly meta: RunMeta,
    readonly log: RecordLog,
    readonly keys: string[],
    readonly summary: RunSummary,
    readonly userSummary: Record<string, unknown>,
    readonly config: Record<string, unknown>,
  ) {
    keys.forEach((k, i) => this.keyIndex.set(k, i));
    summary.ensureKeys(keys.length);
    this.attempts = [{ n: 1, startedAt: meta.createdAt, host: meta.host, pid: meta.pid, fromStep: meta.forkedFrom ? meta.forkedFrom.step + 1 : 0 }];
  }

  /** The attempts, the last one ended with this run's final state when it has one. */
  attemptsNow(): Attempt[] {
    if (!this.final) return this.attempts;
    const last = this.attempts[this.attempts.length - 1];
    return [...this.attempts.slice(0, -1), { ...last, endedAt: this.finishedAt, state: this.state, reason: this.reason, exitCode: this.exitCode }];
  }

  get id(): string {
    return this.meta.id;
  }

  get final(): boolean {
    return FINAL_STATES.includes(this.state);
  }

  /** Run-global ids for names, appending a KEYS frame for the new ones. */
  intern(names: readonly string[]): number[] {
    const out = new Array<number>(names.length);
    const added: string[] = [];
    const first = this.keys.length;
    for (let i = 0; i < names.length; i++) {
      let id = this.keyIndex.get(names[i]);
      if (id === undefined) {
        id = this.keys.length;
        this.keys.push(names[i]);
        this.keyIndex.set(names[i], id);
        added.push(names[i]);
      }
      out[i] = id;
    }
    if (added.length > 0) {
      this.log.append(FrameType.KEYS, jsonFrame({ first, names: added }));
      this.summary.ensureKeys(this.keys.length);
    }
    return out;
  }

  addWriter(writerId: string, pid: number, host: string, rank: RankMeta | null): Writer {
    const meta: WriterMeta = { idx: this.writerList.length, writerId, pid, host, rank, joinedAt: Date.now() / 1000 };
    const w = new Writer(meta, 0);
    this.writerList.push(w);
    this.writers.set(writerId, w);
    this.log.append(FrameType.WRITER, jsonFrame(meta));
    return w;
  }

  restoreWriter(meta: WriterMeta, durableSeq: number): Writer {
    const w = new Writer(meta, durableSeq);
    w.detached = true; // until its process re-attaches
    this.writerList[meta.idx] = w;
    this.writers.set(meta.writerId, w);
    return w;
  }

  /** Appends a checked batch (writer-local ids) to the log and the summary. */
  /** Appends a checked batch to the run's log; returns the bytes appended (held in memory until the next sync). */
  appendBatch(w: Writer, seq: number, b: CheckedBatch, summaryUpdates: string[], configUpdates: string[], stepsGiven = false, consoleEntries: ConsoleEntry[] = [], media: MediaEntry[] = []): number {
    let bytes = 0;
    const global = new Uint32Array(b.keyIds.length);
    const map = w.keyMap;
    for (let i = 0; i < global.length; i++) global[i] = map[b.keyIds[i]];
    // One compact copy of the frame: the columns are views into the wire's
    // receive buffer, which would otherwise stay pinned (many times the batch's
    // own size) until the next sync, out of sight of the backpressure count.
    const parts = [Buffer.concat(encodeHistory({
      writerIdx: w.meta.idx, seq, rows: b.rows,
      steps: bytesOf(b.steps), times: bytesOf(b.times), values: bytesOf(b.values), counts: bytesOf(b.counts), keyIds: bytesOf(global),
    }))];
    if (b.rows > 0) {
      this.log.append(FrameType.HISTORY, parts);
      this.summary.add({ writerIdx: w.meta.idx, seq, rows: b.rows, steps: b.steps, times: b.times, counts: b.counts, keyIds: global, values: b.values });
      // Rank health judges the pace of training steps, never a client's own row counter.
      if (stepsGiven) this.progress.observe(b.steps, b.times, b.rows, Date.now() / 1000);
      bytes += parts.reduce((n, p) => n + p.byteLength, 0);
    }
    for (const s of summaryUpdates) {
      const obj = JSON.parse(s) as Record<string, unknown>;
      Object.assign(this.userSummary, obj);
      this.log.append(FrameType.SUMMARY, jsonFrame(obj));
      bytes += s.length;
    }
    for (const c of configUpdates) {
      const obj = JSON.parse(c) as Record<string, unknown>;
      Object.assign(this.config, obj);
      this.log.append(FrameType.CONFIG, jsonFrame(obj));
      bytes += c.length;
    }
    if (consoleEntries.length > 0) {
      this.lastLines.add(consoleEntries);
      const frame = jsonFrame({ writerIdx: w.meta.idx, seq, entries: consoleEntries });
      this.log.append(FrameType.CONSOLE, frame);
      bytes += frame.reduce((n, p) => n + p.byteLength, 0);
    }
    if (media.length > 0) {
      const frame = jsonFrame({ writerIdx: w.meta.idx, seq, entries: media });
      this.log.append(FrameType.MEDIA, frame);
      indexMedia(this.media, media);
      bytes += frame.reduce((n, p) => n + p.byteLength, 0);
    }
    if (b.rows === 0 && consoleEntries.length === 0 && media.length === 0) {
      // Nothing above carries the batch's seq (summary or config updates alone): a SEQ frame does, or a daemon
      // restarted after acknowledging it would wait for it again at the finish.
      const frame = jsonFrame({ writerIdx: w.meta.idx, seq });
      this.log.append(FrameType.SEQ, frame);
      bytes += frame.reduce((n, p) => n + p.byteLength, 0);
    }
    w.appendedSeq = seq;
    return bytes;
  }

  /** The writer's client dropped rows (its count is cumulative): kept in the log as the writer's record, and in metadata. */
  private ownerEnvironment(): Record<string, unknown> | undefined {
    const owner = this.writers.get(this.meta.ownerWriterId);
    return owner?.meta.environment ?? this.writerList.find((w) => w?.meta.environment)?.meta.environment;
  }

  /** A writer's code and environment (SetEnvironment), kept with the writer (its WRITER frame). */
  setEnvironment(w: Writer, env: Record<string, unknown>): void {
    // Once per writer: a client sends it once; more calls would only grow the log.
    if (w.meta.environment || this.final) return;
    // The long parts (a dirty tree's diff, the installed packages) are text items of the run (docs/api.md "Code
    // and environment"), not part of its metadata: a runs table of 10 000 runs would carry them all.
    const { texts, kept } = splitEnvironment(env);
    w.meta.environment = kept;
    this.log.append(FrameType.WRITER, jsonFrame(w.meta));
    if (texts.length) {
      const t = Date.now() / 1000;
      const entries: MediaEntry[] = texts.map(([key, text]) => ({ key, step: 0, t, kind: 'text', text }));
      this.log.append(FrameType.MEDIA, jsonFrame({ writerIdx: w.meta.idx, entries }));
      indexMedia(this.media, entries);
    }
  }

  /** Environments waiting for the daemon's read of their git facts (setEnvironmentWith): the run's end waits for them. */
  private readonly environmentsPending = new Set<Promise<void>>();

  /** The environment once the daemon's reads of the writer's working directory (git, packages: daemon/code) answer. */
  setEnvironmentWith(w: Writer, env: Record<string, unknown>, more: Promise<Record<string, unknown>>): void {
    const p = more.then((m) => this.setEnvironment(w, { ...env, ...m }), () => this.setEnvironment(w, env))
      .finally(() => this.environmentsPending.delete(p));
    this.environmentsPending.add(p);
  }

  /** Resolves when every pending environment is recorded, or after `ms` (git's own deadline is 2 s). */
  async environmentsSettled(ms: number): Promise<void> {
    if (this.environmentsPending.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all(this.environmentsPending), new Promise<void>((r) => (timer = setTimeout(r, ms)))]);
    clearTimeout(timer);
  }

  recordDropped(w: Writer, total: number): void {
    w.meta.droppedRows = total;
    this.log.append(FrameType.WRITER, jsonFrame(w.meta));
  }

  /** The run's lifetime and writer pids, as the node's system metrics see it. */
  span(): RunSpan {
    const writers = this.writerList.filter(Boolean).map((w) => ({ idx: w.meta.idx, pid: w.meta.pid }));
    return { createdAt: this.meta.createdAt, finishedAt: this.finishedAt, ownerPid: this.meta.pid, writers };
  }

  attachedWriters(): Writer[] {
    return [...this.writers.values()].filter((w) => !w.detached);
  }

  /** The last value logged for a metric (the alerts' rules read it: no summary is built for that). */
  latest(key: string): number | undefined {
    const id = this.keyIndex.get(key);
    return id === undefined ? undefined : this.summary.lastOf(id);
  }

  /** Summary and stats, capped (see cappedSummary): what every RunInfo carries. */
  private capped(): ReturnType<typeof cappedSummary> {
    return cappedSummary(this.summary, this.keys, this.userSummary);
  }

  metadata(stats = this.capped()): Record<string, unknown> {
    return {
      host: this.meta.host,
      pid: this.meta.pid,
      rank: this.meta.rank,
      // A writer's environment once: the owner's as `environment` below, another writer's in its entry.
      writers: this.writerList.filter(Boolean).map((w) => {
        const { environment, ...rest } = w.meta;
        return { ...rest, ...(environment && environment !== this.ownerEnvironment() ? { environment } : {}), attached: !w.detached };
      }),
      // The code and environment of the run's owner (each writer's is in `writers`).
      ...(this.ownerEnvironment() ? { environment: this.ownerEnvironment() } : {}),
      stats: stats.stats,
      ...(stats.capped ? { summaryCapped: stats.capped } : {}),
      stepsBackwards: this.summary.stepsBackwards,
      droppedRows: this.writerList.reduce((n, w) => n + (w?.meta.droppedRows ?? 0), 0),
      lastStep: this.summary.lastStep,
      ...(this.attempts.length > 1 ? { attempts: this.attemptsNow() } : {}),
      ...(this.supersededRows > 0 ? { supersededRows: this.supersededRows } : {}),
      ...(this.meta.forkedFrom ? { forkedFrom: this.meta.forkedFrom } : {}),
      ...(this.meta.fromStore ? { fromStore: this.meta.fromStore } : {}),
      ...(this.journalRecoveredRows || this.journalProblems.length ? { journal: { recoveredRows: this.journalRecoveredRows, problems: this.journalProblems.slice(-20) } } : {}),
      ...(this.health ? { health: this.health } : {}),
      ...(this.end ? { end: this.end } : {}),
      ...(Object.keys(this.media).length ? { media: this.media } : {}),
      system: this.system ? { gpus: this.system.gpus(), last: this.system.lastForRun(runWindow(this.span())) } : null,
    };
  }

  info(withToken = false): RunInfo {
    const m = this.meta;
    const capped = this.capped();
    return {
      id: m.id, project: m.project, name: m.name, group: m.group, jobType: m.jobType, tags: m.tags,
      state: this.state, stateReason: this.reason, createdAt: m.createdAt, finishedAt: this.finishedAt, exitCode: this.exitCode,
      configJson: toJson(this.config), summaryJson: toJson(capped.summary), metadataJson: toJson(this.metadata(capped)),
      historyRows: this.summary.rows, writers: this.attachedWriters().length,
      runToken: withToken ? m.runToken : '', mode: m.mode, notes: m.notes, ownerWriterId: withToken ? m.ownerWriterId : '',
    };
  }
}
