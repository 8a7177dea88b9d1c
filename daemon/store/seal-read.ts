// The read a checkpoint needs (seal.ts): the run's state replayed from the
// log's last checkpoint, encoded as a new one. A short stretch is read in
// line; a long one (a first close of a large run) on a thread of its own
// (seal-worker.ts), so that the daemon's event loop, which acknowledges every
// other writer's rows, never waits for it. Where no thread can be had, the
// read is not done in line either: the run gets no new checkpoint, and its
// next replay reads on from the last one, as before.
import { Worker } from 'node:worker_threads';
import { replayLog, ReadLimitExceeded } from './replay.js';
import { encodeCheckpoint, type CheckpointRef } from './checkpoint.js';

/** Stretches of log longer than this are read on a thread (about 20 ms of reading in line). */
export const THREAD_READ_BYTES = 16 * 1024 * 1024;

export interface CheckpointReadRequest {
  file: string;
  at: CheckpointRef | null;
  maxReadBytes: number;
  /** The log's durable length: the checkpoint covers exactly this much. */
  end: number;
}

export interface CheckpointRead {
  /** The encoded checkpoint; null when the log read is not what was written, or the state does not fit a frame. */
  payload: Uint8Array | null;
  validBytes: number;
  /** Why the last checkpoint was not used (the whole log was read), or null. */
  checkpointProblem: string | null;
  /** Set instead of the rest when the stretch to read was over maxReadBytes. */
  overLimit?: string;
}

/** The read itself (in line, or on the thread). */
export function checkpointRead(req: CheckpointReadRequest): CheckpointRead {
  try {
    const { run, state } = replayLog(req.file, false, { at: req.at, maxReadBytes: req.maxReadBytes });
    const payload = run.scan.validBytes === req.end && run.scan.tornBytes === 0 ? encodeCheckpoint(state.toCheckpoint(run.scan), req.end) : null;
    return { payload: payload && new Uint8Array(payload), validBytes: run.scan.validBytes, checkpointProblem: run.checkpointProblem };
  } catch (e) {
    if (e instanceof ReadLimitExceeded) return { payload: null, validBytes: 0, checkpointProblem: null, overLimit: e.message };
    throw e;
  }
}

/** The read, on a thread when `bytes` (the stretch since the last checkpoint) is long. */
export function readForCheckpoint(req: CheckpointReadRequest, bytes: number): Promise<CheckpointRead> {
  if (bytes <= THREAD_READ_BYTES) return Promise.resolve().then(() => checkpointRead(req));
  return new Promise((resolve, reject) => {
    let w: Worker;
    try {
      w = new Worker(new URL('./seal-worker.js', import.meta.url), { workerData: req });
    } catch (e) {
      reject(new Error(`no thread to read ${bytes} bytes for it (${(e as Error).message})`));
      return;
    }
    let done = false;
    w.on('message', (m: CheckpointRead | { error: string }) => {
      done = true;
      if ('error' in m) reject(new Error(m.error));
      else resolve(m);
    });
    w.on('error', (e) => {
      if (!done) (done = true), reject(new Error(`its reading thread failed (${e.message})`));
    });
    w.on('exit', (code) => {
      if (!done) (done = true), reject(new Error(`its reading thread exited with code ${code}`));
    });
  });
}
