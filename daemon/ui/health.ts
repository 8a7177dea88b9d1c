// A group's rank health as one view: every rank's progress and the group's
// events, merged from the runs' metadata.health (daemon/health judges them on
// each node; the local store and the shared one carry the same). The same
// merge as `logd health` (daemon/cli/health.ts): an event every rank of a
// group carries is one event (at|kind|runIds), the copy with stacks kept.
import type { RunInfo } from '../query/index.js';
import { stepRatePoints, type HealthEvent, type RankProgress, type RunHealth, type StepRatePoint } from '../../src/health.js';
import { storyOfRuns, type JobStory } from '../../src/story/story.js';

export interface RankHealth extends RankProgress {
  name: string;
  /** The run's own state (running, finished, crashed…); `state` is the judgement while it runs. */
  runState: string;
  /** Its step rate over time, oldest first (metadata.health.rate decoded; empty before the daemon sampled it twice). */
  rate: StepRatePoint[];
}

export interface GroupHealth {
  /** The newest `job stalled` with no `recovered` after it, or a rank stalled now. */
  stalled: boolean;
  /** Ranks ordered by rank, then run id. */
  ranks: RankHealth[];
  /** Oldest first. */
  events: HealthEvent[];
  /** The job's story when a rank failed (src/story/story.ts): which rank ended first, how, and what the others did. */
  story: JobStory | null;
  /** Which launch of the group this is (src/story/jobs.ts): n of `of` (n 0: every job together). */
  job?: { n: number; of: number; jobs: Array<{ n: number; startedAt: number; endedAt: number; runs: number }> };
  /** The server's clock (seconds since the epoch): "last step 3 s ago" is measured against it, not the browser's. */
  now: number;
}

function metadataOf(r: RunInfo): { health?: RunHealth; rank?: { rank?: number } | null } {
  try {
    return JSON.parse(r.metadataJson || '{}') as { health?: RunHealth; rank?: { rank?: number } | null };
  } catch {
    return {};
  }
}

export const eventKey = (e: HealthEvent): string => `${e.at}|${e.kind}|${e.runIds.join(',')}`;

/** The merged health of a group's runs (or of one run that has no group). */
export function mergeGroupHealth(runs: RunInfo[], nowS = Date.now() / 1000): GroupHealth {
  const seen = new Map<string, HealthEvent>();
  const ranks: RankHealth[] = [];
  for (const r of runs) {
    const m = metadataOf(r);
    const h = m.health;
    for (const e of h?.events ?? []) {
      const key = eventKey(e);
      const had = seen.get(key);
      if (!had || (!had.stacks && e.stacks)) seen.set(key, e);
    }
    const p = h?.progress;
    const metaRank = typeof m.rank?.rank === 'number' && m.rank.rank >= 0 ? m.rank.rank : null;
    ranks.push({
      runId: r.id, rank: p?.rank ?? metaRank, host: p?.host ?? '', pid: p?.pid ?? 0, step: p?.step ?? -1, stepAt: p?.stepAt ?? 0,
      stepS: p?.stepS ?? null, stepsPerS: p?.stepsPerS ?? null, lag: p?.lag ?? 0, cpuPerStepS: p?.cpuPerStepS ?? null,
      state: r.state !== 'running' ? r.state : p?.state ?? 'unknown', at: p?.at ?? 0, name: r.name, runState: r.state,
      rate: stepRatePoints(h?.rate),
    });
  }
  ranks.sort((a, b) => (a.rank ?? 1e9) - (b.rank ?? 1e9) || a.runId.localeCompare(b.runId));
  const events = [...seen.values()].sort((a, b) => a.at - b.at);
  const lastJob = [...events].reverse().find((e) => e.kind === 'job stalled');
  const jobStalledNow = !!lastJob && !events.some((e) => e.kind === 'recovered' && e.at >= lastJob.at);
  return { stalled: jobStalledNow || ranks.some((r) => r.state === 'stalled'), ranks, events, story: storyOfRuns(runs), now: nowS };
}
