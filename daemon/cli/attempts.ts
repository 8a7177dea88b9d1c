// The attempts of a continued run (init(resume=...), a restarted job) as
// `logd logs` and `logd media` mark them: each console line, histogram, image
// or text belongs to the last attempt that had started by its time. The
// attempts come from the run's metadata (`attempts`, present once a run has
// more than one); a run with one attempt is marked nowhere.
import type { RunInfo } from '../query/index.js';
import type { Attempt } from '../store/format.js';

/** An attempt as the run's metadata has it. */
export type AttemptInfo = Pick<Attempt, 'n' | 'startedAt' | 'host' | 'pid' | 'fromStep' | 'resumedFromStep'>;

/** The run's attempts, oldest first; empty when it has only one (or its metadata names none). */
export function attemptsOf(r: RunInfo | null): AttemptInfo[] {
  if (!r) return [];
  let m: { attempts?: unknown };
  try {
    m = JSON.parse(r.metadataJson || '{}') as { attempts?: unknown };
  } catch {
    return [];
  }
  if (!Array.isArray(m.attempts)) return [];
  const out = m.attempts.filter((a): a is AttemptInfo => !!a && typeof a === 'object' && Number.isInteger(a.n) && typeof a.startedAt === 'number');
  out.sort((a, b) => a.n - b.n);
  return out.length > 1 ? out : [];
}

/** The attempt (its n) an item of time `t` (Unix seconds) belongs to; null when the run has one attempt. */
export function attemptAt(attempts: readonly AttemptInfo[], t: number): number | null {
  if (attempts.length === 0) return null;
  let n = attempts[0].n;
  for (const a of attempts) if (a.startedAt <= t) n = a.n;
  return n;
}

/** A line that opens an attempt's part of the output, e.g. `--- attempt 2 of 3: started 2026-11-27 04:50:01 UTC on node-1 (pid 4242), resumed from step 500 ---`. */
export function attemptHeading(attempts: readonly AttemptInfo[], n: number): string {
  const a = attempts.find((x) => x.n === n);
  if (!a) return `--- attempt ${n} ---`;
  const when = new Date(a.startedAt * 1000).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
  const from = typeof a.resumedFromStep === 'number' ? `resumed from step ${a.resumedFromStep}` : `from step ${a.fromStep}`;
  // eslint-disable-next-line no-control-regex
  const host = String(a.host || '?').replace(/[\x00-\x1f\x7f]/g, '?'); // written by a client: never a terminal escape
  return `--- attempt ${n} of ${attempts.length}: started ${when} on ${host} (pid ${a.pid}), ${from} ---`;
}
