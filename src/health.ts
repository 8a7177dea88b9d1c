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

/**
 * A rank's step rate over time, as stored in metadata.health.rate: the
 * rank's last step, sampled by the daemon every `everyS` seconds while the run
 * is open (daemon/health/history.ts). At most 240 samples: the newest 120 as
 * taken (10 min), older ones evenly spaced, the spacing doubling as the run
 * grows, so the whole run stays covered. Delta-encoded, as it travels in
 * every listing of the run (about 2 KB at most).
 */
export interface StepRateSeries {
  everyS: number;
  /** The first sample: seconds since the epoch (0.1 s), and the step then. */
  t0: number;
  s0: number;
  /** Each later sample: seconds since the previous one (0.1 s), and steps made since. */
  dt: number[];
  ds: number[];
}

/** One point of a rank's step rate: the steps made since the previous sample over the seconds between them (a stall reads 0). */
export interface StepRatePoint {
  /** The previous sample's time: the rate is over [from, at] (seconds since the epoch). */
  from: number;
  /** The sample's time and the rank's step then. */
  at: number;
  step: number;
  stepsPerS: number;
}

/** The points of a stored series, oldest first (none for a missing or malformed one). */
export function stepRatePoints(s: StepRateSeries | null | undefined): StepRatePoint[] {
  if (!s || !Array.isArray(s.dt) || !Array.isArray(s.ds) || typeof s.t0 !== 'number' || typeof s.s0 !== 'number') return [];
  const out: StepRatePoint[] = [];
  let at = s.t0;
  let step = s.s0;
  for (let i = 0; i < Math.min(s.dt.length, s.ds.length); i++) {
    const dt = s.dt[i];
    const ds = s.ds[i];
    if (!(typeof dt === 'number' && dt > 0 && typeof ds === 'number' && ds >= 0)) return out;
    const from = at;
    at = Math.round((at + dt) * 10) / 10;
    step += ds;
    out.push({ from, at, step, stepsPerS: ds / dt });
  }
  return out;
}

/** What a run carries in metadata.health. */
export interface RunHealth {
  progress: RankProgress;
  /** The last events about this run's group that involve this run (at most 20, newest last). */
  events: HealthEvent[];
  /** Its step rate over time; absent until the rank has stepped. */
  rate?: StepRateSeries;
}

/** The rank as people read it: "rank 2", or the run id when the run has none. */
export function rankLabel(rank: number | null, runId: string): string {
  return rank === null ? `run ${runId}` : `rank ${rank}`;
}
