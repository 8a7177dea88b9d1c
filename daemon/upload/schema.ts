// The shared store's schema, as numbered migrations. The daemon applies the
// missing ones when it connects (and `logd store migrate` does on demand),
// under an advisory lock so that two nodes starting at once do not race.
//
// Layout (the README's "Shared store" section says why):
//   logd_meta     k/v; 'schema_version' is the number of the last migration applied
//   logd_runs     one row per run: its node, listing fields, config/summary/metadata JSON,
//                 state, and how many history rows the store holds
//   logd_keys     metric names per run and stream (0: history, 1: system metrics)
//   logd_rows     the row skeleton of a chunk: one writer's consecutive batches
//                 seq_lo..seq_hi as two float8[] columns (steps, times)
//   logd_values   one row per chunk and metric: float8[] values (idx int4[]: the
//                 rows of the chunk that carry the metric; NULL when every row does)
//   logd_cursors  per run: the byte offset of its record log that the store holds
//                 (moved in the same transaction as the rows), done flags
// Version 2 (console output and media, issue 20):
//   logd_writers  per run and writer index: its RANK (NULL: none), from the WRITER frames
//   logd_console  one row per stored piece of console output; logd_media one row per
//                 histogram, image or text entry. Both are keyed (run, log_offset, n):
//                 the offset of the frame in the run's record log and the entry's place
//                 in it, which is the local order, the paging cursor, and the guard
//                 against a duplicate
//   logd_images   an image's bytes once per run and sha256 (bytea: docs/shared-store.md)
// Version 3 (issue 32 item 5):
//   logd_cursors.source  the identity of the local store that uploads the run (upload/store-identity.ts);
//                 NULL for a cursor written before, taken by its node's next upload
import type pg from 'pg';

interface Migration { version: number; what: string; sql: string }

const MIGRATIONS: Migration[] = [
  {
    version: 1,
    what: 'runs, keys, row skeletons, per-key value chunks and upload cursors',
    sql: `
CREATE TABLE logd_meta (k text PRIMARY KEY, v text NOT NULL);
CREATE TABLE logd_runs (
  id text PRIMARY KEY,
  node text NOT NULL,
  project text NOT NULL,
  name text NOT NULL,
  grp text NOT NULL,
  job_type text NOT NULL,
  tags text[] NOT NULL,
  notes text NOT NULL,
  mode text NOT NULL,
  state text NOT NULL,
  state_reason text NOT NULL,
  exit_code integer NOT NULL,
  created_at float8 NOT NULL,
  finished_at float8 NOT NULL,
  config_json text NOT NULL,
  summary_json text NOT NULL,
  metadata_json text NOT NULL,
  history_rows bigint NOT NULL DEFAULT 0,
  uploaded_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX logd_runs_created ON logd_runs (created_at DESC, id);
CREATE INDEX logd_runs_group ON logd_runs (grp, created_at DESC);
CREATE INDEX logd_runs_project ON logd_runs (project, created_at DESC);
CREATE TABLE logd_keys (
  run_id text NOT NULL, stream smallint NOT NULL, key_id integer NOT NULL, name text NOT NULL,
  PRIMARY KEY (run_id, stream, key_id)
);
CREATE TABLE logd_rows (
  run_id text NOT NULL, stream smallint NOT NULL, writer bigint NOT NULL, seq_lo float8 NOT NULL, seq_hi float8 NOT NULL,
  ord bigint NOT NULL, nrows integer NOT NULL, steps float8[] NOT NULL, times float8[] NOT NULL,
  PRIMARY KEY (run_id, stream, writer, seq_lo)
);
CREATE TABLE logd_values (
  run_id text NOT NULL, stream smallint NOT NULL, key_id integer NOT NULL, writer bigint NOT NULL, seq_lo float8 NOT NULL,
  idx integer[], vals float8[] NOT NULL,
  PRIMARY KEY (run_id, stream, key_id, writer, seq_lo)
);
CREATE TABLE logd_cursors (
  run_id text PRIMARY KEY,
  node text NOT NULL,
  log_offset bigint NOT NULL DEFAULT 0,
  system_done boolean NOT NULL DEFAULT false,
  done boolean NOT NULL DEFAULT false,
  updated_at timestamptz NOT NULL DEFAULT now()
);
-- Chunks are dense doubles that do not compress: stored out of line, uncompressed.
ALTER TABLE logd_rows ALTER COLUMN steps SET STORAGE EXTERNAL, ALTER COLUMN times SET STORAGE EXTERNAL;
ALTER TABLE logd_values ALTER COLUMN vals SET STORAGE EXTERNAL, ALTER COLUMN idx SET STORAGE EXTERNAL;
`,
  },
  {
    version: 2,
    what: "writers' ranks, console output, histograms/images/text and image bytes",
    sql: `
CREATE TABLE logd_writers (
  run_id text NOT NULL, writer bigint NOT NULL, rank integer,
  PRIMARY KEY (run_id, writer)
);
CREATE TABLE logd_console (
  run_id text NOT NULL, log_offset bigint NOT NULL, n integer NOT NULL, writer bigint NOT NULL,
  t float8 NOT NULL, stream text NOT NULL, text text NOT NULL,
  PRIMARY KEY (run_id, log_offset, n)
);
CREATE TABLE logd_media (
  run_id text NOT NULL, log_offset bigint NOT NULL, n integer NOT NULL, writer bigint NOT NULL,
  key text NOT NULL, step float8 NOT NULL, t float8 NOT NULL, kind text NOT NULL, sha256 text,
  entry_json text NOT NULL,
  PRIMARY KEY (run_id, log_offset, n)
);
CREATE INDEX logd_media_key ON logd_media (run_id, key, log_offset);
CREATE TABLE logd_images (
  run_id text NOT NULL, sha256 text NOT NULL, format text NOT NULL, data bytea NOT NULL,
  PRIMARY KEY (run_id, sha256)
);
-- PNG and JPEG are compressed already: stored out of line, not compressed again.
ALTER TABLE logd_images ALTER COLUMN data SET STORAGE EXTERNAL;
`,
  },
  {
    version: 3,
    what: 'the local store each run is uploaded from (two daemons given one LOGD_NODE)',
    sql: `
ALTER TABLE logd_cursors ADD COLUMN source text;
`,
  },
];

