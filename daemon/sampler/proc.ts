// proc: readers for /proc — system CPU, disk and network counters, per-process
// CPU/RSS, and process trees. Parsers are pure (text in, numbers out) so tests
// can feed captured files; readers take a `procRoot` for the same reason.
//
// Reads are synchronous on purpose: procfs files are generated from kernel
// memory and never wait on a disk, and a sync read costs ~14 µs of CPU against
// ~200 µs for fs.promises.readFile (measured), which keeps sampling cheap.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { endianness } from 'node:os';

/**
 * The kernel's page size and USER_HZ, from the ELF auxiliary vector the kernel
 * gave this process (AT_PAGESZ = 6, AT_CLKTCK = 17); Node has no sysconf().
 * Falls back to the usual 4096 and 100.
 */
function auxv(): { pageSize: number; ticksPerSecond: number } {
  const out = { pageSize: 4096, ticksPerSecond: 100 };
  try {
    const buf = readFileSync('/proc/self/auxv');
    if (!['x64', 'arm64', 'ppc64', 's390x', 'riscv64', 'loong64'].includes(process.arch) || buf.length % 16 !== 0) return out;
    const read = (at: number): bigint => (endianness() === 'LE' ? buf.readBigUInt64LE(at) : buf.readBigUInt64BE(at));
    for (let i = 0; i + 16 <= buf.length; i += 16) {
      const type = read(i);
      if (type === 6n) out.pageSize = Number(read(i + 8));
      if (type === 17n) out.ticksPerSecond = Number(read(i + 8));
    }
  } catch {
    // no /proc/self/auxv: keep the defaults
  }
  return out;
}
const AUXV = auxv();

/** Process CPU times in /proc are in USER_HZ ticks (100 on every mainstream Linux). */
export const TICKS_PER_SECOND = AUXV.ticksPerSecond;
export const PAGE_SIZE = AUXV.pageSize;

export function readText(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}

export interface CpuTimes {
  busy: number;
  idle: number;
}

/** `/proc/stat` → aggregate (`all`) and per-core busy/idle tick counters. */
export function parseProcStat(text: string): { all: CpuTimes; cores: CpuTimes[] } {
  let all: CpuTimes = { busy: 0, idle: 0 };
  const cores: CpuTimes[] = [];
  for (const line of text.split('\n')) {
    const m = /^cpu(\d*)\s+(.*)$/.exec(line);
    if (!m) continue;
    // user nice system idle iowait irq softirq steal (guest time is inside user already)
    const v = m[2]!.trim().split(/\s+/).map(Number);
    const at = (i: number): number => (Number.isFinite(v[i]) ? v[i]! : 0);
    const times = { busy: at(0) + at(1) + at(2) + at(5) + at(6) + at(7), idle: at(3) + at(4) };
    if (m[1] === '') all = times;
    else cores[Number(m[1])] = times;
  }
  return { all, cores };
}

/** Busy share between two readings, in percent; undefined when no time passed. */
export function cpuPercent(prev: CpuTimes, cur: CpuTimes): number | undefined {
  const busy = cur.busy - prev.busy;
  const total = busy + (cur.idle - prev.idle);
  if (total <= 0 || busy < 0) return undefined;
  return (busy / total) * 100;
}

export interface IoBytes {
  readBytes: number;
  writeBytes: number;
}

/** Partitions, and virtual devices that only re-count I/O of the disks beneath them. */
export function isCountedDisk(name: string, sysBlock = '/sys/block'): boolean {
  if (/^(loop|ram|zram|dm-|md|sr|fd|nbd)/.test(name)) return false;
  if (existsSync(sysBlock)) return existsSync(`${sysBlock}/${name}`); // lists whole disks only
  return !/^((sd|vd|xvd|hd)[a-z]+\d+|(nvme\d+n\d+|mmcblk\d+)p\d+)$/.test(name);
}

/**
 * `/proc/diskstats` → bytes read and written by whole disks. Sectors there are
 * always 512 bytes, whatever the device's sector size.
 */
export function parseDiskstats(text: string, counted: (name: string) => boolean): IoBytes {
  let readBytes = 0;
  let writeBytes = 0;
  for (const line of text.split('\n')) {
    const c = line.trim().split(/\s+/);
    if (c.length < 10 || !counted(c[2]!)) continue;
    const r = Number(c[5]);
    const w = Number(c[9]);
    if (Number.isFinite(r)) readBytes += r * 512;
    if (Number.isFinite(w)) writeBytes += w * 512;
  }
  return { readBytes, writeBytes };
}

/** `/proc/net/dev` → bytes received and sent over every interface but loopback. */
export function parseNetDev(text: string): { recvBytes: number; sentBytes: number } {
  let recvBytes = 0;
  let sentBytes = 0;
  for (const line of text.split('\n')) {
    const colon = line.indexOf(':');
    if (colon < 0) continue;
    const iface = line.slice(0, colon).trim();
    if (iface === 'lo' || iface.includes('|')) continue;
    const c = line.slice(colon + 1).trim().split(/\s+/).map(Number);
    if (c.length < 9) continue;
    if (Number.isFinite(c[0])) recvBytes += c[0]!;
    if (Number.isFinite(c[8])) sentBytes += c[8]!;
  }
  return { recvBytes, sentBytes };
}

