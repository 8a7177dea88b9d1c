// A local process as /proc/PID/stat shows it: its state and its start time
// (field 22, clock ticks since boot). With the pid, the start time tells a
// process from a later one that got the same pid (pid_max is often 32768).
import fs from 'node:fs';

export function procStat(pid: number): { state: string; startTime: number } | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const startTime = Number(rest[19]);
    return Number.isFinite(startTime) ? { state: rest[0], startTime } : null;
  } catch {
    return null;
  }
}

/** The start time of `pid`; null when the process is gone or /proc has no entry for it. */
export function procStartTime(pid: number): number | null {
  return procStat(pid)?.startTime ?? null;
}
