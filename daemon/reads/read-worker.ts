// A read worker: one ReadHistory of a large log, on its own thread (history.ts
// starts it). It reads the log, builds the answer's chunks (chunks.ts) and
// posts each one to the daemon's main thread, never more than the credits the
// main thread gave back: a reader that does not read holds this thread, not
// the daemon's memory.
import os from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { readLogHistory } from '../store/history-read.js';
import { HistoryAnswer, TooManyMetrics } from './chunks.js';
import { encodeHistoryChunk } from './encode-chunk.js';
import type { HistoryChunkMsg } from '../../src/wire.js';
import { CREDITS, CANCELLED, type ReadJob, type ReadMessage } from './protocol.js';

class Cancelled extends Error {}

/**
 * A read gives way to the trainers on the node and to the daemon's ingest: this thread runs at nice 10 (on Linux
 * the nice value is a thread's own: os.setPriority(0, …) lowers this worker only). Where that is refused, the read
 * runs at the daemon's priority.
 */
const READ_NICE = 10;
try {
  if (os.getPriority(0) < READ_NICE) os.setPriority(0, READ_NICE);
} catch {
  /* not allowed here: the daemon's priority */
}

const job = workerData as ReadJob;
const control = new Int32Array(job.control);


function send(c: HistoryChunkMsg): void {
  while (Atomics.load(control, CREDITS) <= 0) {
    if (Atomics.load(control, CANCELLED)) throw new Cancelled();
    Atomics.wait(control, CREDITS, 0, 1000);
  }
  if (Atomics.load(control, CANCELLED)) throw new Cancelled();
  Atomics.sub(control, CREDITS, 1);
  // The message's bytes in a buffer of their own, moved to the main thread (which sends them as they are).
  const bytes = encodeHistoryChunk(c);
  parentPort!.postMessage({ chunk: bytes } satisfies ReadMessage, [bytes.buffer as ArrayBuffer]);
}

try {
  const answer = new HistoryAnswer(job.ask, send);
  const got = readLogHistory(job.file, answer.onChunk, job.view);
  answer.end();
  parentPort!.postMessage({ done: true, rows: got.rows, damaged: got.damaged } satisfies ReadMessage);
} catch (e) {
  if (!(e instanceof Cancelled)) parentPort!.postMessage({ error: (e as Error).message, tooMany: e instanceof TooManyMetrics } satisfies ReadMessage);
}
