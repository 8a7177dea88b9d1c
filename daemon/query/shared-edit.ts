// Changing runs in the shared store (the dashboard's selection, `logd rename|tag|note|rm --store`): the reader's
// only writes, kept apart from its reads (shared.ts).
import pg from 'pg';
import type { RunEditAsk } from './source.js';

type Q = <R extends pg.QueryResultRow>(text: string, values: unknown[]) => Promise<R[]>;

/** A run's name, tags or notes changed; its listing fields as they are now, or null when there is no such run. */
export async function editSharedRun(q: Q, id: string, e: RunEditAsk): Promise<{ name: string; tags: string[]; notes: string } | null> {
  if (e.name !== undefined && e.name.trim() === '') throw new Error('a run\'s name cannot be empty');
  return (await q<{ name: string; tags: string[]; notes: string }>(
    `UPDATE logd_runs SET name = CASE WHEN $2::text IS NULL THEN name ELSE $2 END,
       tags = ARRAY(SELECT DISTINCT t FROM unnest(array_cat(tags, $3::text[])) t WHERE NOT t = ANY($4::text[])),
       notes = CASE WHEN $5::text IS NULL THEN notes ELSE $5 END
     WHERE id = $1 RETURNING name, tags, notes`,
    [id, e.name ?? null, e.addTags ?? [], e.removeTags ?? [], e.notes ?? null]))[0] ?? null;
}

/**
 * Every row of the run in every table of the store (by run_id), and its own row, in one transaction. Its upload
 * cursor stays, marked done: the node that uploaded it does not send it again (it would, from the start, were
 * the cursor gone); a run continued or edited there later comes back with what is new.
 */
export async function removeSharedRun(pool: pg.Pool, id: string): Promise<void> {
  const c = await pool.connect();
  try {
    const tables = (await c.query<{ table_name: string }>(
      "SELECT table_name FROM information_schema.columns WHERE table_schema = current_schema() AND column_name = 'run_id' AND table_name LIKE 'logd\\_%'")).rows.map((r) => r.table_name);
    await c.query('BEGIN');
    for (const t of tables.filter((t) => t !== 'logd_cursors')) await c.query(`DELETE FROM ${pg.escapeIdentifier(t)} WHERE run_id = $1`, [id]);
    if (tables.includes('logd_cursors')) await c.query('UPDATE logd_cursors SET done = true, system_done = true WHERE run_id = $1', [id]);
    await c.query('DELETE FROM logd_runs WHERE id = $1', [id]);
    await c.query('COMMIT');
  } catch (e) {
    await c.query('ROLLBACK').catch(() => {});
    throw e;
  } finally {
    c.release();
  }
}
