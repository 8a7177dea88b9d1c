// A run continued on this node from the shared store (init(resume=...) of a
// run that another node logged; docs/shared-store.md, "Continuing a run on
// another node"). This node's log of it starts with what the store knows:
// the RUN frame (the run's creation, with `fromStore`), its key dictionary
// and writers (same ids and indices, so this node's new keys and writers
// come after the other node's, in the store too), one ATTEMPT and STATE per
// earlier attempt, and a BASE frame with the summary of the rows the store
// holds. The rows themselves stay in the store: this log never uploads them
// again (its upload cursor starts past these frames).
import { RecordLog } from './record-log.js';
import { FrameType, jsonFrame, type Attempt, type BaseFrame, type RunMeta, type WriterMeta } from './format.js';
import { randomBytes } from 'node:crypto';

/** What the shared store holds of a run, as a continuation on this node needs it. */
export interface StoredRun {
  /** The run's creation: first attempt's host and pid, config, and `fromStore`. */
  meta: RunMeta & { fromStore: { node: string; offsetBase: number } };
  keys: string[];
  writers: WriterMeta[];
  /** Every attempt so far, each ended (the store shows the run final). */
  attempts: Attempt[];
  base: BaseFrame;
  /** summary.update() values (the summary's keys that are not logged metrics). */
  userSummary: Record<string, unknown>;
}

/**
 * Writes the continuation's first frames into a new log (`create()` makes
 * the run's dir and log) and syncs them; returns the log's length, where its
 * upload cursor starts. The caller continues the run as a new attempt next.
 */
export async function writeStoredRun(s: StoredRun, create: () => RecordLog): Promise<number> {
  const log = create();
  try {
    log.append(FrameType.RUN, jsonFrame(s.meta));
    if (s.keys.length > 0) log.append(FrameType.KEYS, jsonFrame({ first: 0, names: s.keys }));
    for (const w of s.writers) log.append(FrameType.WRITER, jsonFrame(w));
    s.attempts.forEach((a, i) => {
      if (i > 0) {
        // Its owner is not this node's to resume: a token nobody holds.
        const token = randomBytes(18).toString('base64url');
        log.append(FrameType.ATTEMPT, jsonFrame({ ...withoutEnd(a), runToken: token, ownerWriterId: `w-gone-${a.n}`, rank: null }));
      }
      log.append(FrameType.STATE, jsonFrame({ state: a.state ?? 'crashed', reason: a.reason ?? 'ended on another node', exitCode: a.exitCode ?? -1, finishedAt: a.endedAt ?? 0 }));
    });
    if (Object.keys(s.userSummary).length > 0) log.append(FrameType.SUMMARY, jsonFrame(s.userSummary));
    log.append(FrameType.BASE, jsonFrame(s.base));
    await log.sync();
    return log.durableBytes;
  } finally {
    log.close();
  }
}

function withoutEnd(a: Attempt): Attempt {
  const { endedAt: _e, state: _s, reason: _r, exitCode: _x, ...rest } = a;
  return rest;
}

/** Why the shared store would not give a run to this node: held by a live attempt elsewhere, its upload not in yet, or the store not answering. */
export class StoreContinueRefused extends Error {
  override name = 'StoreContinueRefused';
  constructor(readonly kind: 'held' | 'behind' | 'unreachable', message: string) {
    super(message);
  }
}

/**
 * The shared store as the run registry sees it (implemented by the uploader,
 * wired in daemon.ts; a test may pass a fake). `claim` looks the run up and,
 * when the store has it and nobody holds it, writes this node's continuation
 * log with `materialize` and records in the store, in the same transaction,
 * that this node now uploads the run. 'absent': the store does not have it.
 * `owner` (the new attempt's process) is who the store names as the run's
 * holder from then on. Throws StoreContinueRefused.
 */
export interface SharedRuns {
  /** The store, for messages (no password). */
  readonly where: string;
  claim(id: string, owner: { host: string; pid: number }, materialize: (s: StoredRun) => Promise<number>): Promise<'claimed' | 'absent'>;
}