/** The schema version this logd reads and writes. */
export const SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1].version;

/** A store this logd must not write: newer than it knows, or not logd's at all. */
export class StoreRefused extends Error {
  override name = 'StoreRefused';
}

/** The schema version of the store, 0 for an empty database; refuses a database that is not logd's. */
export async function storeVersion(c: pg.ClientBase): Promise<number> {
  const meta = await c.query<{ t: string | null }>("SELECT to_regclass('logd_meta')::text AS t");
  if (meta.rows[0].t) {
    const v = await c.query<{ v: string }>("SELECT v FROM logd_meta WHERE k = 'schema_version'");
    return v.rows.length ? Number(v.rows[0].v) : 0;
  }
  const other = await c.query<{ name: string }>(
    "SELECT schemaname || '.' || tablename AS name FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1 LIMIT 3",
  );
  if (other.rows.length) {
    const db = (await c.query<{ d: string }>('SELECT current_database() AS d')).rows[0].d;
    throw new StoreRefused(`database "${db}" is not a logd store: it holds other tables (${other.rows.map((r) => r.name).join(', ')}) and no logd_meta; point the URL at an empty database (e.g. \`createdb logd\`) or at one logd created`);
  }
  return 0;
}

function tooNew(v: number): StoreRefused {
  return new StoreRefused(`the shared store has schema version ${v}, newer than this logd knows (${SCHEMA_VERSION}); upgrade logd on this node. Runs stay in the local store until then`);
}

/** Refuses a store that is too new or not logd's; true when it is at this logd's version. */
export async function checkSchema(c: pg.ClientBase): Promise<boolean> {
  const v = await storeVersion(c);
  if (v > SCHEMA_VERSION) throw tooNew(v);
  return v === SCHEMA_VERSION;
}

/** Applies the missing migrations; returns the versions applied. */
export async function migrate(c: pg.ClientBase): Promise<number[]> {
  const applied: number[] = [];
  await c.query('BEGIN');
  try {
    // One migrator at a time across every node; the lock ends with the transaction.
    await c.query("SELECT pg_advisory_xact_lock(hashtext('logd schema'))");
    const v = await storeVersion(c);
    if (v > SCHEMA_VERSION) throw tooNew(v);
    for (const m of MIGRATIONS) {
      if (m.version <= v) continue;
      await c.query(m.sql);
      applied.push(m.version);
    }
    if (applied.length) {
      await c.query("INSERT INTO logd_meta (k, v) VALUES ('schema_version', $1) ON CONFLICT (k) DO UPDATE SET v = excluded.v", [String(SCHEMA_VERSION)]);
    }
    await c.query('COMMIT');
  } catch (e) {
    await c.query('ROLLBACK').catch(() => {});
    throw e;
  }
  return applied;
}

/** Every migration's SQL, in order (schema-check.ts builds the expected shape from them). */
export function migrationsSql(): string[] {
  return MIGRATIONS.map((m) => m.sql);
}

export function describeMigrations(): string[] {
  return MIGRATIONS.map((m) => `${m.version}: ${m.what}`);
}
