// ReadHistory answers, streamed to the reader with bounded memory, and for a
// large log read on a worker thread (read-worker.ts) so that the daemon's event
// loop stays free for what trainers ask (init(), log batches, finish). A small
// log is read inline: starting a thread would cost more than the read.
import fs from 'node:fs';
import { Worker } from 'node:worker_threads';
import type { HistoryChunkMsg } from '../../src/wire.js';
import { readLogHistory, type HistoryView } from '../store/history-read.js';
import type { DamagedRegion } from '../../src/frames.js';
import { HistoryAnswer, TooManyMetrics, type HistoryAsk } from './chunks.js';
import { CREDITS, CANCELLED, type ReadJob, type ReadMessage } from './protocol.js';

/** A log larger than this is read on a worker thread. */
export const OFF_THREAD_BYTES = 4 * 1024 * 1024;
/** Chunks a worker may have posted that the reader has not taken yet. */
const WINDOW = 8;
/** Read workers at once; later reads wait for one to end (each is a thread and its read's memory). */
const MAX_WORKERS = 2;
/** Reads waiting for a worker; past this many a read is refused at once (a flood of views). */
const MAX_WAITING = 64;
/**
 * The longest a read may hold its worker: a reader that stops reading (and gave its call no deadline) would
 * otherwise keep one of the MAX_WORKERS for ever. Past it the read ends with an error that says so.
 */
const READ_BUDGET_MS = 120_000;

export { TooManyMetrics };

/**
 * Where the answer goes: `write` resolves once the chunk is taken (the stream drained); `cancelled` ends the read.
 * A chunk is a message, or its bytes already encoded (a read worker's, encode-chunk.ts), which gRPC sends as
 * they are (src/proto.ts).
 */
export interface HistorySink { write(c: HistoryChunkMsg | Uint8Array): Promise<void>; cancelled(): boolean }

export class ReadsBusy extends Error {
  override name = 'ReadsBusy';
}

let running = 0;
const waiting: Array<() => void> = [];

async function slot(): Promise<() => void> {
  if (running >= MAX_WORKERS) {
    if (waiting.length >= MAX_WAITING) throw new ReadsBusy(`${MAX_WAITING} history reads are already waiting for the daemon; try again shortly`);
    await new Promise<void>((r) => waiting.push(r));
  }
  running++;
  let freed = false;
  return () => {
    if (freed) return;
    freed = true;
    running--;
    waiting.shift()?.();
  };
}

/**
 * Streams the history of the log at `file` to `sink`. Returns the rows read and the damaged regions the read
 * skipped (for StoreProblems.noteDamage); null when the reader went away first. Throws TooManyMetrics (a
 * downsampled read of every metric of a run that has too many) and ReadsBusy.
 */
export async function streamLogHistory(file: string, view: HistoryView, ask: HistoryAsk, sink: HistorySink): Promise<{ rows: number; damaged: DamagedRegion[] } | null> {
  let size = 0;
  try {
    size = fs.statSync(file).size;
  } catch {
    /* no log yet: the inline read finds nothing */
  }
  if (size <= OFF_THREAD_BYTES) {
    const chunks: HistoryChunkMsg[] = [];
    const answer = new HistoryAnswer(ask, (c) => chunks.push(c));
    const got = readLogHistory(file, answer.onChunk, view);
    answer.end();
    for (const c of chunks) {
      if (sink.cancelled()) return null;
      await sink.write(c);
    }
    return got;
  }
  const free = await slot();
  try {
    return await onWorker({ file, view, ask, control: new SharedArrayBuffer(8) }, sink);
  } finally {
    free();
  }
}

function onWorker(job: ReadJob, sink: HistorySink): Promise<{ rows: number; damaged: DamagedRegion[] } | null> {
  const control = new Int32Array(job.control);
  Atomics.store(control, CREDITS, WINDOW);
  const worker = new Worker(new URL('./read-worker.js', import.meta.url), { workerData: job });
  return new Promise((resolve, reject) => {
    const queue: ReadMessage[] = [];
    let pumping = false;
    let settled = false;
    const budget = setTimeout(() => finish(() => reject(new ReadsBusy(`the read took more than ${READ_BUDGET_MS / 1000} s (a reader that stopped reading, or a very large run): read fewer metrics, or page through it`))), READ_BUDGET_MS);
    budget.unref();
    const finish = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(budget);
      Atomics.store(control, CANCELLED, 1);
      Atomics.notify(control, CREDITS);
      void worker.terminate();
      fn();
    };
    const pump = async () => {
      if (pumping) return;
      pumping = true;
      try {
        while (queue.length > 0 && !settled) {
          if (sink.cancelled()) return finish(() => resolve(null));
          const m = queue.shift()!;
          if ('chunk' in m) {
            await sink.write(m.chunk);
            Atomics.add(control, CREDITS, 1);
            Atomics.notify(control, CREDITS);
          } else if ('done' in m) {
            return finish(() => resolve({ rows: m.rows, damaged: m.damaged }));
          } else {
            return finish(() => reject(m.tooMany ? new TooManyMetrics(m.error) : new Error(m.error)));
          }
        }
      } catch (e) {
        finish(() => reject(e));
      } finally {
        pumping = false;
      }
    };
    let ended = false; // the worker posted its end (done or error): its exit then says nothing more
    worker.on('message', (m: ReadMessage) => {
      if (!('chunk' in m)) ended = true;
      queue.push(m);
      void pump();
    });
    worker.on('error', (e) => finish(() => reject(e)));
    worker.on('exit', (code) => {
      if (ended) return;
      queue.push({ error: `the history read's thread exited (code ${code}) before it ended`, tooMany: false });
      void pump();
    });
  });
}
