// Is a local process still alive? Reads /proc/<pid>/stat: a zombie (exited but
// not yet reaped) counts as dead, and the start time guards against pid reuse.
import { procStat } from '../../src/proc.js';

/** The start time of a live process; null when it is gone or a zombie (exited, not yet reaped). */
export function processStartTime(pid: number): number | null {
  const s = procStat(pid);
  return s === null || s.state === 'Z' || s.state === 'X' ? null : s.startTime;
}

export function isAlive(pid: number, startTime: number | null): boolean {
  if (pid <= 0) return false;
  const now = processStartTime(pid);
  if (now === null) return false;
  return startTime === null || now === startTime;
}
