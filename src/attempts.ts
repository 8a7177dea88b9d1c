// The attempts of a continued run (init(resume=...), a restarted job), as
// `logd logs`, `logd media` and the dashboard's Logs tab mark them: each
// console line, histogram, image or text belongs to the last attempt that had
// started by its time. The attempts come from the run's metadata (`attempts`,
// daemon/store/format.ts Attempt; present once a run has more than one); a
// run with one attempt is marked nowhere. Pure functions: the daemon's CLI and
// UI server and the page (web/) share them.

/** What marking needs of an attempt (daemon/store/format.ts Attempt has more). */
export interface AttemptLike {
  n: number;
  /** Unix seconds. */
  startedAt: number;
  host?: string;
  pid?: number;
  fromStep?: number;
  resumedFromStep?: number;
}

/**
 * The attempts a run's metadata (parsed) names, oldest first: those with an
 * integer `n` and a numeric `startedAt`; empty when it names none. Metadata
 * is read from a store another node may have written: nothing else is trusted.
 */
export function attemptsIn<T extends AttemptLike = AttemptLike>(metadata: unknown): T[] {
  const list = metadata && typeof metadata === 'object' ? (metadata as { attempts?: unknown }).attempts : undefined;
  if (!Array.isArray(list)) return [];
  const out = list.filter((a): a is T => !!a && typeof a === 'object' && Number.isInteger((a as AttemptLike).n) && typeof (a as AttemptLike).startedAt === 'number');
  return out.sort((a, b) => a.n - b.n);
}

/** The attempts to mark a run's output with: all of them when there are several, none for a run of one. */
export function attemptsToMark<T extends AttemptLike>(metadata: unknown): T[] {
  const all = attemptsIn<T>(metadata);
  return all.length > 1 ? all : [];
}

/** The attempt (its n) an item of time `t` (Unix seconds) belongs to; null when there are none to mark. */
export function attemptAt(attempts: readonly AttemptLike[], t: number): number | null {
  if (attempts.length === 0) return null;
  let n = attempts[0].n;
  for (const a of attempts) if (a.startedAt <= t) n = a.n;
  return n;
}

/** e.g. `attempt 2 of 3: started 2026-11-27 04:50:01 UTC on node-1 (pid 4242), resumed from step 500`. */
export function attemptTitle(attempts: readonly AttemptLike[], n: number): string {
  const a = attempts.find((x) => x.n === n);
  if (!a) return `attempt ${n}`;
  const when = new Date(a.startedAt * 1000).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
  const from = typeof a.resumedFromStep === 'number' ? `resumed from step ${a.resumedFromStep}` : `from step ${a.fromStep ?? '?'}`;
  // eslint-disable-next-line no-control-regex
  const host = String(a.host || '?').replace(/[\x00-\x1f\x7f]/g, '?'); // written by a client: never a terminal escape
  return `attempt ${n} of ${attempts.length}: started ${when} on ${host} (pid ${a.pid ?? '?'}), ${from}`;
}

/**
 * Per attempt n, the step above which what it logged is superseded by a later
 * attempt's rewind (init(resume_from=(run, S)) records S as resumedFromStep);
 * Infinity, or no entry, when nothing later rewound below it.
 */
export function rewindCutoffs(attempts: readonly Pick<AttemptLike, 'n' | 'resumedFromStep'>[]): number[] {
  const cutoff: number[] = [];
  let min = Infinity;
  for (const a of [...attempts].sort((x, y) => y.n - x.n)) {
    cutoff[a.n] = min; // what the attempts after this one rewound to
    if (typeof a.resumedFromStep === 'number') min = Math.min(min, a.resumedFromStep);
  }
  return cutoff;
}

/**
 * attemptsToMark from a run's metadata as stored (JSON text), each attempt
 * with only the fields marking uses, each of the right type: what an answer
 * or a heading may show. Empty for a run of one attempt, or metadata that
 * does not parse.
 */
export function attemptsToMarkJson(metadataJson: string): AttemptLike[] {
  let meta: unknown;
  try {
    meta = JSON.parse(metadataJson || '{}');
  } catch {
    return [];
  }
  const num = (x: unknown) => (typeof x === 'number' && Number.isFinite(x) ? x : undefined);
  return attemptsToMark<AttemptLike>(meta).map((a) => ({
    n: a.n, startedAt: a.startedAt, host: typeof a.host === 'string' ? a.host : undefined, pid: num(a.pid),
    fromStep: num(a.fromStep), resumedFromStep: num(a.resumedFromStep),
  }));
}
