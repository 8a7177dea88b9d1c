// Many runs' histories from the shared store at once (the dashboard's group page: every rank of a job): per batch
// of runs one snapshot, one statement for their keys and one for their chunks' skeletons, one COPY for their chunks,
// instead of a few round trips per run. Runs go in batches of about BATCH_ROWS stored rows, so what one batch holds
// in memory stays bounded; a run bigger than that is a batch of its own.
import pg from 'pg';
import { STREAM_HISTORY } from '../upload/pg-sink.js';
import { assemble, type RawChunk, type Snapshot, type Skel } from './shared-chunks.js';
import type { History } from './source.js';

/**
 * Stored rows of all the runs of one batch together: with 100 metrics a row, about 80 MB of values held at once
 * (their arrays as COPY gave them, then the histories decoded from them).
 */
export const BATCH_ROWS = 100_000;

export interface GroupRun { id: string; rows: number }

/** The runs in batches of at most `limit` rows in all (a run with more is alone in its batch), in their order. */
export function batches(runs: GroupRun[], limit = BATCH_ROWS): GroupRun[][] {
  const out: GroupRun[][] = [];
  let cur: GroupRun[] = [];
  let rows = 0;
  for (const r of runs) {
    const n = Math.max(0, r.rows);
    if (cur.length > 0 && rows + n > limit) (out.push(cur), (cur = []), (rows = 0));
    cur.push(r);
    rows += n;
  }
  if (cur.length) out.push(cur);
  return out;
}

/**
 * The stored rows (every attempt's: the caller reads rewound runs its own way) of `ids`, in one snapshot; `keys`:
 * only those metrics (rows carrying none of them left out, as a one-run read does). A run without keys or rows in
 * the store comes back empty; the caller knows which runs exist.
 */
export async function readRuns(s: Snapshot, ids: string[], keys?: string[]): Promise<Map<string, History>> {
  const out = new Map<string, History>();
  if (ids.length === 0) return out;
  const keyRows = await s.q<{ run_id: string; key_id: number; name: string }>(
    'SELECT run_id, key_id, name FROM logd_keys WHERE run_id = ANY($1) AND stream = $2 ORDER BY run_id, key_id', [ids, STREAM_HISTORY]);
  const skelRows = await s.q<Skel & { run_id: string }>(
    'SELECT run_id, writer::float8, seq_lo, ord::float8, nrows FROM logd_rows WHERE run_id = ANY($1) AND stream = $2 ORDER BY run_id, ord, writer, seq_lo', [ids, STREAM_HISTORY]);
  const per = new Map<string, { names: string[]; pos: Map<number, number>; wanted: boolean; skel: Skel[]; chunks: Map<string, RawChunk> }>();
  for (const id of ids) per.set(id, { names: [], pos: new Map(), wanted: false, skel: [], chunks: new Map() });
  const asked = keys?.length ? new Set(keys) : null;
  for (const k of keyRows) {
    const r = per.get(k.run_id)!;
    r.pos.set(k.key_id, r.names.length);
    r.names.push(k.name);
    if (asked?.has(k.name)) r.wanted = true;
  }
  for (const sk of skelRows) per.get(sk.run_id)!.skel.push({ writer: sk.writer, seq_lo: sk.seq_lo, ord: sk.ord, nrows: sk.nrows });
  // The runs with something to read: every run with chunks, or with keys asked, those that have one of them.
  const reading = ids.filter((id) => {
    const r = per.get(id)!;
    return r.skel.length > 0 && (!asked || r.wanted);
  });
  if (reading.length > 0) {
    // COPY takes no parameters: run ids and key names are quoted, the stream is a number of ours.
    const list = (xs: string[]) => `ARRAY[${xs.map((x) => pg.escapeLiteral(x)).join(',')}]::text[]`;
    const runs = list(reading);
    const only = asked
      ? ` AND (v.run_id, v.key_id) IN (SELECT run_id, key_id FROM logd_keys WHERE run_id = ANY(${runs}) AND stream = ${STREAM_HISTORY} AND name = ANY(${list([...asked])}))`
      : '';
    // Bodies (steps, times) and values in one statement: a body's key_id is null. Told apart here, not by order.
    const tuples = await s.copy(`COPY (SELECT run_id, writer::float8, seq_lo, NULL::int4, steps, times, NULL::int4[] FROM logd_rows WHERE run_id = ANY(${runs}) AND stream = ${STREAM_HISTORY}
      UNION ALL SELECT v.run_id, v.writer::float8, v.seq_lo, v.key_id, NULL::float8[], v.vals, v.idx FROM logd_values v WHERE v.run_id = ANY(${runs}) AND v.stream = ${STREAM_HISTORY}${only}) TO STDOUT (FORMAT binary)`);
    const values: Array<Array<Buffer | null>> = [];
    for (const t of tuples) {
      if (t[3] !== null) {
        values.push(t);
        continue;
      }
      const writer = t[1]!.readDoubleBE(0);
      per.get(t[0]!.toString('utf8'))?.chunks.set(`${writer}/${t[2]!.readDoubleBE(0)}`, { steps: t[4]!, times: t[5]!, writer, values: [] });
    }
    for (const [id, w, sq, k, , vs, idx] of values) {
      per.get(id!.toString('utf8'))?.chunks.get(`${w!.readDoubleBE(0)}/${sq!.readDoubleBE(0)}`)?.values.push({ key_id: k!.readInt32BE(0), idx, vals: vs! });
    }
  }
  for (const id of ids) {
    const r = per.get(id)!;
    const chunks = r.skel.map((sk) => r.chunks.get(`${sk.writer}/${sk.seq_lo}`)).filter((c): c is RawChunk => !!c);
    out.set(id, assemble(r.names, asked && !r.wanted ? [] : chunks, r.pos, !!asked));
  }
  return out;
}

/** Many runs' metric names, every attempt's, in the order they first came; a run without any has no entry. */
export async function groupMetricNames(q: <T extends pg.QueryResultRow>(text: string, values: unknown[]) => Promise<T[]>, ids: string[]): Promise<Map<string, string[]>> {
  const out = new Map<string, string[]>();
  if (ids.length === 0) return out;
  const rows = await q<{ run_id: string; name: string }>(
    'SELECT run_id, name FROM logd_keys WHERE run_id = ANY($1) AND stream = $2 ORDER BY run_id, key_id', [[...new Set(ids)], STREAM_HISTORY]);
  for (const r of rows) {
    let names = out.get(r.run_id);
    if (!names) out.set(r.run_id, (names = []));
    names.push(r.name);
  }
  return out;
}
