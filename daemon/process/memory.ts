// Memory hygiene of the long-lived daemon. Bounded buffering is
// daemon/runs/backpressure.ts; this file is about giving memory back afterwards.
//
// - The young generation is capped at a 2 MB semi-space (V8's default on
//   64-bit is 16 MB). Record batches make many short-lived buffers; a smaller
//   young generation collects them sooner, so fewer dead buffers pile up
//   outside the heap between collections, and V8 keeps about 25 MB fewer
//   pages after a flood (measured with bench/memory.ts).
// - When ingestion goes quiet after a busy spell, one full collection frees
//   what the spell left behind at once, instead of whenever V8 next needs
//   room (an idle process may never collect). `gc` is not exposed by default;
//   the flag can be turned on at run time and the function taken from a
//   fresh context.
// - Freed memory goes back to the system with malloc_trim (addon/):
//   every TRIM_EVERY_TICKS seconds while busy, which keeps the peak down, and
//   after the full collection when quiet.
import v8 from 'node:v8';
import vm from 'node:vm';
import { mallocTrim, mallocTrimUnavailable } from '../../addon/index.js';

const SEMI_SPACE_MB = 2;
/** Seconds without activity before the collections (the second catches a straggling finish). */
const QUIET_AT = [2, 10];
const TICK_MS = 1000;
const TRIM_EVERY_TICKS = 1;

/** Call first thing at daemon start, before the heap has grown. */
export function limitYoungGeneration(): void {
  v8.setFlagsFromString(`--max-semi-space-size=${SEMI_SPACE_MB}`);
}

function fullGc(): (() => void) | null {
  try {
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as unknown;
    return typeof gc === 'function' ? (gc as () => void) : null;
  } catch {
    return null;
  }
}

/**
 * Watches `activity()` once a second. While it changes, trims the heap every
 * TRIM_EVERY_TICKS seconds; once it has stood still for 2 (and again for 10)
 * seconds after changing, runs a full collection and trims. Returns the timer (unref'd).
 */
export function releaseMemoryWhenQuiet(activity: () => string, log: (line: string) => void): NodeJS.Timeout {
  const gc = fullGc();
  if (!gc) log('server: cannot collect garbage on demand in this Node; memory comes back when V8 decides');
  const noTrim = mallocTrimUnavailable();
  if (noTrim) log(`server: ${noTrim}; freed memory stays in the daemon's RSS until reused`);
  let last = activity();
  let quiet = QUIET_AT[QUIET_AT.length - 1] + 1;
  let busyTicks = 0;
  const timer = setInterval(() => {
    const now = activity();
    if (now !== last) {
      last = now;
      quiet = 0;
      if (++busyTicks % TRIM_EVERY_TICKS === 0) mallocTrim();
    } else if (QUIET_AT.includes(++quiet)) {
      busyTicks = 0;
      gc?.();
      mallocTrim();
    }
  }, TICK_MS);
  timer.unref();
  return timer;
}
