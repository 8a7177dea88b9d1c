// Rebuilds a run's state from its record log: used at daemon start for runs
// that were open when it stopped, to rebuild the index, and to continue a run.
// A log its daemon closed ends with a pointer to a checkpoint of that state
// (checkpoint.ts): the replay then starts from the checkpoint and reads only
// the frames after it. Without one (an old log, a daemon that died), or with
// one that fails a check, it reads every frame, as it always did; both ways
// give the same state.
import fs from 'node:fs';
import { RecordLog } from './record-log.js';
import { FrameType, decodeHistory, parseFrameJson, type Attempt, type AttemptFrame, type BaseFrame, type RunEdit, type MediaFrame, type MediaIndex, indexMedia, frameSeq, type FinalState, type RunMeta, type WriterMeta } from './format.js';
import { RunSummary } from './summary.js';
import { ownRecord } from '../../src/json.js';
import { scanFrames, type ScanResult } from '../../src/frames.js';
import { Timeline, currentRows } from './timeline.js';
import { findCheckpoint, type CheckpointData, type CheckpointRef } from './checkpoint.js';

export interface ReplayedRun {
  meta: RunMeta;
  keys: string[];
  writers: WriterMeta[];
  /** Highest durable seq per writer index. */
  maxSeq: number[];
  summary: RunSummary;
  userSummary: Record<string, unknown>;
  config: Record<string, unknown>;
  final: FinalState | null;
  /** The run's attempts, the first its creation (see Attempt). */
  attempts: Attempt[];
  /** The run's histogram, image and text keys (MEDIA frames). */
  media: MediaIndex;
  /** Rows a later attempt's rewind superseded (left out of `summary`). */
  supersededRows: number;
  scan: ScanResult;
  /** The offset of the checkpoint the replay started from; null: it read every frame. */
  fromCheckpoint: number | null;
  /** Why the log's checkpoint was not used (it failed a check); null when there was none or it was used. */
  checkpointProblem: string | null;
}

/**
 * The state the frames of a log build, one frame at a time. A whole read
 * starts it empty; a read from a checkpoint starts it from the checkpoint's
 * state (fromCheckpoint) and reads on from there.
 */
export class ReplayState {
  meta: RunMeta | null = null;
  keys: string[] = [];
  writers: WriterMeta[] = [];
  maxSeq: number[] = [];
  /**
   * Read whole: every row (the latest timeline's rows only once finish()ed).
   * From a checkpoint: the latest timeline's rows all along.
   */
  summary = new RunSummary();
  userSummary = ownRecord();
  config = ownRecord();
  final: FinalState | null = null;
  attempts: Attempt[] = [];
  media = ownRecord() as MediaIndex;
  /** Rows a rewind left out of `summary`. */
  timelineSuperseded = 0;
  /** Rows the shared store's earlier attempts superseded (BASE frames). */
  baseSuperseded = 0;
  /** Which attempt each writer belongs to, as the frames so far place it. */
  private placement = Timeline.of(null, true)!;
  /** From a checkpoint of a rewound run: the timeline the rows read after it are taken through. */
  private timeline: Timeline | null = null;
  private fromCheckpoint = false;
  /** From a checkpoint: an attempt after it rewound, so rows before it may be superseded now (finish() reads the whole log). */
  private rewoundAfter = false;
  /** From a checkpoint: a RUN frame after it, which starts the state over: replayLog reads the whole log instead. */
  restarted = false;

  static fromCheckpoint(d: CheckpointData): ReplayState {
    const s = new ReplayState();
    Object.assign(s, { meta: d.meta, keys: d.keys, writers: d.writers, maxSeq: d.maxSeq, summary: RunSummary.restore(d.summary), final: d.final, attempts: d.attempts, timelineSuperseded: d.timelineSuperseded, baseSuperseded: d.baseSuperseded });
    Object.assign(s.userSummary, d.userSummary);
    Object.assign(s.config, d.config);
    Object.assign(s.media, d.media);
    s.placement = Timeline.of(null, true, d.placement)!;
    s.timeline = Timeline.of(d.attempts, false, d.placement);
    s.fromCheckpoint = true;
    return s;
  }

