// `logd export --format parquet|arrow`: a run's history as one columnar file, the rows `jsonl` and `csv` give
// (merged by step, or as stored with --raw): `_step`, `_time` (seconds since the epoch), `_writer` (--raw),
// `_attempt` and `_superseded` (--all-attempts), then one float64 column per metric, null where a row has no
// value for it (NaN and ±inf logged stay NaN and ±inf). Parquet by hyparquet-writer (pure JavaScript, snappy);
// Arrow's IPC file format (Feather v2) by apache-arrow. Both libraries load only for these formats.
import type { History } from '../../client/history.js';

export interface ExportColumn { name: string; data: Float64Array | Int32Array | boolean[] | Array<number | null>; kind: 'f64' | 'f64?' | 'i32' | 'bool' }

/** The columns of `groups` (rows of `h`, merged or raw), in the order csv writes them. */
export function exportColumns(h: History, groups: number[][], withWriter: boolean): ExportColumn[] {
  const used = new Set<number>();
  for (let p = 0; p < h.keyIds.length; p++) used.add(h.keyIds[p]);
  const keys = [...used].sort((a, b) => (h.keys[a] < h.keys[b] ? -1 : h.keys[a] > h.keys[b] ? 1 : 0));
  const n = groups.length;
  const step = new Float64Array(n), time = new Float64Array(n);
  const writer = new Int32Array(withWriter ? n : 0);
  const attempt = new Int32Array(h.attempts ? n : 0);
  const superseded: boolean[] = [];
  const cols = keys.map(() => new Array<number | null>(n).fill(null));
  const colOf = new Int32Array(h.keys.length).fill(-1);
  keys.forEach((k, i) => (colOf[k] = i));
  groups.forEach((g, i) => {
    const first = g[0];
    step[i] = h.steps[first];
    let t = h.times[first];
    for (const r of g) {
      if (h.times[r] > t) t = h.times[r];
      for (let p = h.start[r]; p < h.start[r + 1]; p++) cols[colOf[h.keyIds[p]]][i] = h.values[p];
    }
    time[i] = t;
    if (withWriter) writer[i] = h.writers[first];
    if (h.attempts) (attempt[i] = h.attempts[first], superseded.push(h.superseded![first] === 1));
  });
  const out: ExportColumn[] = [{ name: '_step', data: step, kind: 'f64' }, { name: '_time', data: time, kind: 'f64' }];
  if (withWriter) out.push({ name: '_writer', data: writer, kind: 'i32' });
  if (h.attempts) out.push({ name: '_attempt', data: attempt, kind: 'i32' }, { name: '_superseded', data: superseded, kind: 'bool' });
  keys.forEach((k, i) => out.push({ name: h.keys[k], data: cols[i], kind: 'f64?' }));
  return out;
}

/** The columns as a Parquet file's bytes. */
export async function parquetBytes(cols: ExportColumn[], createdBy: string): Promise<Uint8Array> {
  const { parquetWriteBuffer } = await import('hyparquet-writer');
  const buf = parquetWriteBuffer({
    columnData: cols.map((c) => ({
      name: c.name,
      data: c.kind === 'f64' || c.kind === 'i32' ? Array.from(c.data as ArrayLike<number>) : (c.data as Array<number | null | boolean>),
      type: c.kind === 'i32' ? 'INT32' as const : c.kind === 'bool' ? 'BOOLEAN' as const : 'DOUBLE' as const,
      nullable: c.kind === 'f64?',
    })),
    createdBy,
    rowGroupSize: 1_000_000,
  });
  return new Uint8Array(buf);
}

/** The columns as an Arrow IPC file's bytes (Feather v2: pandas.read_feather, polars.read_ipc, pyarrow.ipc). */
export async function arrowBytes(cols: ExportColumn[]): Promise<Uint8Array> {
  const arrow = await import('apache-arrow');
  const vectors: Record<string, unknown> = {};
  for (const c of cols) {
    const type = c.kind === 'i32' ? new arrow.Int32() : c.kind === 'bool' ? new arrow.Bool() : new arrow.Float64();
    vectors[c.name] = c.kind === 'f64' || c.kind === 'i32' ? arrow.makeVector(c.data as Float64Array | Int32Array) : arrow.vectorFromArray(c.data as Array<number | boolean | null>, type);
  }
  return arrow.tableToIPC(new arrow.Table(vectors as Record<string, InstanceType<typeof arrow.Vector>>), 'file');
}
