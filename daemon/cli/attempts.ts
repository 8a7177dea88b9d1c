// The attempts of a continued run as `logd logs` and `logd media` mark them
// (src/attempts.ts: by time, a run of one attempt marked nowhere): read from a
// run's metadata, and the heading that opens each attempt's part of the text.
import type { RunInfo } from '../query/index.js';
import { attemptsToMarkJson, attemptTitle, type AttemptLike } from '../../src/attempts.js';

export { attemptAt } from '../../src/attempts.js';

/** An attempt as the run's metadata has it (what marking uses of daemon/store/format.ts Attempt). */
export type AttemptInfo = AttemptLike;

/** The run's attempts, oldest first; empty when it has only one (or its metadata names none). */
export function attemptsOf(r: RunInfo | null): AttemptInfo[] {
  return r ? attemptsToMarkJson(r.metadataJson) : [];
}

/** A line that opens an attempt's part of the output, e.g. `--- attempt 2 of 3: started 2026-11-27 04:50:01 UTC on node-1 (pid 4242), resumed from step 500 ---`. */
export function attemptHeading(attempts: readonly AttemptInfo[], n: number): string {
  return `--- ${attemptTitle(attempts, n)} ---`;
}
