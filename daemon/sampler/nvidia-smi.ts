// nvidia-smi: the query field list, parsers for its CSV output, and the one-shot
// queries (compute-apps). The long-lived loop process lives in gpu-loop.ts.
//
// Parsers never throw: nvidia-smi output varies with driver version, GPU model,
// MIG and permissions, so every field may be `[N/A]`, `[Not Supported]`, an
// error text, or missing; such fields are simply absent from the result.
import type { execa as Execa } from 'execa';
import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, isAbsolute, join } from 'node:path';

const MiB = 1024 * 1024;

/**
 * The exact `--query-gpu` list, in order. `name` is last on purpose: it is the
 * only free-text field, so a comma inside it cannot shift the other columns.
 */
export const GPU_QUERY_FIELDS = [
  'index',
  'uuid',
  'driver_version',
  'memory.total',
  'memory.used',
  'utilization.gpu',
  'utilization.memory',
  'temperature.gpu',
  'power.draw',
  'enforced.power.limit',
  'clocks.sm',
  'clocks.mem',
  'fan.speed',
  'pcie.link.gen.current',
  'pcie.link.width.current',
  'ecc.errors.corrected.volatile.total',
  'ecc.errors.uncorrected.volatile.total',
  'name',
] as const;

export type GpuQueryField = (typeof GPU_QUERY_FIELDS)[number];

/** Fields copied straight into metrics (`gpu.<index>.<key>`), with their unit as reported. */
const DIRECT_METRICS: ReadonlyArray<[GpuQueryField, string]> = [
  ['utilization.gpu', 'gpu'], // %
  ['utilization.memory', 'memory'], // % of time memory was read or written
  ['temperature.gpu', 'temp'], // °C
  ['power.draw', 'powerWatts'],
  ['enforced.power.limit', 'enforcedPowerLimitWatts'],
  ['clocks.sm', 'smClock'], // MHz
  ['clocks.mem', 'memoryClock'], // MHz
  ['fan.speed', 'fanSpeed'], // %
  ['pcie.link.gen.current', 'pcieLinkGen'],
  ['pcie.link.width.current', 'pcieLinkWidth'],
  ['ecc.errors.corrected.volatile.total', 'correctedMemoryErrors'],
  ['ecc.errors.uncorrected.volatile.total', 'uncorrectedMemoryErrors'],
];

/** One GPU's line from the loop: identity plus the metrics it reported this time. */
export interface GpuReading {
  index: number;
  uuid: string | null;
  name: string | null;
  driverVersion: string | null;
  memoryTotalBytes: number | null;
  /** Keys without the `gpu.<index>.` prefix, e.g. `temp`, `memoryAllocatedBytes`. */
  metrics: Record<string, number>;
}

export type ParseResult<T> = { ok: true; value: T } | { ok: false; reason: string };

/**
 * A number from an nvidia-smi cell, or undefined for every non-value nvidia-smi
 * prints: `[N/A]`, `N/A`, `[Not Supported]`, `[Unknown Error]`, `[GPU is lost]`,
 * empty. Tolerates a trailing unit (`35 %`, `80 W`) in case `nounits` is ignored.
 */
export function parseNumber(cell: string | undefined): number | undefined {
  if (cell === undefined) return undefined;
  if (/^-?\d+(?:\.\d+)?$/.test(cell)) return Number(cell); // the common case, already trimmed
  const m = /^\s*(-?\d+(?:\.\d+)?)\s*(?:[A-Za-z%]+)?\s*$/.exec(cell);
  if (!m) return undefined;
  const n = Number(m[1]);
  return Number.isFinite(n) ? n : undefined;
}

function parseText(cell: string | undefined): string | null {
  if (cell === undefined) return null;
  const t = cell.trim();
  if (t === '' || /^\[.*\]$/.test(t) || t === 'N/A') return null;
  return t;
}

