// Resuming a run that a daemon stop left `killed`. A graceful stop (SIGTERM,
// `logd stop`) makes every open run durable and marks it `killed`, resumable.
// When a process of that run comes back with the run's token (its stream, its
// finish, its spill file) and the run's owner still lives, the run is open
// again on this daemon and ends in the state its owner gives it. A run whose
// owner is gone stays `killed`.
//
// This file reopens the run from its log; the registry (its only caller)
// takes the reopened run in.
import os from 'node:os';
import { FrameType, jsonFrame } from '../store/format.js';
import { LiveRun } from './run.js';
import { isAlive } from './liveness.js';
import { sameSecret } from '../../src/token.js';
import type { Store } from '../store/store.js';

/**
 * Reopens run `id` from its log when it was killed by a daemon stop and
 * `writerId` (or its live local owner) may resume it; null otherwise. `why`
 * says who came back, for the daemon's log.
 */
export function reopenKilledRun(store: Store, id: string, runToken: string, writerId: string): { run: LiveRun; why: string } | null {
  const row = store.index.get(id);
  if (!row || row.state !== 'killed') return null;
  const { run: r, log } = store.replay(id, true);
  const byOwner = writerId !== '' && writerId === r.meta.ownerWriterId;
  const ownerLives = r.meta.host === os.hostname() && isAlive(r.meta.pid, null);
  if (!r.final?.resumable || !sameSecret(runToken, r.meta.runToken) || !(byOwner || ownerLives)) {
    log!.close();
    return null;
  }
  const run = new LiveRun(r.meta, log!, r.keys, r.summary, r.userSummary, r.config);
  for (const w of r.writers) {
    if (!w) continue;
    const restored = run.restoreWriter(w, r.maxSeq[w.idx] ?? 0);
    // Local writers whose processes live are attached again and watched by pid, as before the stop.
    if (restored.local && isAlive(w.pid, restored.startTime)) restored.detached = false;
  }
  run.log.append(FrameType.STATE, jsonFrame({ state: 'running', reason: `resumed after ${r.final.reason}`, exitCode: 0, finishedAt: 0 }));
  return { run, why: `it was killed by ${r.final.reason}; ${byOwner ? 'its owner' : `its owner pid ${r.meta.pid}`} is back` };
}
