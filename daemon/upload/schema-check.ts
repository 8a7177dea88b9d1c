// What `logd store migrate` checks besides the version number: that the
// store's tables have every column this logd writes, with its type. A store
// whose version says it is current can still have been altered by hand (a
// column dropped, a table renamed): the uploader would then fail every slice
// for ever. The expected shape is not written twice: the migrations are run
// into a scratch schema inside a transaction that is rolled back, and
// information_schema compares the two. A missing column is added back (as
// NULL-able: its rows before are gone), a missing table created; a column of
// another type is only reported, with what to do.
import type pg from 'pg';
import { migrationsSql } from './schema.js';

export interface SchemaDifference { what: string; repaired: boolean }

interface Column { table: string; column: string; type: string }

async function columns(c: pg.ClientBase, schema: string): Promise<Column[]> {
  const res = await c.query<{ table_name: string; column_name: string; t: string }>(
    `SELECT table_name, column_name, format_type(a.atttypid, a.atttypmod) AS t
       FROM information_schema.columns ic
       JOIN pg_attribute a ON a.attrelid = format('%I.%I', ic.table_schema, ic.table_name)::regclass AND a.attname = ic.column_name
      WHERE ic.table_schema = $1 AND ic.table_name LIKE 'logd\\_%' ORDER BY table_name, ordinal_position`, [schema]);
  return res.rows.map((r) => ({ table: r.table_name, column: r.column_name, type: r.t }));
}

/** The tables and columns the migrations make, read from a scratch schema that is never committed. */
async function expectedColumns(c: pg.ClientBase): Promise<{ cols: Column[]; tableSql: Map<string, string> }> {
  const scratch = `logd_expected_${process.pid}`;
  await c.query('BEGIN');
  try {
    await c.query(`CREATE SCHEMA ${scratch}`);
    await c.query(`SET LOCAL search_path = ${scratch}`);
    for (const sql of migrationsSql()) await c.query(sql);
    const cols = await columns(c, scratch);
    const tableSql = new Map<string, string>();
    for (const sql of migrationsSql()) {
      for (const m of sql.matchAll(/CREATE TABLE (logd_\w+) \(([\s\S]*?)\n\);/g)) tableSql.set(m[1], m[0]);
    }
    return { cols, tableSql };
  } finally {
    await c.query('ROLLBACK');
  }
}

/** Compares the store (its current schema) with what this logd writes; repairs what it safely can. */
export async function checkAndRepair(c: pg.ClientBase): Promise<SchemaDifference[]> {
  const { cols: want, tableSql } = await expectedColumns(c);
  const schema = (await c.query<{ s: string }>('SELECT current_schema() AS s')).rows[0].s;
  const have = await columns(c, schema);
  const haveTables = new Set(have.map((x) => x.table));
  const haveCol = new Map(have.map((x) => [`${x.table}.${x.column}`, x]));
  const out: SchemaDifference[] = [];
  const missingTables = new Set<string>();
  for (const w of want) {
    if (!haveTables.has(w.table)) {
      if (missingTables.has(w.table)) continue;
      missingTables.add(w.table);
      const sql = tableSql.get(w.table);
      let repaired = false;
      if (sql) {
        try {
          await c.query(sql);
          repaired = true;
        } catch {
          /* reported below */
        }
      }
      out.push({ what: `table ${w.table} is missing${repaired ? '; created (empty)' : ''}`, repaired });
      continue;
    }
    const h = haveCol.get(`${w.table}.${w.column}`);
    if (!h) {
      let repaired = false;
      try {
        await c.query(`ALTER TABLE ${w.table} ADD COLUMN ${w.column} ${w.type}`);
        repaired = true;
      } catch {
        /* reported below */
      }
      out.push({ what: `column ${w.table}.${w.column} (${w.type}) is missing${repaired ? '; added back, NULL in the rows stored before' : ''}`, repaired });
    } else if (h.type !== w.type) {
      out.push({ what: `column ${w.table}.${w.column} is ${h.type}, not ${w.type}: change it back (ALTER TABLE ${w.table} ALTER COLUMN ${w.column} TYPE ${w.type}), or point logd at a fresh database`, repaired: false });
    }
  }
  return out;
}