/** Splits a CSV line from nvidia-smi (it never quotes); the surplus of a split name is re-joined. */
function splitCells(line: string, fieldCount: number): string[] {
  const cells = line.split(',');
  if (cells.length > fieldCount) {
    const head = cells.slice(0, fieldCount - 1);
    head.push(cells.slice(fieldCount - 1).join(','));
    return head.map((c) => c.trim());
  }
  return cells.map((c) => c.trim());
}

const positionCache = new WeakMap<readonly string[], Map<string, number>>();
function fieldPositions(fields: readonly string[]): Map<string, number> {
  let map = positionCache.get(fields);
  if (!map) positionCache.set(fields, (map = new Map(fields.map((f, i) => [f, i]))));
  return map;
}

/**
 * Parses one `--query-gpu` line for `fields` (default: GPU_QUERY_FIELDS). A line
 * whose index is not a number (a driver error, a warning) is rejected with the
 * line as the reason; missing trailing columns just leave their metrics out.
 */
export function parseGpuLine(
  line: string,
  fields: readonly string[] = GPU_QUERY_FIELDS,
): ParseResult<GpuReading> {
  const text = line.trim();
  if (text === '') return { ok: false, reason: 'empty line' };
  const cells = splitCells(text, fields.length);
  const positions = fieldPositions(fields);
  const cell = (f: string): string | undefined => {
    const i = positions.get(f);
    return i === undefined ? undefined : cells[i];
  };
  const index = parseNumber(cell('index'));
  if (index === undefined || !Number.isInteger(index) || index < 0 || !/^\d+$/.test(cell('index') ?? '')) {
    return { ok: false, reason: `not a GPU line: ${text.slice(0, 200)}` };
  }
  const metrics: Record<string, number> = {};
  for (const [field, key] of DIRECT_METRICS) {
    const v = parseNumber(cell(field));
    if (v !== undefined) metrics[key] = v;
  }
  const totalMiB = parseNumber(cell('memory.total'));
  const usedMiB = parseNumber(cell('memory.used'));
  if (usedMiB !== undefined) metrics.memoryAllocatedBytes = usedMiB * MiB;
  if (usedMiB !== undefined && totalMiB !== undefined && totalMiB > 0) {
    metrics.memoryAllocated = (usedMiB / totalMiB) * 100;
  }
  const draw = metrics.powerWatts;
  const limit = metrics.enforcedPowerLimitWatts;
  if (draw !== undefined && limit !== undefined && limit > 0) metrics.powerPercent = (draw / limit) * 100;
  return {
    ok: true,
    value: {
      index,
      uuid: parseText(cell('uuid')),
      name: parseText(cell('name')),
      driverVersion: parseText(cell('driver_version')),
      memoryTotalBytes: totalMiB === undefined ? null : totalMiB * MiB,
      metrics,
    },
  };
}

export const COMPUTE_APPS_FIELDS = ['pid', 'gpu_uuid', 'used_memory'] as const;

/** One process's memory on one GPU, from `--query-compute-apps`. */
export interface ComputeApp {
  pid: number;
  gpuUuid: string;
  /** null where the driver cannot say (`[N/A]`, e.g. without permission or under MIG). */
  usedMemoryBytes: number | null;
}

/** Parses the whole output of one `--query-compute-apps=pid,gpu_uuid,used_memory` run. */
export function parseComputeApps(output: string): ComputeApp[] {
  const apps: ComputeApp[] = [];
  for (const raw of output.split('\n')) {
    const cells = raw.split(',').map((c) => c.trim());
    if (cells.length < 2 || !/^\d+$/.test(cells[0] ?? '')) continue; // "No running processes found", errors
    const gpuUuid = parseText(cells[1]);
    if (gpuUuid === null) continue;
    const mib = parseNumber(cells[2]);
    apps.push({ pid: Number(cells[0]), gpuUuid, usedMemoryBytes: mib === undefined ? null : mib * MiB });
  }
  return apps;
}

