// Reading a run log's history, as a plain function of its path: the store
// reads it so on the daemon's main thread for small logs, and daemon/reads
// reads it so on a worker thread for large ones (a dashboard view of a run
// with 200 000 metric names must not hold the event loop the trainers need).
import { scanFrames, type DamagedRegion } from '../../src/frames.js';
import { FrameType, decodeHistory, parseFrameJson, type HistoryBatch } from './format.js';
import { Timeline, currentRows, splitBySuperseded, type AttemptRewind } from './timeline.js';

/** What a history reader gets with each batch: the rows' attempt, and whether a later rewind superseded them. */
export interface RowsMark { attempt: number; superseded: boolean }
export type HistoryChunkFn = (batch: HistoryBatch, newKeys: string[], firstKeyId: number, mark: RowsMark) => void;
/** Which rows a history read gives: see Store.readHistory. */
export interface HistoryView { attempts?: readonly AttemptRewind[] | null; allAttempts?: boolean }

/** A stored batch as a view gives it: its current rows, or with `all` every row in parts marked superseded or not. */
export function viewOf(b: HistoryBatch, timeline: Timeline | null, all: boolean): Array<{ batch: HistoryBatch; mark: RowsMark }> {
  const attempt = timeline ? timeline.attemptOf(b.writerIdx) : 0;
  if (!timeline) return [{ batch: b, mark: { attempt, superseded: false } }];
  const mask = timeline.supersededRows(b);
  if (!all) return [{ batch: currentRows(b, mask), mark: { attempt, superseded: false } }];
  return splitBySuperseded(b, mask).map((x) => ({ batch: x.batch, mark: { attempt, superseded: x.superseded } }));
}

/**
 * Every history batch of the log at `file` in arrival order, as Store.readHistory gives them. Returns the
 * key dictionary, the rows read and the damaged regions the scan skipped (for StoreProblems.noteDamage).
 */
export function readLogHistory(file: string, onChunk: HistoryChunkFn, view: HistoryView = {}): { keys: string[]; rows: number; damaged: DamagedRegion[] } {
  const keys: string[] = [];
  let reported = 0;
  let rows = 0;
  const timeline = Timeline.of(view.attempts, !!view.allAttempts);
  const scan = scanFrames(file, (type, p) => {
    timeline?.onFrame(type, p);
    if (type === FrameType.KEYS) {
      const k = parseFrameJson<{ first: number; names: string[] }>(p);
      for (let i = 0; i < k.names.length; i++) keys[k.first + i] = k.names[i];
    } else if (type === FrameType.HISTORY) {
      const b = decodeHistory(p);
      rows += b.rows;
      for (const part of viewOf(b, timeline, !!view.allAttempts)) {
        onChunk(part.batch, keys.slice(reported), reported, part.mark);
        reported = keys.length;
      }
    }
  });
  return { keys, rows, damaged: scan.damaged };
}
