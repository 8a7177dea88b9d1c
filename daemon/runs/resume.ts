// Resuming a run that a daemon stop left `killed`. A graceful stop (SIGTERM,
// `logd stop`) makes every open run durable and marks it `killed`, resumable.
// When a process of that run comes back with the run's token (its stream, its
// finish, its spill file) and the run's owner still lives, the run is open
// again on this daemon and ends in the state its owner gives it. A run whose
// owner is gone stays `killed`.
//
// A final run is continued as a new attempt (init(resume=...)), rewound to a
// step with init(resume_from=...) (README: "Rewind and fork"); the checks of a
// CreateRun's resume_from and fork_from are here too.
//
// This file reopens the run from its log; the registry (its only caller)
// takes the reopened run in.
import os from 'node:os';
import { FrameType, jsonFrame, type Attempt, type AttemptFrame, type RankMeta } from '../store/format.js';
import { LiveRun } from './run.js';
import { isAlive } from './liveness.js';
import { sameSecret } from '../../src/token.js';
import { checkRunId } from '../../src/names.js';
import type { StepRef } from '../../src/wire.js';
import type { Store } from '../store/store.js';
import { timelineSummary, attemptOf } from '../store/replay.js';

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
  run.supersededRows = r.supersededRows;
  run.attempts = r.attempts.map((a, i) => (i === r.attempts.length - 1 ? withoutEnd(a) : a));
  for (const w of r.writers) {
    if (!w) continue;
    const restored = run.restoreWriter(w, r.maxSeq[w.idx] ?? 0);
    // Local writers whose processes live are attached again and watched by pid, as before the stop.
    if (restored.local && isAlive(w.pid, restored.startTime)) restored.detached = false;
  }
  run.log.append(FrameType.STATE, jsonFrame({ state: 'running', reason: `resumed after ${r.final.reason}`, exitCode: 0, finishedAt: 0 }));
  return { run, why: `it was killed by ${r.final.reason}; ${byOwner ? 'its owner' : `its owner pid ${r.meta.pid}`} is back` };
}

/** The attempt without the end fields (it runs again). */
function withoutEnd(a: Attempt): Attempt {
  const { endedAt: _e, state: _s, reason: _r, exitCode: _x, ...rest } = a;
  return rest;
}

/** A rewind the run's log cannot take: the step lies beyond its last stored step. */
export class RewindRefused extends Error {
  override name = 'RewindRefused';
}

/**
 * Continues a final run as a new attempt (init(resume='allow'|'must')): the
 * run is running again with a new owner and token; its keys, summary, config
 * (merged with `configUpdate`), tags and group stay; its writers of earlier
 * attempts stay known, detached. `resumeFrom` (init(resume_from=...)) rewinds
 * it: the attempt records the step, and earlier attempts' rows above it are
 * superseded (store/timeline.ts), so the summary and the next step are the
 * latest timeline's. Null when the log says the run is still open.
 */
export function continueFinalRun(
  store: Store, id: string,
  owner: { host: string; pid: number; rank: RankMeta | null; runToken: string; ownerWriterId: string },
  configUpdate: Record<string, unknown>,
  resumeFrom: number | null = null,
): LiveRun | null {
  const { run: r, log } = store.replay(id, true);
  if (!r.final) {
    log!.close();
    return null;
  }
  if (resumeFrom !== null && resumeFrom > r.summary.lastStep) {
    log!.close();
    throw new RewindRefused(r.summary.lastStep < 0
      ? `resume_from step ${resumeFrom}: run ${id} has no stored rows to resume from; continue it with resume='allow' instead`
      : `resume_from step ${resumeFrom} is beyond run ${id}'s last stored step ${r.summary.lastStep}; resume from a step up to ${r.summary.lastStep} (the step of a checkpoint whose rows were logged)`);
  }
  const a: AttemptFrame = {
    n: r.attempts.length + 1, startedAt: Date.now() / 1000, host: owner.host, pid: owner.pid,
    fromStep: resumeFrom !== null ? resumeFrom + 1 : r.summary.lastStep + 1, ...(resumeFrom !== null ? { resumedFromStep: resumeFrom } : {}),
    runToken: owner.runToken, ownerWriterId: owner.ownerWriterId, rank: owner.rank,
  };
  const attempts = [...r.attempts, attemptOf(a)];
  let summary = r.summary;
  let supersededRows = r.supersededRows;
  if (resumeFrom !== null) {
    // The log before this attempt, read again under the new timeline (a rewind is rare; ingest stays as it is).
    const rewound = timelineSummary(store.logPath(id), attempts, r.keys.length)!;
    summary = rewound.summary;
    supersededRows = rewound.supersededRows;
  }
  log!.append(FrameType.ATTEMPT, jsonFrame(a));
  log!.append(FrameType.STATE, jsonFrame({ state: 'running', reason: `continued: attempt ${a.n}${resumeFrom !== null ? `, resumed from step ${resumeFrom}` : ''}`, exitCode: 0, finishedAt: 0 }));
  const meta = { ...r.meta, runToken: owner.runToken, ownerWriterId: owner.ownerWriterId, host: owner.host, pid: owner.pid, rank: owner.rank };
  const run = new LiveRun(meta, log!, r.keys, summary, r.userSummary, r.config);
  run.media = r.media;
  run.supersededRows = supersededRows;
  run.attempts = attempts;
  for (const w of r.writers) if (w) run.restoreWriter(w, r.maxSeq[w.idx] ?? 0);
  if (Object.keys(configUpdate).length > 0) {
    Object.assign(run.config, configUpdate);
    log!.append(FrameType.CONFIG, jsonFrame(configUpdate));
  }
  return run;
}

/** What is wrong with a CreateRun's resume_from / fork_from (null: nothing). */
export function checkRewindOrFork(id: string, resume: string, rewind: StepRef | null, fork: StepRef | null): string | null {
  const badStep = (what: string, s: StepRef) => (!Number.isSafeInteger(s.step) || s.step < 0 ? `${what} step ${s.step} must be a non-negative integer` : null);
  if (rewind && fork) return 'resume_from and fork_from cannot be given together: resume_from rewinds this run, fork_from starts a new run from another one';
  if (rewind) {
    if (rewind.runId !== id) {
      return `resume_from names run ${JSON.stringify(rewind.runId.slice(0, 80))}, but this init's id is ${JSON.stringify(id)}: resume_from rewinds the run being continued (give the same id, or leave id out); to start a new run from another run's step use fork_from`;
    }
    if (resume === 'never') return "resume='never' refuses to continue a run, and resume_from continues one: leave resume out (or give 'must')";
    return badStep('resume_from', rewind);
  }
  if (fork) {
    const bad = checkRunId(fork.runId);
    if (bad) return `fork_from: ${bad}`;
    if (fork.runId === id) return `fork_from names run ${id}, the run being created: a fork is a new run with its own id; to go back in run ${id} use resume_from`;
    if (resume === 'must') return "resume='must' continues an existing run, and fork_from creates a new one: leave resume out";
    return badStep('fork_from', fork);
  }
  return null;
}
