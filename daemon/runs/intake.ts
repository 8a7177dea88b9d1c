// A record batch's path from a writer's stream (or a spill file, or a crash
// journal) to the run's log: checked (runs/validate.ts), its new names
// interned, its images written to files, then appended. The group commit
// (runs/commit.ts) makes it durable and acknowledges it.
import path from 'node:path';
import { writeImage } from '../store/media.js';
import type { MediaEntry } from '../store/format.js';
import type { LiveRun, Writer } from './run.js';
import type { Store } from '../store/store.js';
import type { Backpressure } from './backpressure.js';
import { checkBatch, checkConsole, checkMedia, type CheckedMedia } from './validate.js';
import { parseJsonObject } from '../../src/json.js';
import type { RecordBatchMsg } from '../../src/wire.js';
import { ack, type BatchMark } from './commit.js';

/** What a batch's intake needs of the daemon (the Registry). */
export interface IntakeHost {
  readonly store: Store;
  readonly backpressure: Backpressure;
  /** Rows stored since the daemon started. */
  recordsStored: number;
  log(line: string): void;
  /** The daemon had activity (its idle timer starts again). */
  touch(): void;
  /** A commit round will make what was appended durable. */
  scheduleCommit(): void;
}

/** Handles one batch of writer `w` of `run`; returns an error text when the batch is refused. */
export function takeBatch(reg: IntakeHost, run: LiveRun, w: Writer, b: RecordBatchMsg): string | null {
  w.lastSeen = Date.now();
  if (run.final) return `run ${run.id} is ${run.state}; the batch was not stored`;
  // Checked before the resend test: a seq of 0 or past 2^53 is neither a
  // resend nor a new batch, and must not move the writer's position.
  if (!Number.isSafeInteger(b.seq) || b.seq < 1) return `seq ${b.seq} must be an integer from 1 to 2^53-1`;
  if (b.seq <= w.appendedSeq) {
    // A resend of something already appended: acknowledge it once durable.
    if (b.seq <= w.durableSeq) ack(w, w.durableSeq);
    return null;
  }
  const checked = checkBatch(b, w.keyMap.length, (id) => run.keys[w.keyMap[id]] ?? `#${id}`);
  if (typeof checked === 'string') return refuse(w, b, checked);
  const consoleEntries = checkConsole(b.consoleJson);
  if (typeof consoleEntries === 'string') return refuse(w, b, consoleEntries);
  const media = checkMedia(b.media);
  if (typeof media === 'string') return refuse(w, b, media);
  // Dictionary entries: repeats must match, the rest extend it.
  for (let i = 0; i < b.newKeys.length; i++) {
    const localId = b.newKeysFirst + i;
    if (localId < w.keyMap.length) {
      if (run.keys[w.keyMap[localId]] !== b.newKeys[i]) {
        return refuse(w, b, `key id ${localId} is already ${JSON.stringify(run.keys[w.keyMap[localId]])}, not ${JSON.stringify(b.newKeys[i])}`);
      }
    }
  }
  const fresh = b.newKeys.slice(Math.max(0, w.keyMap.length - b.newKeysFirst));
  if (fresh.length > 0) w.keyMap.push(...run.intern(fresh));
  let summaryUpdates: string[];
  let configUpdates: string[];
  try {
    summaryUpdates = b.summaryJson.map((s) => JSON.stringify(parseJsonObject(s, 'summary update')));
    configUpdates = b.configJson.map((s) => JSON.stringify(parseJsonObject(s, 'config update')));
  } catch (e) {
    return refuse(w, b, (e as Error).message);
  }
  const bytes = run.appendBatch(w, b.seq, checked, summaryUpdates, configUpdates, !!b.stepsGiven, consoleEntries, storeMedia(reg, run, media));
  if ((b.droppedRows ?? 0) > (w.meta.droppedRows ?? 0)) run.recordDropped(w, b.droppedRows!);
  run.log.mark({ w, seq: b.seq, bytes } satisfies BatchMark);
  reg.backpressure.appended(w, bytes);
  reg.recordsStored += checked.rows;
  reg.touch();
  reg.scheduleCommit();
  return null;
}

/**
 * A batch's media as the MEDIA frame keeps them: an image's bytes go to a
 * file first (fsynced: the frame that names it is durable only after it).
 * An image the disk refuses keeps its entry, with `lost` saying why, and
 * nothing else of the batch is lost.
 */
function storeMedia(reg: IntakeHost, run: LiveRun, media: CheckedMedia[]): MediaEntry[] {
  const out: MediaEntry[] = [];
  for (const m of media) {
    if (m.kind !== 'image') {
      out.push(m as MediaEntry);
      continue;
    }
    const { data, ...entry } = m;
    const e: MediaEntry = { ...entry, bytes: data!.byteLength };
    try {
      e.sha256 = writeImage(path.dirname(reg.store.logPath(run.id)), data!, m.format!);
    } catch (err) {
      e.lost = `the image could not be stored: ${(err as Error).message}`;
      reg.log(`server: run ${run.id}: image ${JSON.stringify(m.key)} at step ${m.step} lost: ${(err as Error).message}`);
    }
    out.push(e);
  }
  return out;
}

/**
 * A refused batch counts as handled (a resend must not retry it, and the
 * writer's finish waits for its seq) only when it is the next one: a
 * refused seq far ahead must not make the daemon take the writer's later,
 * valid batches for resends, acknowledging them without storing them.
 */
function refuse(w: Writer, b: RecordBatchMsg, why: string): string {
  if (b.seq === w.appendedSeq + 1) {
    // Nothing of it is stored, so when all before it is durable it is "durable"
    // too: a finish whose last batch was refused must not wait for a commit
    // round that nothing else would start.
    if (w.durableSeq === w.appendedSeq) w.durableSeq = b.seq;
    w.appendedSeq = b.seq;
  }
  return why;
}
