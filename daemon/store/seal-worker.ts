// The thread that reads a long log for its checkpoint (seal-read.ts): the
// replay from the log's last checkpoint, and the new checkpoint encoded, off
// the daemon's main thread, which serves the trainers meanwhile.
import { parentPort, workerData } from 'node:worker_threads';
import { checkpointRead, type CheckpointReadRequest } from './seal-read.js';

const req = workerData as CheckpointReadRequest;
try {
  const got = checkpointRead(req);
  parentPort!.postMessage(got, got.payload ? [got.payload.buffer as ArrayBuffer] : []);
} catch (e) {
  parentPort!.postMessage({ error: (e as Error).message });
}
