// Reading a run's history back (for the CLI, exports and tests).
import { f64, u32, type HistoryChunkMsg } from '../src/wire.js';
import type { Connection } from './connection.js';

export interface HistoryRow {
  step: number;
  time: number;
  writer: number;
  values: Map<string, number>;
}

/** Every stored row, in arrival order, optionally only some keys. */
export async function readHistory(conn: Connection, runId: string, keys: string[] = [], timeoutMs = 120_000): Promise<HistoryRow[]> {
  const call = conn.readHistory({ runId, keys });
  const names: string[] = [];
  const rows: HistoryRow[] = [];
  const timer = setTimeout(() => call.cancel(), timeoutMs);
  try {
    await new Promise<void>((resolve, reject) => {
      call.on('data', (c: HistoryChunkMsg) => {
        for (const k of c.keys) names.push(k);
        const steps = f64(c.steps), times = f64(c.times), counts = u32(c.counts), ids = u32(c.keyIds), values = f64(c.values), writers = u32(c.writers);
        let p = 0;
        for (let r = 0; r < c.rows; r++) {
          const m = new Map<string, number>();
          for (let j = 0; j < counts[r]; j++, p++) m.set(names[ids[p]], values[p]);
          rows.push({ step: steps[r], time: times[r], writer: writers[r], values: m });
        }
      });
      call.on('error', (e: Error & { details?: string }) => reject(new Error(`history of run ${runId}: ${e.details ?? e.message}`)));
      call.on('end', () => resolve());
    });
  } finally {
    clearTimeout(timer);
  }
  return rows;
}

/**
 * One row per step where possible: rows of the same step (from several
 * writers, or several log() calls) merge when their keys differ; a key logged
 * twice for one step starts another row, so no value is ever dropped.
 * Rows come out ordered by step, arrival order within a step.
 */
export function mergeBySteps(rows: HistoryRow[]): HistoryRow[] {
  const sorted = rows.map((r, i) => ({ r, i })).sort((a, b) => a.r.step - b.r.step || a.i - b.i).map((x) => x.r);
  const out: HistoryRow[] = [];
  let open: HistoryRow[] = []; // merged rows of the current step
  let step = NaN;
  for (const r of sorted) {
    if (r.step !== step) {
      out.push(...open);
      open = [];
      step = r.step;
    }
    const target = open.find((o) => [...r.values.keys()].every((k) => !o.values.has(k)));
    if (target) {
      for (const [k, v] of r.values) target.values.set(k, v);
      target.time = Math.max(target.time, r.time);
      if (target.writer !== r.writer) target.writer = -1;
    } else {
      open.push({ step: r.step, time: r.time, writer: r.writer, values: new Map(r.values) });
    }
  }
  out.push(...open);
  return out;
}