  /** What a checkpoint of this state holds (after finish()). */
  toCheckpoint(scan: Pick<ScanResult, 'frames' | 'damaged'>): CheckpointData {
    return {
      meta: this.meta!, keys: this.keys, writers: this.writers, maxSeq: this.maxSeq, summary: this.summary.snapshot(),
      userSummary: this.userSummary, config: this.config, final: this.final, attempts: this.attempts, media: this.media,
      timelineSuperseded: this.timelineSuperseded, baseSuperseded: this.baseSuperseded, placement: this.placement.placement(),
      frames: scan.frames, damaged: scan.damaged,
    };
  }

  readonly onFrame = (type: number, p: Uint8Array): void => {
    if (type === FrameType.RUN || type === FrameType.ATTEMPT || type === FrameType.WRITER) {
      this.placement.onFrame(type, p);
      this.timeline?.onFrame(type, p);
    }
    switch (type) {
      case FrameType.RUN: {
        if (this.fromCheckpoint) this.restarted = true; // a second RUN frame: read the whole log to know what it does
        this.meta = parseFrameJson<RunMeta>(p);
        const meta = this.meta;
        Object.assign(this.config, meta.config);
        this.attempts.length = 0;
        this.attempts.push({ n: 1, startedAt: meta.createdAt, host: meta.host, pid: meta.pid, fromStep: meta.forkedFrom ? meta.forkedFrom.step + 1 : 0 });
        break;
      }
      case FrameType.KEYS: {
        const k = parseFrameJson<{ first: number; names: string[] }>(p);
        for (let i = 0; i < k.names.length; i++) this.keys[k.first + i] = k.names[i];
        this.summary.ensureKeys(this.keys.length);
        break;
      }
      case FrameType.WRITER: {
        const w = parseFrameJson<WriterMeta>(p);
        this.writers[w.idx] = w;
        this.maxSeq[w.idx] ??= 0;
        break;
      }
      case FrameType.HISTORY: {
        const b = decodeHistory(p);
        if (this.timeline) {
          const kept = currentRows(b, this.timeline.supersededRows(b));
          this.timelineSuperseded += b.rows - kept.rows;
          this.summary.add(kept);
        } else this.summary.add(b);
        if (b.writerIdx < 0xffffffff) this.maxSeq[b.writerIdx] = Math.max(this.maxSeq[b.writerIdx] ?? 0, b.seq);
        break;
      }
      case FrameType.SUMMARY:
        Object.assign(this.userSummary, parseFrameJson<Record<string, unknown>>(p));
        break;
      case FrameType.CONFIG:
        Object.assign(this.config, parseFrameJson<Record<string, unknown>>(p));
        break;
      case FrameType.STATE: {
        const st = parseFrameJson<FinalState>(p);
        this.final = st.state === 'running' ? null : st; // a resumed run is open again
        const last = this.attempts[this.attempts.length - 1];
        if (last && this.final) Object.assign(last, { endedAt: st.finishedAt, state: st.state, reason: st.reason, exitCode: st.exitCode });
        else if (last) for (const k of ['endedAt', 'state', 'reason', 'exitCode'] as const) delete last[k];
        break;
      }
      case FrameType.ATTEMPT: {
        const a = parseFrameJson<AttemptFrame>(p);
        if (this.meta) this.meta = { ...this.meta, runToken: a.runToken, ownerWriterId: a.ownerWriterId, host: a.host, pid: a.pid, rank: a.rank };
        this.attempts.push(attemptOf(a));
        this.final = null;
        if (this.fromCheckpoint && typeof a.resumedFromStep === 'number') this.rewoundAfter = true;
        break;
      }
      case FrameType.CONSOLE: {
        // Console output is read by ReadConsole (store.readConsole); only its batch's seq is the run's state
        // (a batch of console output alone was stored: a resend of it is a duplicate).
        const f = frameSeq(p);
        if (f) this.maxSeq[f.writerIdx] = Math.max(this.maxSeq[f.writerIdx] ?? 0, f.seq);
        break;
      }
      case FrameType.MEDIA: {
        const f = parseFrameJson<MediaFrame>(p);
        indexMedia(this.media, f.entries);
        if (typeof f.seq === 'number') this.maxSeq[f.writerIdx] = Math.max(this.maxSeq[f.writerIdx] ?? 0, f.seq);
        break;
      }
      case FrameType.SEQ: {
        // A batch that stored nothing else carrying its seq (summary or config updates alone).
        const f = parseFrameJson<{ writerIdx: number; seq: number }>(p);
        const ok = Number.isInteger(f.writerIdx) && f.writerIdx >= 0 && f.writerIdx < this.writers.length && Number.isSafeInteger(f.seq);
        if (ok) this.maxSeq[f.writerIdx] = Math.max(this.maxSeq[f.writerIdx] ?? 0, f.seq);
        break;
      }
      case FrameType.EDIT: {
        // A rename, tag or note after the run was made: the listing fields it sets (an index rebuild keeps them).
        const e = parseFrameJson<RunEdit>(p);
        if (this.meta) this.meta = { ...this.meta, ...(typeof e.name === 'string' ? { name: e.name } : {}), ...(Array.isArray(e.tags) ? { tags: e.tags } : {}), ...(typeof e.notes === 'string' ? { notes: e.notes } : {}) };
        break;
      }
      case FrameType.BASE: {
        const b = parseFrameJson<BaseFrame>(p);
        this.summary.restoreBase(b);
        this.baseSuperseded += b.supersededRows;
        break;
      }
      default:
        break; // CHECKPOINT, CHECKPOINT_AT (what replay makes, not what it reads), or a newer frame type: skipped, still kept in the file
    }
  };

