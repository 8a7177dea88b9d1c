// Reading a run's history back (CLI, exports, tests), kept columnar: a
// million-row run is a handful of typed arrays, not a million objects.
import { f64, u32, type HistoryChunkMsg } from '../src/wire.js';
import { jsonNumber, ownRecord } from '../src/json.js';
import type { Connection } from './connection.js';

export interface History {
  keys: string[];
  rows: number;
  steps: Float64Array;
  times: Float64Array;
  writers: Uint32Array;
  /** Row r's pairs are [start[r], start[r + 1]). */
  start: Uint32Array;
  keyIds: Uint32Array;
  values: Float64Array;
  /**
   * Only in a downsampled answer (`points` asked): rows are buckets, grouped
   * by metric and ordered by step, one pair each (the mean); `min`/`max` run
   * parallel to `values`, and `stored[k]` is how many points key k has in all
   * (more than its rows here: it was downsampled).
   */
  buckets?: { min: Float64Array; max: Float64Array; stored: number[] };
  /**
   * Only when every attempt's rows were asked (`allAttempts`): per row, the
   * attempt that logged it, and 1 where a later attempt's rewind superseded it.
   */
  attempts?: Uint32Array;
  superseded?: Uint8Array;
}

function concat64(parts: Float64Array[], n: number): Float64Array {
  const out = new Float64Array(n);
  let o = 0;
  for (const p of parts) (out.set(p, o), (o += p.length));
  return out;
}
function concat32(parts: Uint32Array[], n: number): Uint32Array {
  const out = new Uint32Array(n);
  let o = 0;
  for (const p of parts) (out.set(p, o), (o += p.length));
  return out;
}

/**
 * Stored rows in arrival order; `keys` limits the metrics, `tailRows` > 0
 * keeps only the last rows. The latest timeline: rows a rewind superseded are
 * left out, unless `allAttempts` (then they come marked, see History).
 */
export async function readHistory(conn: Connection, runId: string, opts: { keys?: string[]; tailRows?: number; system?: boolean; points?: number; allAttempts?: boolean; timeoutMs?: number } = {}): Promise<History> {
  const points = opts.points && opts.points > 0 ? Math.floor(opts.points) : 0;
  const all = !!opts.allAttempts && !points && !opts.system;
  const call = conn.readHistory({ runId, keys: opts.keys ?? [], tailRows: opts.tailRows ?? 0, system: !!opts.system, points, allAttempts: all });
  const attempts: Uint32Array[] = [], superseded: Uint8Array[] = [];
  const mins: Float64Array[] = [], maxs: Float64Array[] = [], stored: number[] = [];
  let oldDaemon = false;
  const keys: string[] = [];
  const steps: Float64Array[] = [], times: Float64Array[] = [], ids: Uint32Array[] = [], vals: Float64Array[] = [], writers: Uint32Array[] = [], counts: Uint32Array[] = [];
  let rows = 0, pairs = 0;
  const timer = setTimeout(() => call.cancel(), opts.timeoutMs ?? 300_000);
  try {
    await new Promise<void>((resolve, reject) => {
      call.on('data', (c: HistoryChunkMsg) => {
        for (const k of c.keys) keys.push(k);
        steps.push(f64(c.steps));
        times.push(f64(c.times));
        counts.push(u32(c.counts));
        const k = u32(c.keyIds);
        ids.push(k);
        vals.push(f64(c.values));
        if (points && !c.storedPoints) oldDaemon = true; // answered rows, not buckets: it predates `points`
        else if (points) {
          mins.push(f64(c.mins ?? new Uint8Array(0)));
          maxs.push(f64(c.maxs ?? new Uint8Array(0)));
          for (let i = 0; i < c.keys.length; i++) stored.push(Number(c.storedPoints ?? 0));
        }
        writers.push(new Uint32Array(c.rows).fill(c.writer));
        if (all) {
          attempts.push(new Uint32Array(c.rows).fill(c.attempt ?? 0));
          superseded.push(new Uint8Array(c.rows).fill(c.superseded ? 1 : 0));
        }
        rows += c.rows;
        pairs += k.length;
      });
      call.on('error', (e: Error & { details?: string; code?: number }) => reject(Object.assign(new Error(`history of run ${runId}: ${e.details ?? e.message}`), { code: e.code })));
      call.on('end', () => resolve());
    });
  } finally {
    clearTimeout(timer);
  }
  const cnt = concat32(counts, rows);
  const start = new Uint32Array(rows + 1);
  for (let r = 0; r < rows; r++) start[r + 1] = start[r] + cnt[r];
  const h: History = {
    keys, rows, steps: concat64(steps, rows), times: concat64(times, rows), writers: concat32(writers, rows), start,
    keyIds: concat32(ids, pairs), values: concat64(vals, pairs),
  };
  if (points && !oldDaemon) h.buckets = { min: concat64(mins, pairs), max: concat64(maxs, pairs), stored };
  if (all) {
    h.attempts = concat32(attempts, rows);
    h.superseded = new Uint8Array(rows);
    let o = 0;
    for (const p of superseded) (h.superseded.set(p, o), (o += p.length));
  }
  return h;
}

