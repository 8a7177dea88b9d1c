// The daemon's service file: how a client that has no LOGD_SERVICE finds the
// daemon of its data dir. Written to a temp name and renamed into place, so a
// reader never sees half a file; private to the user (0600).
import fs from 'node:fs';
import { procStat } from './proc.js';

export interface ServiceFile {
  pid: number;
  version: string;
  socket: string;      // "unix:/path/logd.sock"
  tcp: string | null;  // "127.0.0.1:PORT" when asked for
  token: string;
  dataDir: string;
  sidecar: boolean;
  startedAt: number;
  /**
   * The daemon process's start time (field 22 of /proc/PID/stat, clock ticks since boot): a pid alone can
   * name another process once the daemon died and the pid came round again (pid_max is often 32768).
   */
  procStart?: number;
}

export function writeServiceFile(file: string, s: ServiceFile): void {
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify(s, null, 2) + '\n', { mode: 0o600 });
  fs.renameSync(tmp, file);
}

export function readServiceFile(file: string): ServiceFile | null {
  try {
    const s = JSON.parse(fs.readFileSync(file, 'utf8')) as ServiceFile;
    return typeof s.pid === 'number' && typeof s.token === 'string' && typeof s.socket === 'string' ? s : null;
  } catch {
    return null;
  }
}

/** Removes the file only if it still names this daemon. */
export function removeServiceFile(file: string, pid: number): void {
  const s = readServiceFile(file);
  if (s && s.pid === pid) fs.rmSync(file, { force: true });
}

/**
 * kill(pid, 0), then one read of /proc/PID/stat: alive (a zombie is not) and its start time (null where /proc has
 * no entry; then kill(pid, 0) is all there is to go on).
 */
function probe(pid: number): { alive: boolean; startTime: number | null } {
  try {
    process.kill(pid, 0);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EPERM') return { alive: false, startTime: null };
  }
  const st = procStat(pid);
  if (st) return { alive: st.state !== 'Z' && st.state !== 'X', startTime: st.startTime };
  // Gone since kill(pid, 0); or no /proc here.
  return { alive: !fs.existsSync('/proc/self/stat'), startTime: null };
}

/**
 * Is the daemon that wrote a service file still there? A zombie (dead, not
 * yet reaped by a parent that never waits, such as a Popen nobody waits on)
 * still answers kill(pid, 0), but its socket is gone: it counts as dead.
 */
export function pidAlive(pid: number): boolean {
  return probe(pid).alive;
}

/** Does the daemon that wrote `s` still run: its pid alive and, where the file says, started when that daemon did. */
export function serviceAlive(s: ServiceFile): boolean {
  const p = probe(s.pid);
  // A file written by an older logd has no procStart: the pid is all there is.
  return p.alive && (typeof s.procStart !== 'number' || p.startTime === null || p.startTime === s.procStart);
}

/**
 * The data dir's owner file (daemon.json): which daemon holds the data dir's lock and where it serves from.
 * Written as soon as the lock is taken, long before the service file, so that a sidecar that lost the start
 * race can tell "the winner is still starting here" from "the winner serves from another runtime dir".
 */
export interface OwnerFile {
  pid: number;
  procStart?: number;
  runtimeDir: string;
  serviceFile: string;
  /** Set as the daemon begins to stop (why): a daemon starting meanwhile waits for the lock rather than give up. */
  stopping?: string;
}

export function writeOwnerFile(file: string, o: OwnerFile): void {
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify(o) + '\n', { mode: 0o600 });
  fs.renameSync(tmp, file);
}

/** The owner file when its daemon still runs (pid and start time); null otherwise. */
export function liveOwner(file: string): OwnerFile | null {
  try {
    const o = JSON.parse(fs.readFileSync(file, 'utf8')) as OwnerFile;
    if (typeof o.pid !== 'number' || typeof o.runtimeDir !== 'string') return null;
    return serviceAlive({ pid: o.pid, procStart: o.procStart } as ServiceFile) ? o : null;
  } catch {
    return null;
  }
}

/**
 * `logd stop` leaves this in the data dir: the daemon was stopped on purpose,
 * and readers (the dashboard, `logd runs`, `show`, `export`) do not start
 * another; a trainer does, and a daemon that starts removes it.
 */
export function stopMarker(dataDir: string): string {
  return `${dataDir}/daemon.stopped`;
}

/** When `logd stop` stopped the daemon (Unix ms), or null when it was not stopped so. */
export function stoppedAt(dataDir: string): number | null {
  try {
    const at = (JSON.parse(fs.readFileSync(stopMarker(dataDir), 'utf8')) as { at?: number }).at;
    return typeof at === 'number' ? at : null;
  } catch {
    return null;
  }
}