export interface PidStat {
  pid: number;
  ppid: number;
  /** utime + stime, in ticks. */
  cpuTicks: number;
  /** Start time in ticks after boot: with pid, identifies a process across pid reuse. */
  startTicks: number;
  threads: number;
  /** Resident set size (field 24, in pages) in bytes. */
  rssBytes: number;
}

/** `/proc/<pid>/stat` → the fields we use; the command name may hold spaces and parentheses. */
export function parsePidStat(pid: number, text: string): PidStat | null {
  const close = text.lastIndexOf(')');
  if (close < 0) return null;
  // Fields after the name, numbered from 3 (state) as in proc(5).
  const f = text.slice(close + 2).trim().split(/\s+/);
  const field = (n: number): number => Number(f[n - 3]);
  const stat = { pid, ppid: field(4), cpuTicks: field(14) + field(15), startTicks: field(22), threads: field(20), rssBytes: field(24) * PAGE_SIZE };
  return Number.isFinite(stat.ppid) && Number.isFinite(stat.cpuTicks) ? stat : null;
}

export function readPidStat(pid: number, procRoot = '/proc'): PidStat | null {
  const text = readText(`${procRoot}/${pid}/stat`);
  return text === null ? null : parsePidStat(pid, text);
}

/**
 * Finds process trees. Uses `/proc/<pid>/task/<tid>/children` where the kernel
 * has it (CONFIG_PROC_CHILDREN; it only walks the tree), else one scan of
 * `/proc/* /stat` per snapshot, shared by every root asked about in it.
 * Create one per sample: it caches what it read.
 */
export class ProcessSnapshot {
  /** Per procfs root: does this kernel have the `children` files? Learnt once. */
  private static childrenFiles = new Map<string, boolean>();
  private parentsScan: Map<number, number[]> | null = null;
  private stats = new Map<number, PidStat | null>();

  constructor(
    private readonly procRoot = '/proc',
    private readonly strategy: 'auto' | 'scan' = 'auto',
  ) {}

  stat(pid: number): PidStat | null {
    if (!this.stats.has(pid)) this.stats.set(pid, readPidStat(pid, this.procRoot));
    return this.stats.get(pid) ?? null;
  }

  /** `root` and all its live descendants (root first); empty when root is gone. */
  tree(root: number): number[] {
    if (this.stat(root) === null) return [];
    const out: number[] = [];
    const seen = new Set<number>();
    const queue = [root];
    while (queue.length > 0) {
      const pid = queue.shift()!;
      if (seen.has(pid)) continue;
      seen.add(pid);
      out.push(pid);
      queue.push(...this.children(pid));
    }
    return out;
  }

  children(pid: number): number[] {
    if (this.strategy === 'auto' && ProcessSnapshot.childrenFiles.get(this.procRoot) !== false) {
      const viaFiles = this.childrenFromFiles(pid);
      if (viaFiles !== null) return viaFiles;
    }
    return this.scan().get(pid) ?? [];
  }

  private childrenFromFiles(pid: number): number[] | null {
    let tids: string[];
    try {
      tids = readdirSync(`${this.procRoot}/${pid}/task`);
    } catch {
      return []; // the process is gone
    }
    const out: number[] = [];
    for (const tid of tids) {
      const text = readText(`${this.procRoot}/${pid}/task/${tid}/children`);
      if (text === null) {
        const known = ProcessSnapshot.childrenFiles.get(this.procRoot);
        if (known === undefined && existsSync(`${this.procRoot}/${pid}/task/${tid}`)) {
          ProcessSnapshot.childrenFiles.set(this.procRoot, false); // kernel built without CONFIG_PROC_CHILDREN
          return null;
        }
        continue;
      }
      ProcessSnapshot.childrenFiles.set(this.procRoot, true);
      for (const c of text.trim().split(/\s+/)) if (/^\d+$/.test(c)) out.push(Number(c));
    }
    return out;
  }

  private scan(): Map<number, number[]> {
    if (this.parentsScan) return this.parentsScan;
    const byParent = new Map<number, number[]>();
    let names: string[] = [];
    try {
      names = readdirSync(this.procRoot);
    } catch {
      // no procfs: no trees
    }
    for (const name of names) {
      if (!/^\d+$/.test(name)) continue;
      const st = this.stat(Number(name));
      if (!st) continue;
      const list = byParent.get(st.ppid);
      if (list) list.push(st.pid);
      else byParent.set(st.ppid, [st.pid]);
    }
    this.parentsScan = byParent;
    return byParent;
  }
}

/** A root pid and all its live descendants (root first); empty when the root is gone. */
export function processTree(root: number): number[] {
  return new ProcessSnapshot().tree(root);
}
