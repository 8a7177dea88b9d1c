// What a ReadHistory answer is made of, from the batches a log read gives
// (daemon/store/history-read.ts): the rows themselves (filtered to the keys
// asked for), or, downsampled (points > 0), one chunk of buckets per metric.
// Pure: the same code runs on the daemon's main thread and on a read worker.
import type { HistoryChunkMsg } from '../../src/wire.js';
import { bytesOf } from '../../src/wire.js';
import { MetricCollector, bucketPoints } from '../../src/downsample.js';
import type { HistoryBatch } from '../store/format.js';
import type { HistoryChunkFn } from '../store/history-read.js';

/**
 * The most metrics a downsampled read of "every metric" (no keys named) buckets: each one's points are held
 * until the read ends, so a run with 200 000 names would take gigabytes. Past it the read is refused with
 * what to do (name the keys); the dashboard names the ones it draws.
 */
export const MAX_ALL_METRICS = 1000;

export interface HistoryAsk { keys: string[]; points: number; allAttempts: boolean }

export class TooManyMetrics extends Error {
  override name = 'TooManyMetrics';
}

/** Builds the answer's chunks as the log is read; `emit` gets each one, in order. */
export class HistoryAnswer {
  private readonly wanted: Set<string>;
  private names: string[] = [];
  private readonly collector: MetricCollector | null;

  constructor(private readonly ask: HistoryAsk, private readonly emit: (c: HistoryChunkMsg) => void) {
    this.wanted = new Set(ask.keys);
    this.collector = ask.points > 0 ? new MetricCollector(this.wanted) : null;
  }

  /** For the store's read: each batch with the names it added. */
  readonly onChunk: HistoryChunkFn = (b, added, _first, mark) => {
    for (const n of added) this.names.push(n);
    if (this.collector) {
      if (this.wanted.size === 0 && this.names.length > MAX_ALL_METRICS) {
        throw new TooManyMetrics(`the run has more than ${MAX_ALL_METRICS} metrics: a downsampled read of all of them is refused; name the metrics to read (keys; \`logd keys\`-style listings page them)`);
      }
      this.collector.add(b.rows, b.steps, b.times, b.counts, b.keyIds, b.values, this.names);
      return;
    }
    const f = this.wanted.size > 0 ? filterKeys(b, this.names, this.wanted) : b;
    if (f.rows > 0 || added.length > 0) {
      this.emit({
        keys: added, rows: f.rows, steps: bytesOf(f.steps), times: bytesOf(f.times), counts: bytesOf(f.counts), keyIds: bytesOf(f.keyIds), values: bytesOf(f.values), writer: b.writerIdx,
        ...(this.ask.allAttempts && !this.ask.points && mark ? { attempt: mark.attempt, superseded: mark.superseded } : {}),
      });
    }
  };

  /** After the read: the buckets of a downsampled answer (one chunk per metric). */
  end(): void {
    if (!this.collector) return;
    let i = 0;
    for (const [name, cols] of this.collector.byKey) {
      if (cols.n === 0) continue;
      const b = bucketPoints(cols, this.ask.points);
      const rows = b.step.length;
      this.emit({
        keys: [name], rows, steps: bytesOf(b.step), times: bytesOf(b.time), counts: bytesOf(new Uint32Array(rows).fill(1)),
        keyIds: bytesOf(new Uint32Array(rows).fill(i++)), values: bytesOf(b.mean), writer: 0,
        mins: bytesOf(b.min), maxs: bytesOf(b.max), storedPoints: b.stored,
      });
    }
  }
}

/** Only the wanted keys, and only rows that have one of them. */
function filterKeys(b: HistoryBatch, names: string[], wanted: Set<string>): HistoryBatch {
  const want = new Uint8Array(names.length);
  names.forEach((n, i) => (want[i] = wanted.has(n) ? 1 : 0));
  const { counts, keyIds, values, steps, times } = b;
  const oc = new Uint32Array(b.rows), ok = new Uint32Array(keyIds.length), ov = new Float64Array(values.length);
  const os = new Float64Array(b.rows), ot = new Float64Array(b.rows);
  let r2 = 0, p2 = 0, p = 0;
  for (let r = 0; r < b.rows; r++) {
    let c = 0;
    for (let j = 0; j < counts[r]; j++, p++) {
      if (want[keyIds[p]]) {
        ok[p2] = keyIds[p];
        ov[p2++] = values[p];
        c++;
      }
    }
    if (c > 0) {
      oc[r2] = c;
      os[r2] = steps[r];
      ot[r2++] = times[r];
    }
  }
  return { ...b, rows: r2, counts: oc.subarray(0, r2), keyIds: ok.subarray(0, p2), values: ov.subarray(0, p2), steps: os.subarray(0, r2), times: ot.subarray(0, r2) };
}
