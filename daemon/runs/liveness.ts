// Is a local process still alive? Reads /proc/<pid>/stat: a zombie (exited but
// not yet reaped) counts as dead, and the start time guards against pid reuse.
import fs from 'node:fs';

export function processStartTime(pid: number): number | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (rest[0] === 'Z' || rest[0] === 'X') return null;
    return Number(rest[19]); // field 22: starttime in clock ticks
  } catch {
    return null;
  }
}

export function isAlive(pid: number, startTime: number | null): boolean {
  if (pid <= 0) return false;
  const now = processStartTime(pid);
  if (now === null) return false;
  return startTime === null || now === startTime;
}
