// A fork (init(fork_from=(run, S))): a new run whose log starts as the
// daemon's copy of the source run's latest timeline up to and including step
// S: its key dictionary, its writers (same indices, so `_writer` and ranks
// still mean what they meant), its rows, and its config. The new log's RUN
// frame names the source (`forkedFrom`). Console output, media and
// summary.update() values are not copied: they belong to the source's
// processes, not to the history the fork continues.
import { RecordLog } from './record-log.js';
import { replayLog } from './replay.js';
import { FrameType, decodeHistory, encodeHistory, jsonFrame, type RunMeta, type WriterMeta } from './format.js';
import { RunSummary } from './summary.js';
import { Timeline, currentRows } from './timeline.js';
import { scanFrames } from '../../src/frames.js';
import { bytesOf } from '../../src/wire.js';

/** A fork the source cannot give: the step lies beyond its last stored step. */
export class ForkRefused extends Error {
  override name = 'ForkRefused';
}

export interface ForkedLog {
  meta: RunMeta;
  log: RecordLog;
  keys: string[];
  writers: WriterMeta[];
  maxSeq: number[];
  summary: RunSummary;
  config: Record<string, unknown>;
}

/**
 * The fork's log: checks the source's step against the last step of its
 * latest timeline (ForkRefused), then `create()`s the new log (with `meta`'s
 * config laid over the source's) and appends its first frames: RUN, the
 * source's keys and writers, and its current rows with a step up to `step`.
 * Appended, not yet synced: the caller's group commit makes them durable
 * before the run is answered.
 */
export function forkLog(sourceFile: string, meta: RunMeta & { forkedFrom: { runId: string; step: number } }, create: () => RecordLog): ForkedLog {
  const { runId: sourceId, step } = meta.forkedFrom;
  const src = replayLog(sourceFile, false).run;
  if (step > src.summary.lastStep) {
    throw new ForkRefused(src.summary.lastStep < 0
      ? `fork_from step ${step}: run ${sourceId} has no stored rows to fork; fork a run that logged steps`
      : `fork_from step ${step} is beyond run ${sourceId}'s last stored step ${src.summary.lastStep}; fork at a step up to ${src.summary.lastStep}`);
  }
  const config = { ...src.config, ...meta.config };
  const m: RunMeta = { ...meta, config };
  const log = create();
  const timeline = Timeline.of(src.attempts);
  log.append(FrameType.RUN, jsonFrame(m));
  if (src.keys.length > 0) log.append(FrameType.KEYS, jsonFrame({ first: 0, names: src.keys }));
  const writers = src.writers.filter(Boolean);
  for (const w of writers) log.append(FrameType.WRITER, jsonFrame(w));
  const summary = new RunSummary();
  summary.ensureKeys(src.keys.length);
  const maxSeq: number[] = [];
  scanFrames(sourceFile, (type, p) => {
    timeline?.onFrame(type, p);
    if (type !== FrameType.HISTORY) return;
    const b = decodeHistory(p);
    if (b.writerIdx === 0xffffffff) return;
    const superseded = timeline?.supersededRows(b) ?? null;
    let mask: Uint8Array | null = null;
    for (let r = 0; r < b.rows; r++) {
      if ((superseded && superseded[r]) || b.steps[r] > step) (mask ??= new Uint8Array(b.rows))[r] = 1;
    }
    const kept = currentRows(b, mask);
    if (kept.rows === 0) return;
    // One compact copy: the columns are views into the scan's buffer.
    log.append(FrameType.HISTORY, [Buffer.concat(encodeHistory({
      writerIdx: kept.writerIdx, seq: kept.seq, rows: kept.rows,
      steps: bytesOf(kept.steps), times: bytesOf(kept.times), values: bytesOf(kept.values), counts: bytesOf(kept.counts), keyIds: bytesOf(kept.keyIds),
    }))]);
    summary.add(kept);
    maxSeq[kept.writerIdx] = Math.max(maxSeq[kept.writerIdx] ?? 0, kept.seq);
  });
  return { meta: m, log, keys: [...src.keys], writers, maxSeq, summary, config };
}
