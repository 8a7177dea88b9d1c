// Merges a run's small chunks in the shared store (issue 37). A node uploads
// what is durable every pass, so a run's history arrives as slices of a few
// rows each, one logd_rows row and one logd_values row per metric per slice:
// at 2-20 rows a slice the rows' own overhead (key columns, tuple headers)
// is 2-9 times the 8 bytes of each value. Compaction rewrites consecutive
// chunks of one writer (in the order readers read them: ord, writer, seq_lo;
// nothing of another writer between them) as one chunk of up to maxRows rows,
// inside PostgreSQL (the arrays never leave the server), in one transaction
// that holds the run's cursor row: an upload of the same run waits for it.
//
// What readers see does not change: the merged chunk keeps the first chunk's
// key (writer, seq_lo) and order (ord), its rows are the chunks' rows in
// order, and a metric's row indexes (idx) are shifted by the rows before it
// (NULL when every row of every merged chunk has the metric). The chunks'
// primary keys stop being a guard against a retried slice of a merged range;
// the cursor, which a compaction never moves, still is (docs/shared-store.md).
import type pg from 'pg';

/** Rows in a merged chunk at most: a tail read reads its last chunk whole. */
export const COMPACT_MAX_ROWS = 4096;
/**
 * While a run goes on, a chunk of this many rows or more is left as it is: the merges of a live run grow one chunk
 * to this size and then start the next, so a value is rewritten a few times at most (once the run ends, chunks
 * merge up to COMPACT_MAX_ROWS).
 */
export const SETTLED_ROWS = 1024;

export interface CompactResult { chunksBefore: number; chunksAfter: number }

interface Skel { writer: string; seq_lo: number; nrows: number }

/**
 * Plans the merge of one run's stream: groups of consecutive chunks of one writer, each at most maxRows rows;
 * for each chunk of a group of two or more, the group's key (its first chunk's seq_lo), the rows before it in the
 * group, and the group's size in chunks.
 */
export function planCompaction(skel: Skel[], maxRows: number, settledRows = Infinity): { writers: string[]; seqLos: number[]; groups: number[]; bases: number[]; counts: number[]; after: number } {
  const out = { writers: [] as string[], seqLos: [] as number[], groups: [] as number[], bases: [] as number[], counts: [] as number[], after: 0 };
  let i = 0;
  const movable = (k: number) => skel[k].nrows < settledRows;
  while (i < skel.length) {
    let j = i + 1;
    let rows = skel[i].nrows;
    if (movable(i)) while (j < skel.length && movable(j) && skel[j].writer === skel[i].writer && rows + skel[j].nrows <= maxRows) rows += skel[j++].nrows;
    out.after++;
    if (j - i >= 2) {
      let base = 0;
      for (let k = i; k < j; k++) {
        out.writers.push(skel[k].writer);
        out.seqLos.push(skel[k].seq_lo);
        out.groups.push(skel[i].seq_lo);
        out.bases.push(base);
        out.counts.push(j - i);
        base += skel[k].nrows;
      }
    }
    i = j;
  }
  return out;
}

const MAP = `m AS (SELECT * FROM unnest($3::bigint[], $4::float8[], $5::float8[], $6::int[], $7::int[]) AS m(writer, seq_lo, g, base, cnt))`;

/**
 * Compacts one run's stream on `c`, which must be inside a transaction that holds the run's cursor row
 * (SELECT … FOR UPDATE). Nothing is done when no two consecutive chunks can merge.
 */