  /**
   * After the last frame: a rewound run's summary is that of its latest
   * timeline, so one more pass over the log (only for such runs) leaves the
   * superseded rows out of it. From a checkpoint the summary is that already,
   * unless an attempt after the checkpoint rewound rows before it.
   */
  finish(file: string): void {
    if (!this.needsTimelinePass) return;
    const rewound = timelineSummary(file, this.attempts, this.keys.length)!;
    this.summary = rewound.summary;
    this.timelineSuperseded = rewound.supersededRows;
  }

  /** Whether finish() reads the whole log once more (a rewound run, unless its checkpoint is of its latest timeline). */
  get needsTimelinePass(): boolean {
    return this.fromCheckpoint ? this.rewoundAfter : Timeline.rewinds(this.attempts);
  }

  run(file: string, scan: ScanResult, fromCheckpoint: number | null, checkpointProblem: string | null): ReplayedRun {
    if (!this.meta) throw new Error(`store: ${file} has no run record; it is not a logd run log`);
    const { meta, keys, writers, maxSeq, summary, userSummary, config, final, attempts, media } = this;
    return { meta, keys, writers, maxSeq, summary, userSummary, config, final, attempts, media, supersededRows: this.timelineSuperseded + this.baseSuperseded, scan, fromCheckpoint, checkpointProblem };
  }
}

/**
 * A run's state from its log. `keepOpen`: the log is opened for appends (a
 * torn tail cut, RecordLog.open). `at`: the checkpoint to start from, for a
 * log that does not end with a pointer to one yet (a log being closed:
 * seal.ts). `hint`: see ReplayOptions. `everyFrame`: no checkpoint, every
 * frame read (a check of one).
 */
