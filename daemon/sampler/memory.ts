// memory: system memory as the workload experiences it. Inside a container or
// a batch job (Slurm, Kubernetes) the binding limit is the cgroup's, not the
// machine's RAM, so memory_percent is measured against whichever is smaller.
import { existsSync } from 'node:fs';
import { readText } from './proc.js';

export interface MemoryReading {
  /** The limit that applies: the smaller of MemTotal and the tightest cgroup limit. */
  limitBytes: number;
  /** In use against that limit (for a cgroup: usage less inactive page cache, as `docker stats`). */
  usedBytes: number;
  availableBytes: number;
  percent: number;
  /** Where the limit came from. */
  source: 'meminfo' | 'cgroup2' | 'cgroup1';
}

/** `/proc/meminfo` → total and available bytes. */
export function parseMeminfo(text: string): { totalBytes: number; availableBytes: number } | null {
  const kb = (key: string): number | undefined => {
    const m = new RegExp(`^${key}:\\s+(\\d+)\\s+kB`, 'm').exec(text);
    return m ? Number(m[1]) * 1024 : undefined;
  };
  const total = kb('MemTotal');
  if (total === undefined) return null;
  // Kernels before 3.14 have no MemAvailable; free + cache is the classic estimate.
  const available = kb('MemAvailable') ?? (kb('MemFree') ?? 0) + (kb('Buffers') ?? 0) + (kb('Cached') ?? 0);
  return { totalBytes: total, availableBytes: Math.min(available, total) };
}

function statValue(statText: string | null, key: string): number {
  if (statText === null) return 0;
  const m = new RegExp(`^${key} (\\d+)$`, 'm').exec(statText);
  return m ? Number(m[1]) : 0;
}

/** Directories from `dir` up to `root`, deepest first. */
function ancestors(root: string, relPath: string): string[] {
  const parts = relPath.split('/').filter(Boolean);
  const out: string[] = [];
  for (let n = parts.length; n >= 0; n--) out.push([root, ...parts.slice(0, n)].join('/'));
  return out;
}

export interface CgroupMemory {
  limitBytes: number;
  usedBytes: number;
  version: 2 | 1;
}

/**
 * The tightest memory limit on this process's cgroup path and the usage at that
 * level. Walks up from the process's own cgroup because limits are often set
 * on an ancestor (a Slurm job, a pod) while the process sits in a leaf. Where
 * the path from /proc/self/cgroup is not visible (a container without a cgroup
 * namespace mounts its own cgroup at the root), the root is used. Null: no limit.
 */
export function readCgroupMemory(cgroupRoot = '/sys/fs/cgroup', selfCgroup = readText('/proc/self/cgroup') ?? ''): CgroupMemory | null {
  const v2 = /^0::(\/.*)$/m.exec(selfCgroup);
  const v1 = /^\d+:(?:[^:]*,)?memory(?:,[^:]*)?:(\/.*)$/m.exec(selfCgroup);
  if (v1 && existsSync(`${cgroupRoot}/memory/memory.limit_in_bytes`)) {
    return tightest(ancestors(`${cgroupRoot}/memory`, v1[1]!), 'memory.limit_in_bytes', (dir) => {
      const usage = Number(readText(`${dir}/memory.usage_in_bytes`)?.trim());
      return usage - statValue(readText(`${dir}/memory.stat`), 'total_inactive_file');
    }, 1);
  }
  if (v2 || existsSync(`${cgroupRoot}/cgroup.controllers`)) {
    return tightest(ancestors(cgroupRoot, v2?.[1] ?? '/'), 'memory.max', (dir) => {
      const current = Number(readText(`${dir}/memory.current`)?.trim());
      return current - statValue(readText(`${dir}/memory.stat`), 'inactive_file');
    }, 2);
  }
  return null;
}

function tightest(dirs: string[], limitFile: string, usage: (dir: string) => number, version: 1 | 2): CgroupMemory | null {
  let best: CgroupMemory | null = null;
  for (const dir of dirs) {
    const raw = readText(`${dir}/${limitFile}`)?.trim();
    if (raw === undefined || raw === 'max') continue;
    const limit = Number(raw);
    // cgroup v1 says "no limit" with a huge page-aligned number (~2^63).
    if (!Number.isFinite(limit) || limit <= 0 || limit >= 2 ** 60) continue;
    if (best && best.limitBytes <= limit) continue;
    const used = usage(dir);
    if (Number.isFinite(used)) best = { limitBytes: limit, usedBytes: Math.max(0, used), version };
  }
  return best;
}

/** Combines meminfo and the cgroup into the one figure users expect. */
export function memoryReading(meminfo: ReturnType<typeof parseMeminfo>, cgroup: CgroupMemory | null): MemoryReading | null {
  if (meminfo === null) return null;
  if (cgroup && cgroup.limitBytes < meminfo.totalBytes) {
    const used = Math.min(cgroup.usedBytes, cgroup.limitBytes);
    return {
      limitBytes: cgroup.limitBytes,
      usedBytes: used,
      availableBytes: Math.min(cgroup.limitBytes - used, meminfo.availableBytes),
      percent: (used / cgroup.limitBytes) * 100,
      source: cgroup.version === 2 ? 'cgroup2' : 'cgroup1',
    };
  }
  const used = meminfo.totalBytes - meminfo.availableBytes;
  return {
    limitBytes: meminfo.totalBytes,
    usedBytes: used,
    availableBytes: meminfo.availableBytes,
    percent: (used / meminfo.totalBytes) * 100,
    source: 'meminfo',
  };
}

export function readMemory(procRoot = '/proc', cgroupRoot = '/sys/fs/cgroup'): MemoryReading | null {
  const meminfo = readText(`${procRoot}/meminfo`);
  return memoryReading(meminfo === null ? null : parseMeminfo(meminfo), readCgroupMemory(cgroupRoot));
}
