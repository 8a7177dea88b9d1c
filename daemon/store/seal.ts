// A run's log closed by its daemon: a checkpoint of the run's state and a
// pointer to it appended and made durable first (checkpoint.ts), so that the
// next replay of the run (continuing it, a daemon start, an index rebuild)
// starts there. The state is what a replay of the durable log gives: the
// replay starts from the log's last checkpoint, so closing a run costs a read
// of the frames written since that checkpoint (for a new run, its whole log,
// once), and never trusts the live run's view of itself.
import { FrameType, parseFrameJson } from './format.js';
import type { RecordLog } from './record-log.js';
import { encodePointer } from './checkpoint.js';
import { readForCheckpoint } from './seal-read.js';
import { FRAME_HEADER_BYTES, scanFrames } from '../../src/frames.js';

export interface SealPolicy {
  /** No new checkpoint when fewer bytes than this follow the last one (or the log's start): reading them is cheap. */
  minBytes: number;
  /** The longest stretch of the log to read for a new checkpoint (a daemon stop has little time); Infinity: no limit. */
  maxReadBytes: number;
}

export const SEAL_POLICY: SealPolicy = { minBytes: 256 * 1024, maxReadBytes: Infinity };

/** The bytes a checkpoint of this log would read now: those after its last checkpoint (or all of it). */
export function bytesSinceCheckpoint(log: RecordLog): number {
  const prev = log.checkpoint;
  return log.durableBytes - (prev ? prev.offset + FRAME_HEADER_BYTES + prev.length : 0);
}

/**
 * Appends a new checkpoint and its pointer when the frames since the last
 * checkpoint are at least `minBytes` and at least as many bytes as that
 * checkpoint (so checkpoints never outweigh the log they cover), or when one
 * of them rewound the run (a replay from the old checkpoint would read the
 * whole log again to leave the superseded rows out). Otherwise only a pointer
 * to the last checkpoint, which the frames since then no longer end with.
 * Syncs what it appended; says what it wrote, and why not more. Throws what
 * the disk says (the frames that reached it are whole).
 */
export async function sealLog(file: string, log: RecordLog, policy: SealPolicy = SEAL_POLICY): Promise<{ wrote: 'checkpoint' | 'pointer' | 'nothing'; why: string }> {
  if (log.closed || log.waitingBytes > 0) return { wrote: 'nothing', why: 'the log is not durable' };
  const end = log.durableBytes;
  let prev = log.checkpoint;
  if (prev && prev.sealedAt === end) return { wrote: 'nothing', why: 'it ends with its checkpoint' };
  const prevEnd = prev ? prev.offset + FRAME_HEADER_BYTES + prev.length : 0;
  const since = end - prevEnd;
  let why = '';
  if (since < Math.max(policy.minBytes, prev?.length ?? 0) && !(prev && rewindsAfter(file, prevEnd))) why = `${since} bytes since the last checkpoint`;
  else {
    const got = await readForCheckpoint({ file, at: prev ? { offset: prev.offset, length: prev.length } : null, maxReadBytes: policy.maxReadBytes, end }, since);
    if (got.overLimit !== undefined) why = got.overLimit;
    else {
      if (prev && got.checkpointProblem) prev = null; // it held up when the log was opened, and no longer does
      if (got.payload && !log.closed && log.durableBytes === end && log.waitingBytes === 0) {
        log.append(FrameType.CHECKPOINT, [got.payload]);
        log.append(FrameType.CHECKPOINT_AT, [encodePointer({ offset: end, length: got.payload.byteLength })]);
        await log.sync();
        log.checkpoint = { offset: end, length: got.payload.byteLength, sealedAt: log.durableBytes };
        return { wrote: 'checkpoint', why: got.checkpointProblem ? `read the whole log: its checkpoint was not used (${got.checkpointProblem})` : '' };
      }
      why = got.validBytes !== end ? 'the log is not what was written' : log.durableBytes !== end ? 'the log grew while it was read' : 'the state does not fit a frame';
    }
  }
  if (log.closed) return { wrote: 'nothing', why };
  if (!prev) return { wrote: 'nothing', why };
  log.append(FrameType.CHECKPOINT_AT, [encodePointer(prev)]);
  await log.sync();
  log.checkpoint = { ...prev, sealedAt: log.durableBytes };
  return { wrote: 'pointer', why };
}

/** Whether an attempt in the frames from `from` on (a short stretch) rewound the run. */
function rewindsAfter(file: string, from: number): boolean {
  let rewound = false;
  scanFrames(file, (type, p) => {
    if (type === FrameType.ATTEMPT && typeof parseFrameJson<{ resumedFromStep?: unknown }>(p).resumedFromStep === 'number') rewound = true;
  }, undefined, from);
  return rewound;
}