/**
 * One output row per step where possible: rows of the same step (several
 * writers, several log() calls) merge when no key of one holds a different
 * value in the other. A key several writers log with the same value at a step
 * (`epoch`, `lr`, a global step) does not split the step; a key logged twice
 * with different values starts another row, so no value is ever dropped.
 * Returns groups of source-row indices, ordered by step (arrival order within a step).
 */
export function mergeBySteps(h: History): number[][] {
  let sorted = true;
  for (let r = 1; r < h.rows; r++) if (h.steps[r] < h.steps[r - 1]) (sorted = false);
  const order = Array.from({ length: h.rows }, (_, i) => i);
  if (!sorted) order.sort((a, b) => h.steps[a] - h.steps[b] || a - b);
  const out: number[][] = [];
  let i = 0;
  while (i < order.length) {
    let j = i + 1;
    while (j < order.length && h.steps[order[j]] === h.steps[order[i]]) j++;
    if (j === i + 1) out.push([order[i]]);
    else {
      // Each merged row: its source rows and the value it holds for each key.
      const groups: Array<{ rows: number[]; values: Map<number, number> }> = [];
      for (let x = i; x < j; x++) {
        const r = order[x];
        const fits = (g: { rows: number[]; values: Map<number, number> }) => {
          // Every attempt's rows (export --all-attempts): a superseded row never merges with the one that replaced it.
          if (h.attempts && (h.attempts[g.rows[0]] !== h.attempts[r] || h.superseded![g.rows[0]] !== h.superseded![r])) return false;
          for (let p = h.start[r]; p < h.start[r + 1]; p++) {
            const held = g.values.get(h.keyIds[p]);
            if (held !== undefined && !sameValue(held, h.values[p])) return false;
          }
          return true;
        };
        let g = groups.find(fits);
        if (!g) groups.push((g = { rows: [], values: new Map() }));
        g.rows.push(r);
        for (let p = h.start[r]; p < h.start[r + 1]; p++) g.values.set(h.keyIds[p], h.values[p]);
      }
      for (const g of groups) out.push(g.rows);
    }
    i = j;
  }
  return out;
}

/** Equal for the merged view: the same number, or both NaN. */
function sameValue(a: number, b: number): boolean {
  return a === b || (a !== a && b !== b);
}

/** All source rows, one group each (the `--raw` view). */
export function rawRows(h: History): number[][] {
  return Array.from({ length: h.rows }, (_, i) => [i]);
}

/** A merged row as a plain object (for `show` and small outputs). */
export function rowObject(h: History, group: number[], withWriter: boolean): Record<string, unknown> {
  const first = group[0];
  const o = ownRecord({ _step: h.steps[first] as unknown, _time: Math.max(...group.map((r) => h.times[r])) }); // `__proto__` is a name like any other
  if (withWriter) o._writer = h.writers[first];
  for (const r of group) for (let p = h.start[r]; p < h.start[r + 1]; p++) o[h.keys[h.keyIds[p]]] = jsonNumber(h.values[p]);
  return o;
}

