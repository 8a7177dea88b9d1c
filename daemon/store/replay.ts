// Rebuilds a run's state from its record log: used at daemon start for runs
// that were open when it stopped, and to rebuild the index.
import { RecordLog } from './record-log.js';
import { FrameType, decodeHistory, parseFrameJson, type Attempt, type AttemptFrame, type BaseFrame, type MediaFrame, type MediaIndex, indexMedia, frameSeq, type FinalState, type RunMeta, type WriterMeta } from './format.js';
import { RunSummary } from './summary.js';
import { ownRecord } from '../../src/json.js';
import { scanFrames, type ScanResult } from '../../src/frames.js';
import { Timeline, currentRows } from './timeline.js';

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
}

export function replayLog(file: string, keepOpen: true): { run: ReplayedRun; log: RecordLog };
export function replayLog(file: string, keepOpen: false): { run: ReplayedRun; log: null };
export function replayLog(file: string, keepOpen: boolean): { run: ReplayedRun; log: RecordLog | null } {
  let meta: RunMeta | null = null;
  const keys: string[] = [];
  const writers: WriterMeta[] = [];
  const maxSeq: number[] = [];
  const summary = new RunSummary();
  const userSummary = ownRecord();
  const config = ownRecord();
  let final: FinalState | null = null;
  const attempts: Attempt[] = [];
  const media = ownRecord() as MediaIndex;
  let baseSuperseded = 0;
  const onFrame = (type: number, p: Uint8Array) => {
    switch (type) {
      case FrameType.RUN:
        meta = parseFrameJson<RunMeta>(p);
        Object.assign(config, meta.config);
        attempts.length = 0;
        attempts.push({ n: 1, startedAt: meta.createdAt, host: meta.host, pid: meta.pid, fromStep: meta.forkedFrom ? meta.forkedFrom.step + 1 : 0 });
        break;
      case FrameType.KEYS: {
        const k = parseFrameJson<{ first: number; names: string[] }>(p);
        for (let i = 0; i < k.names.length; i++) keys[k.first + i] = k.names[i];
        summary.ensureKeys(keys.length);
        break;
      }
      case FrameType.WRITER: {
        const w = parseFrameJson<WriterMeta>(p);
        writers[w.idx] = w;
        maxSeq[w.idx] ??= 0;
        break;
      }
      case FrameType.HISTORY: {
        const b = decodeHistory(p);
        summary.add(b);
        if (b.writerIdx < 0xffffffff) maxSeq[b.writerIdx] = Math.max(maxSeq[b.writerIdx] ?? 0, b.seq);
        break;
      }
      case FrameType.SUMMARY:
        Object.assign(userSummary, parseFrameJson<Record<string, unknown>>(p));
        break;
      case FrameType.CONFIG:
        Object.assign(config, parseFrameJson<Record<string, unknown>>(p));
        break;
      case FrameType.STATE: {
        const st = parseFrameJson<FinalState>(p);
        final = st.state === 'running' ? null : st; // a resumed run is open again
        const last = attempts[attempts.length - 1];
        if (last && final) Object.assign(last, { endedAt: st.finishedAt, state: st.state, reason: st.reason, exitCode: st.exitCode });
        else if (last) for (const k of ['endedAt', 'state', 'reason', 'exitCode'] as const) delete last[k];
        break;
      }
      case FrameType.ATTEMPT: {
        const a = parseFrameJson<AttemptFrame>(p);
        if (meta) meta = { ...(meta as RunMeta), runToken: a.runToken, ownerWriterId: a.ownerWriterId, host: a.host, pid: a.pid, rank: a.rank };
        attempts.push(attemptOf(a));
        final = null;
        break;
      }
      case FrameType.CONSOLE: {
        // Console output is read by ReadConsole (store.readConsole); only its batch's seq is the run's state
        // (a batch of console output alone was stored: a resend of it is a duplicate).
        const f = frameSeq(p);
        if (f) maxSeq[f.writerIdx] = Math.max(maxSeq[f.writerIdx] ?? 0, f.seq);
        break;
      }
      case FrameType.MEDIA: {
        const f = parseFrameJson<MediaFrame>(p);
        indexMedia(media, f.entries);
        if (typeof f.seq === 'number') maxSeq[f.writerIdx] = Math.max(maxSeq[f.writerIdx] ?? 0, f.seq);
        break;
      }
      case FrameType.BASE: {
        const b = parseFrameJson<BaseFrame>(p);
        summary.restoreBase(b);
        baseSuperseded += b.supersededRows;
        break;
      }
      default:
        break; // a newer frame type: skipped, still kept in the file
    }
  };
  let log: RecordLog | null = null;
  let scan: ScanResult;
  if (keepOpen) {
    const opened = RecordLog.open(file, onFrame);
    log = opened.log;
    scan = opened.scan;
  } else {
    scan = scanFrames(file, onFrame); // read-only: the file is left exactly as it is
  }
  if (!meta) {
    log?.close();
    throw new Error(`store: ${file} has no run record; it is not a logd run log`);
  }
  // A rewound run: the summary is that of the latest timeline, so a second
  // pass (only for such runs) leaves the superseded rows out of it.
  const rewound = timelineSummary(file, attempts, keys.length);
  const current = rewound?.summary ?? summary;
  const supersededRows = (rewound?.supersededRows ?? 0) + baseSuperseded;
  return { run: { meta, keys, writers, maxSeq, summary: current, userSummary, config, final, attempts, media, supersededRows, scan }, log };
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
