// Rank health: the shapes the daemon stores with a run (metadata.health) and
// the CLI, the dashboard and `logd launch` read. The daemon computes them in
// daemon/health/; docs/health.md is the contract.

/** Thresholds of the judgements. Defaults below; per run through the config key `logd.health`. */
export interface HealthThresholds {
  /** `stalled`: no step for longer than max(stallK × the rank's median step time, stallFloorS). */
  stallK: number;
  stallFloorS: number;
  /** `straggler`: CPU time per step ≥ (1 + stragglerPct/100) × the other ranks' median, over windowSteps steps. */
  stragglerPct: number;
  windowSteps: number;
  /** Steps a rank must have made before it is judged at all (a warm-up, a run that logs rarely). */
  minSteps: number;
  /** false: no judgement for this run. */
  enabled: boolean;
}

export const HEALTH_DEFAULTS: HealthThresholds = {
  stallK: 3,
  stallFloorS: 5,
  stragglerPct: 15,
  windowSteps: 20,
  minSteps: 8,
  enabled: true,
};

/** The config key that overrides the thresholds for a run (and the group it leads). */
export const HEALTH_CONFIG_KEY = 'logd.health';

/** Thresholds from a run's config: `{"logd.health": {"stallK": 5, "stallFloorS": 30, …}}`; bad values are ignored. */
export function thresholdsFrom(config: Record<string, unknown> | null | undefined, base: HealthThresholds = HEALTH_DEFAULTS): HealthThresholds {
  const out = { ...base };
  const o = config?.[HEALTH_CONFIG_KEY];
  if (!o || typeof o !== 'object' || Array.isArray(o)) return out;
  const given = o as Record<string, unknown>;
  for (const k of ['stallK', 'stallFloorS', 'stragglerPct', 'windowSteps', 'minSteps'] as const) {
    const v = given[k];
    if (typeof v === 'number' && Number.isFinite(v) && v > 0 && v < 1e9) out[k] = v;
  }
  if (typeof given.enabled === 'boolean') out.enabled = given.enabled;
  return out;
}

/** One rank's progress as the daemon of its node sees it now. */
export interface RankProgress {
  runId: string;
  rank: number | null;
  host: string;
  pid: number;
  /** The last step logged, and when (seconds since the epoch); -1 / 0 before any. */
  step: number;
  stepAt: number;
  /** Median seconds per step over the last steps, and its inverse; null until enough steps. */
  stepS: number | null;
  stepsPerS: number | null;
  /** Steps behind the group's median step (0 for the median rank; negative: ahead). */
  lag: number;
  /** CPU seconds per step over the last window of steps (the process's busy time), null until known. */
  cpuPerStepS: number | null;
  /** ok | stalled | straggler | ended */
  state: string;
  /** When the rank's progress was judged (seconds since the epoch). */
  at: number;
}

export type HealthEventKind = 'stalled' | 'job stalled' | 'straggler' | 'recovered';

/** One rank's stack, taken when its group stalled. */
export interface RankStack {
  rank: number | null;
  runId: string;
  pid: number;
  /** Python's faulthandler dump, or a Node report's JavaScript stack; cut at 16 KiB. */
  text: string;
  /** Whether the stack is inside a collective (all-reduce, barrier, a DDP backward), judged from its frames. */
  inCollective: boolean;
  /** The innermost frame of the main thread, one line. */
  top: string;
  /** CPU use of the process at that moment, % of one core. */
  cpuPercent: number | null;
}

export interface HealthEvent {
  /** Seconds since the epoch. */
  at: number;
  kind: HealthEventKind;
  group: string;
  /** The ranks the event is about (for `job stalled`: every stalled rank). */
  ranks: Array<number | null>;
  runIds: string[];
  /** `job stalled`: the rank or ranks logd names as the likely cause, and why. */
  cause?: { ranks: Array<number | null>; runIds: string[]; why: string };
  /** The numbers the judgement rests on, in words and figures. */
  evidence: string;
  stacks?: RankStack[];
}

/** What a run carries in metadata.health. */
export interface RunHealth {
  progress: RankProgress;
  /** The last events about this run's group that involve this run (at most 20, newest last). */
  events: HealthEvent[];
}

/** The rank as people read it: "rank 2", or the run id when the run has none. */
export function rankLabel(rank: number | null, runId: string): string {
  return rank === null ? `run ${runId}` : `rank ${rank}`;
}