export function replayLog(file: string, keepOpen: true, opts?: ReplayOptions): { run: ReplayedRun; log: RecordLog; state: ReplayState };
export function replayLog(file: string, keepOpen: false, opts?: ReplayOptions): { run: ReplayedRun; log: null; state: ReplayState };
export function replayLog(file: string, keepOpen: boolean, opts: ReplayOptions = {}): { run: ReplayedRun; log: RecordLog | null; state: ReplayState } {
  const at = opts.at ?? null;
  const limit = opts.maxReadBytes ?? Infinity;
  const size = limit < Infinity ? fs.statSync(file).size : 0;
  const over = (bytes: number, what: string) => {
    if (bytes > limit) throw new ReadLimitExceeded(`${what}: ${bytes} bytes to read, more than ${limit}`);
  };
  let log: RecordLog | null = null;
  let problem: string | null = null;
  let tornBytes = 0;
  let found = opts.everyFrame ? null : findCheckpoint(file, at);
  if (!found && opts.hint) {
    found = findCheckpoint(file, opts.hint);
    if (found && 'problem' in found) found = null; // a hint out of date (the log was rewritten or cut): not the log's problem
  }
  if (found && 'problem' in found) problem = found.problem;
  else if (found) {
    over(size - found.resumeAt, 'the frames after the checkpoint');
    const state = ReplayState.fromCheckpoint(found.data);
    let tail: ScanResult;
    if (keepOpen) ({ log, scan: tail } = RecordLog.open(file, state.onFrame, found.resumeAt));
    else tail = scanFrames(file, state.onFrame, undefined, found.resumeAt);
    if (!state.restarted) {
      try {
        if (state.needsTimelinePass) over(size, 'a rewind after the checkpoint: the whole log');
        state.finish(file);
        const scan: ScanResult = { validBytes: tail.validBytes, tornBytes: tail.tornBytes, frames: found.data.frames + 1 + tail.frames, damaged: [...found.data.damaged, ...tail.damaged] };
        if (log) log.checkpoint = { ...found.ref, sealedAt: found.pointed && tail.tornBytes === 0 ? tail.validBytes : 0 };
        return { run: state.run(file, scan, found.ref.offset, null), log, state };
      } catch (e) {
        log?.close();
        throw e;
      }
    }
    problem = `a RUN frame follows the checkpoint at offset ${found.ref.offset}`;
    tornBytes = tail.tornBytes; // cut already, when the log was opened for appends
  }
  // Every frame, from the first.
  if (!log) over(size, 'every frame');
  const state = new ReplayState();
  let scan: ScanResult;
  if (log) scan = { ...scanFrames(file, state.onFrame), tornBytes };
  else if (keepOpen) ({ log, scan } = RecordLog.open(file, state.onFrame));
  else scan = scanFrames(file, state.onFrame); // read-only: the file is left exactly as it is
  try {
    state.finish(file);
    return { run: state.run(file, scan, null, problem), log, state };
  } catch (e) {
    log?.close();
    throw e;
  }
}

export interface ReplayOptions {
  at?: CheckpointRef | null;
  /** Where the log had a checkpoint when it was last opened (the index remembers it): tried when the log does not end with a pointer. */
  hint?: CheckpointRef | null;
  everyFrame?: boolean;
  /** Throw ReadLimitExceeded rather than read a longer stretch of the log than this (the frames after a checkpoint, or the whole log). */
  maxReadBytes?: number;
}

export class ReadLimitExceeded extends Error {
  override name = 'ReadLimitExceeded';
}

/**
 * The summary of a log's latest timeline under these attempts (one more pass
 * over the log), and how many rows it leaves out; null when no attempt
 * rewound (the plain summary is the timeline's).
 */
export function timelineSummary(file: string, attempts: readonly Attempt[], keyCount: number): { summary: RunSummary; supersededRows: number } | null {
  const timeline = Timeline.of(attempts);
  if (!timeline) return null;
  const summary = new RunSummary();
  summary.ensureKeys(keyCount);
  let supersededRows = 0;
  scanFrames(file, (type, p) => {
    timeline.onFrame(type, p);
    if (type === FrameType.BASE) summary.restoreBase(parseFrameJson<BaseFrame>(p)); // rows held by the shared store: already their latest timeline
    if (type !== FrameType.HISTORY) return;
    const b = decodeHistory(p);
    const kept = currentRows(b, timeline.supersededRows(b));
    supersededRows += b.rows - kept.rows;
    summary.add(kept);
  });
  return { summary, supersededRows };
}

/** An ATTEMPT frame's attempt, without its owner's secrets. */
export function attemptOf(a: AttemptFrame): Attempt {
  return { n: a.n, startedAt: a.startedAt, host: a.host, pid: a.pid, fromStep: a.fromStep, ...(typeof a.resumedFromStep === 'number' ? { resumedFromStep: a.resumedFromStep } : {}) };
}