/** JSON lines, written by hand: one line per group, keys quoted once. */
export function* jsonLines(h: History, groups: number[][], withWriter: boolean): Generator<string> {
  const quoted = h.keys.map((k) => JSON.stringify(k));
  for (const g of groups) {
    const first = g[0];
    let t = h.times[first];
    for (const r of g) if (h.times[r] > t) t = h.times[r];
    let line = `{"_step":${h.steps[first]},"_time":${t}`;
    if (withWriter) line += `,"_writer":${h.writers[first]}`;
    if (h.attempts) line += `,"_attempt":${h.attempts[first]},"_superseded":${h.superseded![first] === 1}`;
    // A merged row may hold a key from several writers (with one value): written once.
    const seen = g.length > 1 ? new Set<number>() : null;
    for (const r of g) {
      for (let p = h.start[r]; p < h.start[r + 1]; p++) {
        const k = h.keyIds[p];
        if (seen) {
          if (seen.has(k)) continue;
          seen.add(k);
        }
        const v = h.values[p];
        line += `,${quoted[k]}:${Number.isFinite(v) ? v : `"${jsonNumber(v)}"`}`;
      }
    }
    yield line + '}';
  }
}

/** CSV with a header of every key (sorted); empty cells where a row lacks a key. */
export function* csvLines(h: History, groups: number[][], withWriter: boolean): Generator<string> {
  const used = new Set<number>();
  for (let p = 0; p < h.keyIds.length; p++) used.add(h.keyIds[p]);
  const cols = [...used].sort((a, b) => (h.keys[a] < h.keys[b] ? -1 : h.keys[a] > h.keys[b] ? 1 : 0));
  const colOf = new Int32Array(h.keys.length).fill(-1);
  cols.forEach((k, i) => (colOf[k] = i));
  const cell = (s: string) => (/[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s);
  const attemptCols = h.attempts ? ['_attempt', '_superseded'] : [];
  yield ['_step', '_time', ...(withWriter ? ['_writer'] : []), ...attemptCols, ...cols.map((k) => h.keys[k])].map(cell).join(',');
  const cells = new Array<string>(cols.length);
  for (const g of groups) {
    cells.fill('');
    const first = g[0];
    let t = h.times[first];
    for (const r of g) {
      if (h.times[r] > t) t = h.times[r];
      for (let p = h.start[r]; p < h.start[r + 1]; p++) cells[colOf[h.keyIds[p]]] = String(jsonNumber(h.values[p]));
    }
    const attempt = h.attempts ? `,${h.attempts[first]},${h.superseded![first] === 1}` : '';
    yield `${h.steps[first]},${t}${withWriter ? `,${h.writers[first]}` : ''}${attempt},${cells.join(',')}`;
  }
}

/** A run's whole summary and per-key stats (RunInfo carries a capped part of them). */
export async function readSummary(conn: Connection, runId: string, timeoutMs = 300_000): Promise<{ summary: Record<string, unknown>; stats: Record<string, unknown> }> {
  const call = conn.readSummary({ runId });
  const timer = setTimeout(() => call.expire(timeoutMs), timeoutMs);
  // The parts' JSON texts are joined and parsed once: assigning a million
  // keys part by part costs seconds. A key in a later part wins, as in a merge.
  const summaryParts: string[] = [];
  const statsParts: string[] = [];
  const body = (json: string) => json.slice(1, -1);
  await new Promise<void>((resolve, reject) => {
    call.on('data', (c: { summaryJson: string; statsJson: string }) => {
      if (c.summaryJson.length > 2) summaryParts.push(body(c.summaryJson));
      if (c.statsJson.length > 2) statsParts.push(body(c.statsJson));
    });
    call.on('error', (e: Error & { details?: string; code?: number }) => reject(Object.assign(new Error(`summary of run ${runId}: ${e.details ?? e.message}`), { code: e.code })));
    call.on('end', () => resolve());
  }).finally(() => clearTimeout(timer));
  return { summary: JSON.parse(`{${summaryParts.join(',')}}`), stats: JSON.parse(`{${statsParts.join(',')}}`) };
}