export async function compactStream(c: pg.ClientBase, runId: string, stream: number, o: { maxRows?: number; settledRows?: number } = {}): Promise<CompactResult> {
  const skel = (await c.query<Skel>('SELECT writer::text AS writer, seq_lo, nrows FROM logd_rows WHERE run_id = $1 AND stream = $2 ORDER BY ord, writer, seq_lo', [runId, stream])).rows;
  const plan = planCompaction(skel, o.maxRows ?? COMPACT_MAX_ROWS, o.settledRows);
  if (!plan.writers.length) return { chunksBefore: skel.length, chunksAfter: skel.length };
  const args = [runId, stream, plan.writers, plan.seqLos, plan.groups, plan.bases, plan.counts];
  // Every statement reads the chunks as they were when it began: the merged arrays are built from the old rows,
  // the group's first row is rewritten in place (its key stays), the others are deleted.
  await c.query(
    `WITH ${MAP},
     merged AS (
       SELECT r.writer, m.g, max(r.seq_hi) AS seq_hi, min(r.ord) AS ord, count(*)::int AS nrows,
              array_agg(u.st ORDER BY m.base, u.i) AS steps, array_agg(u.tm ORDER BY m.base, u.i) AS times
       FROM logd_rows r JOIN m ON m.writer = r.writer AND m.seq_lo = r.seq_lo
       CROSS JOIN LATERAL unnest(r.steps, r.times) WITH ORDINALITY AS u(st, tm, i)
       WHERE r.run_id = $1 AND r.stream = $2
       GROUP BY r.writer, m.g),
     gone AS (DELETE FROM logd_rows r USING m WHERE r.run_id = $1 AND r.stream = $2 AND r.writer = m.writer AND r.seq_lo = m.seq_lo AND m.seq_lo <> m.g)
     UPDATE logd_rows r SET seq_hi = merged.seq_hi, ord = merged.ord, nrows = merged.nrows, steps = merged.steps, times = merged.times
     FROM merged WHERE r.run_id = $1 AND r.stream = $2 AND r.writer = merged.writer AND r.seq_lo = merged.g`,
    args,
  );
  await c.query(
    `WITH ${MAP},
     merged AS (
       SELECT v.key_id, v.writer, m.g,
              CASE WHEN count(DISTINCT v.seq_lo) FILTER (WHERE v.idx IS NULL) = max(m.cnt) THEN NULL
                   ELSE array_agg((m.base + coalesce(v.idx[u.i::int], u.i::int - 1))::int ORDER BY m.base, u.i) END AS idx,
              array_agg(u.val ORDER BY m.base, u.i) AS vals
       FROM logd_values v JOIN m ON m.writer = v.writer AND m.seq_lo = v.seq_lo
       CROSS JOIN LATERAL unnest(v.vals) WITH ORDINALITY AS u(val, i)
       WHERE v.run_id = $1 AND v.stream = $2
       GROUP BY v.key_id, v.writer, m.g),
     gone AS (DELETE FROM logd_values v USING m WHERE v.run_id = $1 AND v.stream = $2 AND v.writer = m.writer AND v.seq_lo = m.seq_lo AND m.seq_lo <> m.g)
     INSERT INTO logd_values (run_id, stream, key_id, writer, seq_lo, idx, vals)
     SELECT $1, $2, key_id, writer, g, idx, vals FROM merged
     ON CONFLICT (run_id, stream, key_id, writer, seq_lo) DO UPDATE SET idx = excluded.idx, vals = excluded.vals`,
    args,
  );
  return { chunksBefore: skel.length, chunksAfter: plan.after };
}

/**
 * Both streams of a run (history and system metrics), in one transaction holding its cursor row. `live`: the run
 * goes on, chunks of SETTLED_ROWS or more stay as they are.
 */
export async function compactRun(c: pg.ClientBase, runId: string, o: { live?: boolean; maxRows?: number } = {}): Promise<CompactResult> {
  await c.query('BEGIN');
  try {
    const out = await compactLocked(c, runId, o);
    await c.query('COMMIT');
    return out;
  } catch (e) {
    await c.query('ROLLBACK').catch(() => {});
    throw e;
  }
}

/** compactRun's work inside a transaction the caller holds: the cursor row locked, both streams merged. */
export async function compactLocked(c: pg.ClientBase, runId: string, o: { live?: boolean; maxRows?: number } = {}): Promise<CompactResult> {
  const opts = { maxRows: o.maxRows, settledRows: o.live ? SETTLED_ROWS : undefined };
  await c.query('SELECT 1 FROM logd_cursors WHERE run_id = $1 FOR UPDATE', [runId]);
  const h = await compactStream(c, runId, 0, opts);
  const s = await compactStream(c, runId, 1, opts);
  return { chunksBefore: h.chunksBefore + s.chunksBefore, chunksAfter: h.chunksAfter + s.chunksAfter };
}
