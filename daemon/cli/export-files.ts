// `logd export --format parquet|arrow`: a run's history as one columnar file, the rows `jsonl` and `csv` give
// (merged by step, or as stored with --raw): `_step`, `_time` (seconds since the epoch), `_writer` (--raw),
// `_attempt` and `_superseded` (--all-attempts), then one float64 column per metric, null where a row has no
// value for it (NaN and ±inf logged stay NaN and ±inf). Parquet by hyparquet-writer (pure JavaScript, snappy);
// Arrow's IPC file format (Feather v2) by apache-arrow. Both libraries load only for these formats.
import type { History } from '../../client/history.js';

export interface ExportColumn {
  name: string;
  data: Float64Array | Int32Array | boolean[] | Array<number | null> | string[];
  /** f64?, i32?: nullable; str: text (a group's run_id). */
  kind: 'f64' | 'f64?' | 'i32' | 'i32?' | 'bool' | 'str';
}

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
      data: c.kind === 'f64' || c.kind === 'i32' ? Array.from(c.data as ArrayLike<number>) : (c.data as Array<number | null | boolean | string>),
      type: c.kind === 'i32' || c.kind === 'i32?' ? 'INT32' as const : c.kind === 'bool' ? 'BOOLEAN' as const : c.kind === 'str' ? 'STRING' as const : 'DOUBLE' as const,
      nullable: c.kind === 'f64?' || c.kind === 'i32?',
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
    const type = c.kind === 'i32' || c.kind === 'i32?' ? new arrow.Int32() : c.kind === 'bool' ? new arrow.Bool() : c.kind === 'str' ? new arrow.Utf8() : new arrow.Float64();
    vectors[c.name] = c.kind === 'f64' || c.kind === 'i32' ? arrow.makeVector(c.data as Float64Array | Int32Array) : arrow.vectorFromArray(c.data as Array<number | boolean | null | string>, type);
  }
  return arrow.tableToIPC(new arrow.Table(vectors as Record<string, InstanceType<typeof arrow.Vector>>), 'file');
}

/** A run of a group, its columns as exportColumns gives them. */
export interface GroupPart { id: string; rank: number | null; cols: ExportColumn[] }

/**
 * `logd export --group`: every run's columns in one long table, `run_id` and `rank` first, then the columns the runs
 * have in common (`_step`, `_time`, ...), then every metric of any run (sorted), null where a run has none.
 */
export function groupColumns(parts: GroupPart[]): ExportColumn[] {
  const n = parts.reduce((a, p) => a + (p.cols[0]?.data.length ?? 0), 0);
  const runId: string[] = [], rank: Array<number | null> = [];
  for (const p of parts) for (let i = 0; i < (p.cols[0]?.data.length ?? 0); i++) (runId.push(p.id), rank.push(p.rank));
  // The export's own columns (_step, _time, …: never nullable) in their first run's order, then metrics sorted.
  const fixed: ExportColumn[] = [], metrics = new Set<string>();
  for (const p of parts) {
    for (const c of p.cols) {
      if (c.kind !== 'f64?') {
        if (!fixed.some((f) => f.name === c.name)) fixed.push(c);
      } else metrics.add(c.name);
    }
  }
  const out: ExportColumn[] = [{ name: 'run_id', data: runId, kind: 'str' }, { name: 'rank', data: rank, kind: 'i32?' }];
  const column = (name: string, kind: ExportColumn['kind']): ExportColumn => {
    const data: Array<number | boolean | null> = new Array(n).fill(null);
    let at = 0;
    for (const p of parts) {
      const rows = p.cols[0]?.data.length ?? 0;
      const c = p.cols.find((x) => x.name === name);
      if (c) for (let i = 0; i < rows; i++) data[at + i] = (c.data as ArrayLike<number | boolean | null>)[i];
      at += rows;
    }
    if (kind === 'f64') return { name, data: Float64Array.from(data as number[]), kind };
    if (kind === 'i32') return { name, data: Int32Array.from(data as number[]), kind };
    return { name, data: data as Array<number | null> | boolean[], kind };
  };
  for (const f of fixed) out.push(column(f.name, f.kind));
  for (const m of [...metrics].sort()) out.push(column(m, 'f64?'));
  return out;
}

/** CSV of columns (a header, then a line a row): numbers as `logd export --format csv` writes them, empty for null. */
export function* csvOfColumns(cols: ExportColumn[]): Generator<string> {
  const cell = (s: string) => (/[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s);
  const text = (v: unknown) => (v === null || v === undefined ? '' : typeof v === 'number' ? (Number.isNaN(v) ? 'NaN' : v === Infinity ? 'Infinity' : v === -Infinity ? '-Infinity' : String(v)) : cell(String(v)));
  yield cols.map((c) => cell(c.name)).join(',');
  const n = cols[0]?.data.length ?? 0;
  for (let i = 0; i < n; i++) yield cols.map((c) => text((c.data as ArrayLike<unknown>)[i])).join(',');
}