/**
 * Resolves `name` the way a shell would (absolute/relative path as is, else each
 * PATH entry), so that "no nvidia-smi here" is known before spawning anything.
 */
export function resolveExecutable(name: string, pathEnv = process.env.PATH ?? ''): string | null {
  const candidates = name.includes('/') || isAbsolute(name) ? [name] : pathEnv.split(delimiter).filter(Boolean).map((d) => join(d, name));
  for (const c of candidates) {
    try {
      accessSync(c, constants.X_OK);
      if (statSync(c).isFile()) return c;
    } catch {
      // not here; try the next entry
    }
  }
  return null;
}

export interface OneShotResult {
  ok: boolean;
  stdout: string;
  /** Why it failed, in one line (exit code, first output line, or the deadline). */
  reason: string;
}

let execaFn: typeof Execa | null = null;

/**
 * execa, loaded at its first use: a daemon on a machine without nvidia-smi never loads it, and one with it loads it
 * after its start (the module graph costs some 80 ms and 15 MB, measured with `node` importing it alone).
 */
export async function loadExeca(): Promise<typeof Execa> {
  return (execaFn ??= (await import('execa')).execa);
}

/** execa when a use has loaded it (the GPU loop starts only after a probe through runOnce did), else null. */
export function loadedExeca(): typeof Execa | null {
  return execaFn;
}

/**
 * Runs nvidia-smi once with a deadline; the child is SIGTERMed at the deadline
 * and SIGKILLed `killGraceMs` later, and the promise settles even if it never
 * exits (a tool stuck in the driver cannot always be killed).
 */
export async function runOnce(
  file: string,
  args: string[],
  deadlineMs: number,
  killGraceMs = 1000,
  signal?: AbortSignal,
): Promise<OneShotResult> {
  const execa = await loadExeca();
  const child = execa(file, args, {
    stdin: 'ignore',
    reject: false,
    timeout: deadlineMs,
    forceKillAfterDelay: killGraceMs,
    cleanup: true,
    maxBuffer: 4 * MiB,
    ...(signal ? { cancelSignal: signal } : {}),
  });
  let timer: NodeJS.Timeout | undefined;
  const giveUp = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), deadlineMs + killGraceMs + 500);
    timer.unref();
  });
  const result = await Promise.race([child, giveUp]);
  clearTimeout(timer);
  if (result === null) return { ok: false, stdout: '', reason: `no exit within ${deadlineMs} ms, abandoned` };
  const stdout = String(result.stdout ?? '');
  if (result.timedOut) return { ok: false, stdout, reason: `timed out after ${deadlineMs} ms` };
  if (result.isCanceled) return { ok: false, stdout, reason: 'cancelled' };
  if (result.exitCode !== 0) {
    const first = firstLine(stdout) || firstLine(String(result.stderr ?? ''));
    const how = result.exitCode === undefined ? (result.signal ?? 'failed to start') : `exit ${result.exitCode}`;
    return { ok: false, stdout, reason: first ? `${how}: ${first}` : how };
  }
  return { ok: true, stdout, reason: '' };
}

export function firstLine(text: string): string {
  return (text.split('\n').find((l) => l.trim() !== '') ?? '').trim().slice(0, 300);
}

export function gpuLoopArgs(intervalMs: number, fields: readonly string[] = GPU_QUERY_FIELDS): string[] {
  return [`--query-gpu=${fields.join(',')}`, '--format=csv,noheader,nounits', '-lms', String(Math.max(1, Math.round(intervalMs)))];
}

export function gpuOnceArgs(fields: readonly string[] = GPU_QUERY_FIELDS): string[] {
  return [`--query-gpu=${fields.join(',')}`, '--format=csv,noheader,nounits'];
}

export function computeAppsArgs(): string[] {
  return [`--query-compute-apps=${COMPUTE_APPS_FIELDS.join(',')}`, '--format=csv,noheader,nounits'];
}
