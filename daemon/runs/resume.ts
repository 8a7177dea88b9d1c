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
import { FrameType, jsonFrame, type AttemptFrame, type RankMeta } from '../store/format.js';
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
  run.media = r.media;
  run.attempts = r.attempts.map((a, i) => (i === r.attempts.length - 1 ? { n: a.n, startedAt: a.startedAt, host: a.host, pid: a.pid, fromStep: a.fromStep } : a));
  for (const w of r.writers) {
    if (!w) continue;
    const restored = run.restoreWriter(w, r.maxSeq[w.idx] ?? 0);
    // Local writers whose processes live are attached again and watched by pid, as before the stop.
    if (restored.local && isAlive(w.pid, restored.startTime)) restored.detached = false;
  }
  run.log.append(FrameType.STATE, jsonFrame({ state: 'running', reason: `resumed after ${r.final.reason}`, exitCode: 0, finishedAt: 0 }));
  return { run, why: `it was killed by ${r.final.reason}; ${byOwner ? 'its owner' : `its owner pid ${r.meta.pid}`} is back` };
}

/**
 * Continues a final run as a new attempt (init(resume='allow'|'must')): the
 * run is running again with a new owner and token; its keys, summary, config
 * (merged with `configUpdate`), tags and group stay; its writers of earlier
 * attempts stay known, detached. Null when the log says the run is still open.
 */
export function continueFinalRun(
  store: Store, id: string,
  owner: { host: string; pid: number; rank: RankMeta | null; runToken: string; ownerWriterId: string },
  configUpdate: Record<string, unknown>,
): LiveRun | null {
  const { run: r, log } = store.replay(id, true);
  if (!r.final) {
    log!.close();
    return null;
  }
  const a: AttemptFrame = { n: r.attempts.length + 1, startedAt: Date.now() / 1000, host: owner.host, pid: owner.pid, fromStep: r.summary.lastStep + 1, runToken: owner.runToken, ownerWriterId: owner.ownerWriterId, rank: owner.rank };
  log!.append(FrameType.ATTEMPT, jsonFrame(a));
  log!.append(FrameType.STATE, jsonFrame({ state: 'running', reason: `continued: attempt ${a.n}`, exitCode: 0, finishedAt: 0 }));
  const meta = { ...r.meta, runToken: owner.runToken, ownerWriterId: owner.ownerWriterId, host: owner.host, pid: owner.pid, rank: owner.rank };
  const run = new LiveRun(meta, log!, r.keys, r.summary, r.userSummary, r.config);
  run.media = r.media;
  run.attempts = [...r.attempts, { n: a.n, startedAt: a.startedAt, host: a.host, pid: a.pid, fromStep: a.fromStep }];
  for (const w of r.writers) if (w) run.restoreWriter(w, r.maxSeq[w.idx] ?? 0);
  if (Object.keys(configUpdate).length > 0) {
    Object.assign(run.config, configUpdate);
    log!.append(FrameType.CONFIG, jsonFrame(configUpdate));
  }
  return run;
}
