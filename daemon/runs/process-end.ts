// How a local writer's process ended (issue 34), read from /proc while the
// kernel still keeps it: an exited process stays a zombie, its exit status in
// /proc/PID/stat's field 52 (exit_code, as waitpid(2) returns it), until its
// parent collects it. torchrun's agent collects its workers every
// --monitor-interval (5 s by default in torch 1.13, 0.1 s in later ones); the
// daemon looks every LOGD_EXIT_WATCH_MS (50 ms) at the writers it watches, so
// it reads the status first in most cases. When the parent was quicker, the
// end is recorded as `gone` (its time still the time it was noticed).
//
// An OOM kill is told apart from another SIGKILL by the kernel's counters:
// the writer's memory cgroup's oom_kill (v2 memory.events, v1
// memory.oom_control) and /proc/vmstat's oom_kill, each read when the writer
// joined and again when it is found dead.
import fs from 'node:fs';
import { decodeWaitStatus, END_LINE_CHARS, END_LINES, type RunEnd } from '../../src/story/end.js';

/** A local process's state: alive, a zombie with its wait status, or gone (collected, or never seen). */
export function procState(pid: number, startTime: number | null): { alive: boolean; status: number | null } {
  let stat: string;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return { alive: false, status: null };
  }
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const st = Number(rest[19]);
  if (startTime !== null && Number.isFinite(st) && st !== startTime) return { alive: false, status: null }; // a later process with the pid
  if (rest[0] !== 'Z' && rest[0] !== 'X') return { alive: true, status: null };
  const code = Number(rest[49]); // field 52, exit_code (Linux 3.5+); 0 where /proc hides it from us
  return { alive: false, status: Number.isInteger(code) ? code : null };
}

/** The OOM-kill counter of a process's memory cgroup, as it joined (the kernel's count is OomWatch's). */
export interface OomCounters {
  cgroupFile: string | null;
  cgroupCount: number | null;
}

function readCount(file: string, key: string): number | null {
  try {
    const m = new RegExp(`^${key} (\\d+)$`, 'm').exec(fs.readFileSync(file, 'utf8'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

/** The file holding the oom_kill count of the memory cgroup `pid` is in (v2, or v1's memory controller). */
function cgroupOomFile(pid: number): string | null {
  let text: string;
  try {
    text = fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8');
  } catch {
    return null;
  }
  for (const line of text.split('\n')) {
    const [, controllers, p] = line.split(':');
    if (p === undefined) continue;
    if (controllers.split(',').includes('memory')) {
      const f = `/sys/fs/cgroup/memory${p === '/' ? '' : p}/memory.oom_control`;
      if (fs.existsSync(f)) return f;
    }
    if (controllers === '' && line.startsWith('0::')) {
      const f = `/sys/fs/cgroup${p === '/' ? '' : p}/memory.events`;
      if (fs.existsSync(f)) return f;
    }
  }
  return null;
}

/** The kernel's count of OOM kills since boot (every kill, a memory cgroup's too); null where /proc/vmstat has none. */
export function globalOomKills(): number | null {
  return readCount('/proc/vmstat', 'oom_kill');
}

export function oomCounters(pid: number): OomCounters {
  const cgroupFile = cgroupOomFile(pid);
  return { cgroupFile, cgroupCount: cgroupFile ? readCount(cgroupFile, 'oom_kill') : null };
}

/**
 * The kernel's OOM-kill count as the exit watch saw it change: an OOM kill is counted as the kill is decided, and
 * the killed process becomes a zombie only once it has let go of its memory (milliseconds to a second or two), so
 * a SIGKILL found within OOM_WINDOW_MS of a rise of the count is taken for the OOM killer's.
 */
export class OomWatch {
  private count: number | null = globalOomKills();
  private lookedAt = Date.now();
  private rose: { from: number; to: number; at: number } | null = null;

  /** Reads the count (at each look of the exit watch). A rise across a gap of more than 2 s is not dated: resynced. */
  look(now = Date.now()): void {
    const c = globalOomKills();
    const dated = now - this.lookedAt <= 2000;
    this.lookedAt = now;
    if (dated && c !== null && this.count !== null && c > this.count) this.rose = { from: this.rose && now - this.rose.at <= OOM_WINDOW_MS ? this.rose.from : this.count, to: c, at: now };
    this.count = c;
  }

  /** The rise of the count within the window before `now`, as words, or undefined; `claim`: take one of its kills. */
  recent(now = Date.now(), claim = false): string | undefined {
    this.look(now);
    if (!this.rose || now - this.rose.at > OOM_WINDOW_MS) return undefined;
    if (claim && !this.claim('vmstat', this.rose.from, this.rose.to)) return undefined;
    return `/proc/vmstat oom_kill ${this.rose.from} -> ${this.rose.to}`;
  }

  /** Per counter (`vmstat`, or a cgroup's file): the count up to which its kills were attributed to a process. */
  private claimed = new Map<string, number>();

  /**
   * One kill of a counter that went from `base` to `now`, attributed to one process: each OOM kill the kernel
   * counted explains one death, so the ranks that died after it (stopped by their launcher) are not called OOM
   * kills too. False when every kill counted is taken.
   */
  claim(key: string, base: number, now: number): boolean {
    const taken = Math.max(this.claimed.get(key) ?? base, base);
    if (taken >= now) return false;
    this.claimed.set(key, taken + 1);
    return true;
  }
}

export const OOM_WINDOW_MS = 5000;

/**
 * Where an OOM kill shows, or undefined: the process's memory cgroup's count above what it was when the process
 * joined, or a rise of the kernel's count just before (OomWatch).
 */
export function oomSince(base: OomCounters | null, global: OomWatch): string | undefined {
  if (base?.cgroupFile && base.cgroupCount !== null) {
    const now = readCount(base.cgroupFile, 'oom_kill');
    if (now !== null && now > base.cgroupCount && global.claim(base.cgroupFile, base.cgroupCount, now)) {
      global.recent(Date.now(), true); // the kernel counted the same kill
      return `memory cgroup ${base.cgroupFile.replace(/^\/sys\/fs\/cgroup\/?/, '/').replace(/\/memory\.(events|oom_control)$/, '')} oom_kill ${base.cgroupCount} -> ${now}`;
    }
  }
  return global.recent(Date.now(), true);
}

/** The last console lines of a run, kept as batches arrive (what an end record carries). */
export class LastLines {
  private lines: string[] = [];

  add(entries: readonly { l: string }[]): void {
    for (const e of entries) {
      for (const l of e.l.split('\n')) {
        if (l === '') continue;
        this.lines.push(l.length > END_LINE_CHARS ? `${l.slice(0, END_LINE_CHARS - 1)}…` : l);
      }
    }
    if (this.lines.length > END_LINES * 2) this.lines = this.lines.slice(-END_LINES);
  }

  get(): string[] {
    return this.lines.slice(-END_LINES);
  }
}

/** The parts of an end record that come from the process's exit as the daemon read it. */
export function endFromStatus(status: number | null, oom: string | undefined): Pick<RunEnd, 'exitCode' | 'signal' | 'coreDumped' | 'oom' | 'source'> {
  if (status === null) return { exitCode: null, signal: null, ...(oom ? { oom } : {}), source: 'gone' };
  const d = decodeWaitStatus(status);
  return { exitCode: d.exitCode, signal: d.signal, ...(d.coreDumped ? { coreDumped: true } : {}), ...(d.signal === 'SIGKILL' && oom ? { oom } : {}), source: 'wait-status' };
}
