// Writes slices into the shared store. Each slice is one transaction: the
// run's row, its new keys, the chunks, its writers' ranks, console output,
// media entries and images, and the run's cursor, which moves from
// exactly the offset the slice started at to where it ended. The cursor row is
// locked (FOR UPDATE) first, so two uploaders of one run (the daemon and
// `logd sync`) take turns, and a slice whose start is no longer the cursor is
// rolled back untouched: a retry or a second uploader never writes a row twice.
// The primary keys (run, stream, writer, seq_lo) refuse a duplicate chunk too,
// and (run, log_offset, n) a duplicate console piece or media entry. An image
// is content-addressed: one already there (logged again later) is skipped.
import pg from 'pg';
import type { RunRow } from '../store/index-db.js';
import { copyInto } from './copy.js';
import { CONSOLE_COLUMNS, KEY_COLUMNS, MEDIA_COLUMNS, ROW_COLUMNS, VALUE_COLUMNS, type EncodedSlice, type ImageBytes } from './encode.js';
import { checkSchema, migrate, StoreRefused } from './schema.js';
import type { StoreUrl } from './url.js';
import { pgOptions } from './pgpass.js';
import { claimRun, takenOverBy, type ClaimOptions } from './continue.js';
import { StoreContinueRefused, type StoredRun } from '../store/from-store.js';
import { compactLocked, type CompactResult } from '../compaction/compact.js';

export interface Cursor { offset: number; systemDone: boolean; done: boolean; rows: number }

/** This run id is in the store already, uploaded by another node. */
export class RunOfAnotherNode extends Error {
  override name = 'RunOfAnotherNode';
}

export const STREAM_HISTORY = 0;
export const STREAM_SYSTEM = 1;
const FINAL = ['finished', 'crashed', 'killed'];

export class PgSink {
  private pool: pg.Pool;
  private checked = false;

  /** `source`: this local store's identity (store-identity.ts); '' for a reader that uploads nothing. */
  constructor(readonly url: StoreUrl, readonly node: string, private opts: { migrate: boolean } = { migrate: true }, readonly source = '') {
    this.pool = new pg.Pool(pgOptions(url, { max: 2, connectionTimeoutMillis: 10_000, idleTimeoutMillis: 30_000, application_name: `logd uploader (${node})` }));
    // An idle connection that the server drops must not become an uncaught error.
    this.pool.on('error', () => {});
  }

  /** Connects, and checks the schema (applying migrations when allowed). */
  async ready(): Promise<void> {
    if (this.checked) return;
    const c = await this.pool.connect();
    const onError = () => {};
    c.on('error', onError);
    try {
      if (!(await checkSchema(c))) {
        if (!this.opts.migrate) throw new StoreRefused('the shared store has no logd schema yet (or an older one); apply it with `logd store migrate`');
        await migrate(c);
      }
      this.checked = true;
    } finally {
      c.off('error', onError);
      c.release();
    }
  }

  /** After a failure: check the schema again on the next ready(). */
  reset(): void {
    this.checked = false;
  }

  async cursors(): Promise<Map<string, Cursor>> {
    const res = await this.pool.query<{ run_id: string; log_offset: string; system_done: boolean; done: boolean; rows: string | null }>(
      'SELECT c.run_id, c.log_offset, c.system_done, c.done, r.history_rows AS rows FROM logd_cursors c LEFT JOIN logd_runs r ON r.id = c.run_id WHERE c.node = $1 AND (c.source IS NULL OR c.source = $2 OR $2 = \'\')',
      [this.node, this.source],
    );
    const out = new Map<string, Cursor>();
    for (const r of res.rows) out.set(r.run_id, { offset: Number(r.log_offset), systemDone: r.system_done, done: r.done, rows: Number(r.rows ?? 0) });
    return out;
  }

  /**
   * Uploads a slice in one transaction. Returns the cursor after it; when the
   * store's cursor was not at slice.start (another uploader moved it), nothing
   * is written and the store's cursor comes back.
   */
  async uploadSlice(row: RunRow, slice: EncodedSlice, caughtUp: boolean): Promise<{ offset: number; moved: boolean }> {
    return this.inRunTransaction(row.id, async (c, cur) => {
      if (cur.offset !== slice.start) return { offset: cur.offset, moved: true };
      await upsertRun(c, this.node, row, slice.rows, caughtUp);
      await copyInto(c, 'logd_keys', KEY_COLUMNS, slice.keys);
      await copyInto(c, 'logd_rows', ROW_COLUMNS, slice.chunkRows);
      await copyInto(c, 'logd_values', VALUE_COLUMNS, slice.values);
      await upsertWriters(c, row.id, slice.writers);
      await copyInto(c, 'logd_console', CONSOLE_COLUMNS, slice.console);
      await copyInto(c, 'logd_media', MEDIA_COLUMNS, slice.media);
      await insertImages(c, row.id, slice.images);
      await c.query('UPDATE logd_cursors SET log_offset = $2, updated_at = now() WHERE run_id = $1', [row.id, slice.end]);
      return { offset: slice.end, moved: false };
    });
  }

  /**
   * Several runs' slices in one transaction (a node's ranks each have a small slice every pass): the same writes
   * as uploadSlice for each, in about a dozen statements for the lot instead of a dozen per run, so a node far
   * from the store (each statement a round trip) and a store taking a thousand ranks' slices each pay per pass,
   * not per run. Cursors are locked in run-id order (as the runs' rows are written), so two batches never wait
   * on each other in a cycle. A run whose cursor moved (another uploader) is left out of the writes and answered
   * `moved`. Null, with nothing written, when a run's cursor belongs to another node or another local store:
   * the caller then sends the slices one by one, and uploadSlice says which run and why.
   */
  async uploadSlices(items: Array<{ row: RunRow; slice: EncodedSlice; caughtUp: boolean }>): Promise<Array<{ offset: number; moved: boolean }> | null> {
    if (items.length === 1) return [await this.uploadSlice(items[0].row, items[0].slice, items[0].caughtUp)];
    const sorted = [...items].sort((a, b) => (a.row.id < b.row.id ? -1 : a.row.id > b.row.id ? 1 : 0));
    const ids = sorted.map((x) => x.row.id);
    if (new Set(ids).size !== ids.length) throw new Error('uploadSlices: one slice per run');
    const foreign = new Error('a cursor of another node or store');
    return this.inTransaction(async (c) => {
      await c.query('INSERT INTO logd_cursors (run_id, node, source) SELECT id, $2, NULLIF($3, \'\') FROM unnest($1::text[]) AS u(id) ORDER BY id ON CONFLICT (run_id) DO NOTHING', [ids, this.node, this.source]);
      const cur = await c.query<{ run_id: string; node: string; source: string | null; log_offset: string }>(
        'SELECT run_id, node, source, log_offset FROM logd_cursors WHERE run_id = ANY($1::text[]) ORDER BY run_id FOR UPDATE', [ids]);
      const byId = new Map(cur.rows.map((r) => [r.run_id, r]));
      // Rolled back (the cursors inserted above too), and the caller sends the runs one by one.
      if (byId.size !== ids.length || cur.rows.some((r) => r.node !== this.node || (this.source && r.source && r.source !== this.source))) throw foreign;
      const unsourced = cur.rows.filter((r) => this.source && !r.source).map((r) => r.run_id);
      if (unsourced.length) await c.query('UPDATE logd_cursors SET source = $2 WHERE run_id = ANY($1::text[])', [unsourced, this.source]);
      const take = sorted.filter((x) => Number(byId.get(x.row.id)!.log_offset) === x.slice.start);
      if (take.length) {
        await upsertRuns(c, this.node, take.map((x) => ({ row: x.row, addRows: x.slice.rows, caughtUp: x.caughtUp })));
        await copyInto(c, 'logd_keys', KEY_COLUMNS, joinCopy(take.map((x) => x.slice.keys)));
        await copyInto(c, 'logd_rows', ROW_COLUMNS, joinCopy(take.map((x) => x.slice.chunkRows)));
        await copyInto(c, 'logd_values', VALUE_COLUMNS, joinCopy(take.map((x) => x.slice.values)));
        const w = take.flatMap((x) => x.slice.writers.map((wr) => ({ run: x.row.id, ...wr })));
        if (w.length) {
          await c.query(
            `INSERT INTO logd_writers (run_id, writer, rank) SELECT id, w, r FROM unnest($1::text[], $2::bigint[], $3::int[]) AS u(id, w, r)
             ON CONFLICT (run_id, writer) DO UPDATE SET rank = excluded.rank`,
            [w.map((x) => x.run), w.map((x) => x.idx), w.map((x) => x.rank)],
          );
        }
        await copyInto(c, 'logd_console', CONSOLE_COLUMNS, joinCopy(take.map((x) => x.slice.console)));
        await copyInto(c, 'logd_media', MEDIA_COLUMNS, joinCopy(take.map((x) => x.slice.media)));
        for (const x of take) await insertImages(c, x.row.id, x.slice.images);
        await c.query(
          'UPDATE logd_cursors c SET log_offset = u.o, updated_at = now() FROM unnest($1::text[], $2::bigint[]) AS u(id, o) WHERE c.run_id = u.id',
          [take.map((x) => x.row.id), take.map((x) => x.slice.end)],
        );
      }
      return items.map((x) => {
        const at = Number(byId.get(x.row.id)!.log_offset);
        return at === x.slice.start ? { offset: x.slice.end, moved: false } : { offset: at, moved: true };
      });
    }).catch((e) => {
      if (e === foreign) return null;
      throw e;
    });
  }

  /** Merges the run's small chunks in the store (daemon/compaction/), holding its cursor row. */
  async compact(runId: string, o: { live?: boolean } = {}): Promise<CompactResult> {
    return this.inTransaction((c) => compactLocked(c, runId, o));
  }

  /** A run that was done is open again (init(resume=...)): its new rows are to come. */
  async reopen(runId: string): Promise<void> {
    await this.pool.query('UPDATE logd_cursors SET done = false, updated_at = now() WHERE run_id = $1 AND node = $2', [runId, this.node]);
  }

  /**
   * The run's listing row alone (its metadata moved: rank health events and
   * progress), for an open run whose log is all in: a stalled job sends no
   * rows, and its stall must reach the shared store all the same.
   */
  async uploadRow(row: RunRow): Promise<void> {
    await this.inRunTransaction(row.id, async (c, cur) => {
      if (cur.done) return;
      await upsertRun(c, this.node, row, 0, false);
    });
  }

  /** The run's system metrics (encoded, stream 1), once it is final and its log is all in; marks the run done. */
  async uploadSystem(row: RunRow, sys: EncodedSlice | null): Promise<void> {
    await this.inRunTransaction(row.id, async (c, cur) => {
      if (cur.systemDone) {
        // A continued run (a new attempt) ended again: its rows came with the slices; the system metrics of
        // the first attempt's lifetime are in already (later attempts' are not sent: no row twice).
        await upsertRun(c, this.node, row, 0, true);
        await c.query('UPDATE logd_cursors SET done = true, updated_at = now() WHERE run_id = $1', [row.id]);
        return;
      }
      await upsertRun(c, this.node, row, 0, true);
      if (sys) {
        await copyInto(c, 'logd_keys', KEY_COLUMNS, sys.keys);
        await copyInto(c, 'logd_rows', ROW_COLUMNS, sys.chunkRows);
        await copyInto(c, 'logd_values', VALUE_COLUMNS, sys.values);
      }
      await c.query('UPDATE logd_cursors SET system_done = true, done = true, updated_at = now() WHERE run_id = $1', [row.id]);
    });
  }

  /**
   * `body` in one transaction on a client of the pool, rolled back when it throws. A server that goes away while
   * we hold the client makes it emit 'error' besides failing the query; unheard, that event would end the daemon;
   * heard, the client is dropped rather than reused.
   */
  private async inTransaction<T>(body: (c: pg.PoolClient) => Promise<T>): Promise<T> {
    const c = await this.pool.connect();
    let broken = false;
    const onError = () => (broken = true);
    c.on('error', onError);
    try {
      await c.query('BEGIN');
      const out = await body(c);
      await c.query('COMMIT');
      return out;
    } catch (e) {
      await c.query('ROLLBACK').catch(() => (broken = true));
      throw e;
    } finally {
      c.off('error', onError);
      c.release(broken);
    }
  }

  private async inRunTransaction<T>(runId: string, body: (c: pg.PoolClient, cur: Cursor) => Promise<T>): Promise<T> {
    return this.inTransaction(async (c) => {
      await c.query('INSERT INTO logd_cursors (run_id, node, source) VALUES ($1, $2, NULLIF($3, \'\')) ON CONFLICT (run_id) DO NOTHING', [runId, this.node, this.source]);
      const cur = await c.query<{ node: string; source: string | null; log_offset: string; system_done: boolean; done: boolean }>(
        'SELECT node, source, log_offset, system_done, done FROM logd_cursors WHERE run_id = $1 FOR UPDATE', [runId]);
      const r = cur.rows[0];
      if (r.node !== this.node) throw await this.ofAnotherNode(c, runId, r.node);
      if (this.source && r.source && r.source !== this.source) throw this.sameNodeName(runId);
      // A cursor from before the store kept its source: the node's next upload takes it as its own.
      if (this.source && !r.source) await c.query('UPDATE logd_cursors SET source = $2 WHERE run_id = $1', [runId, this.source]);
      return body(c, { offset: Number(r.log_offset), systemDone: r.system_done, done: r.done, rows: 0 });
    });
  }

  /**
   * The refusal of a run whose cursor is another node's: taken over from this
   * node (it stopped uploading for the takeover lease, and came back), or a
   * second node with this run id (a LOGD_NODE shared by two nodes).
   */
  private async ofAnotherNode(c: pg.ClientBase, runId: string, holder: string): Promise<RunOfAnotherNode> {
    const meta = (await c.query<{ metadata_json: string }>('SELECT metadata_json FROM logd_runs WHERE id = $1', [runId])).rows[0]?.metadata_json ?? '';
    const by = takenOverBy(meta, this.node);
    if (by !== null) {
      return new RunOfAnotherNode(`run ${runId} was taken over from this node ("${this.node}") by node "${by}" after this node uploaded nothing of it for the takeover lease (LOGD_TAKEOVER_AFTER_S on that node); node "${holder}" holds it in the shared store now. This node's copy stays local: the store keeps what this node had uploaded, and what it logged after that is only here (logd export ${runId})`);
    }
    return new RunOfAnotherNode(`run ${runId} is in the shared store already, uploaded by node "${holder}"; this node ("${this.node}") leaves its copy local. Give each node its own LOGD_NODE`);
  }

  /** Another local store uploads this run under the same node name: two daemons were given one LOGD_NODE. */
  private sameNodeName(runId: string): RunOfAnotherNode {
    return new RunOfAnotherNode(`run ${runId} is in the shared store already, uploaded by another daemon that was given the same node name ("${this.node}"): node names must differ. This daemon's copy stays local and is not uploaded (logd export ${runId}); give each node its own LOGD_NODE (or \`logd serve --node\`) and restart this daemon: a run created under the new name is uploaded as usual`);
  }

  /**
   * Continues on this node a run another node logged (continue.ts), in one
   * transaction; null when the store does not have the run. Each statement
   * waits at most `o.statementMs`, and the whole claim at most `deadlineMs`:
   * past it the connection is dropped, which rolls the transaction back. The
   * wait for the run's row lock ends first, leaving the rest of the claim
   * (writing the continuation log, the commit) up to a second of the deadline.
   */
  async continueRun(id: string, o: Omit<ClaimOptions, 'lockMs'>, deadlineMs: number, materialize: (s: StoredRun) => Promise<number>): Promise<{ offset: number; rows: number } | null> {
    const deadline = Date.now() + deadlineMs;
    await withDeadline(this.ready(), deadlineMs, 'connecting');
    const c = await withDeadline(this.pool.connect(), deadline - Date.now(), 'connecting');
    let broken = false;
    const onError = () => (broken = true);
    c.on('error', onError);
    const timer = setTimeout(() => {
      broken = true;
      (c as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
    }, Math.max(1, deadline - Date.now()));
    let out: { offset: number; rows: number } | null = null;
    try {
      await c.query('BEGIN');
      const left = Math.max(1, deadline - Date.now());
      const lockMs = Math.max(1, left - Math.min(1000, Math.floor(left / 2)));
      out = await claimRun(c, id, { ...o, source: this.source, statementMs: Math.min(o.statementMs, left), lockMs }, materialize);
      await c.query('COMMIT');
      return out;
    } catch (e) {
      await c.query('ROLLBACK').catch(() => (broken = true));
      // Only the commit was left: it may have gone through with its answer lost. The cursor says.
      if (out && (await this.claimLanded(id, out.offset))) return out;
      if (broken && !(e instanceof StoreContinueRefused)) throw new Error(`the shared store did not answer within ${deadlineMs} ms`);
      throw e;
    } finally {
      clearTimeout(timer);
      c.off('error', onError);
      c.release(broken);
    }
  }

  /** Whether the store's cursor of `id` is this node's at `offset` (a claim committed), asked on another connection. */
  private async claimLanded(id: string, offset: number): Promise<boolean> {
    try {
      const res = await withDeadline(this.pool.query('SELECT 1 FROM logd_cursors WHERE run_id = $1 AND node = $2 AND log_offset = $3', [id, this.node, offset]), 2000, 'checking a commit');
      return res.rows.length > 0;
    } catch {
      return false;
    }
  }

  async close(): Promise<void> {
    await this.pool.end().catch(() => {});
  }
}

async function upsertRun(c: pg.ClientBase, node: string, row: RunRow, addRows: number, caughtUp: boolean): Promise<void> {
  await upsertRuns(c, node, [{ row, addRows, caughtUp }]);
}

/** The runs' listing rows (distinct ids, in the order given: callers sort them by id). */
async function upsertRuns(c: pg.ClientBase, node: string, runs: Array<{ row: RunRow; addRows: number; caughtUp: boolean }>): Promise<void> {
  const args: unknown[] = [];
  const tuples: string[] = [];
  for (const { row, addRows, caughtUp } of runs) {
    // A final state shows once the whole log is in the store; until then a run
    // that is final locally reads as finishing.
    const state = FINAL.includes(row.state) && !caughtUp ? 'finishing' : row.state;
    const tags = JSON.parse(row.tags || '[]') as string[];
    const base = args.length;
    args.push(row.id, node, clean(row.project), clean(row.name), clean(row.grp), clean(row.job_type), tags.map(clean), clean(row.notes), row.mode,
      state, clean(row.state_reason), row.exit_code, row.created_at, row.finished_at, clean(row.config_json), clean(row.summary_json),
      clean(row.metadata_json), addRows);
    tuples.push(`(${Array.from({ length: 18 }, (_, i) => `$${base + i + 1}`).join(', ')})`);
  }
  await c.query(
    `INSERT INTO logd_runs (id, node, project, name, grp, job_type, tags, notes, mode, state, state_reason, exit_code,
       created_at, finished_at, config_json, summary_json, metadata_json, history_rows)
     VALUES ${tuples.join(', ')}
     ON CONFLICT (id) DO UPDATE SET project = excluded.project, name = excluded.name, grp = excluded.grp,
       job_type = excluded.job_type, tags = excluded.tags, notes = excluded.notes, mode = excluded.mode,
       state = CASE WHEN logd_runs.state IN ('finished', 'crashed', 'killed') AND excluded.state NOT IN ('finished', 'crashed', 'killed')
                    THEN logd_runs.state ELSE excluded.state END,
       state_reason = excluded.state_reason, exit_code = excluded.exit_code, finished_at = excluded.finished_at,
       config_json = excluded.config_json, summary_json = excluded.summary_json, metadata_json = excluded.metadata_json,
       history_rows = logd_runs.history_rows + excluded.history_rows, uploaded_at = clock_timestamp()`,
    args,
  );
}

/** COPY BINARY data of several slices as one: the first header, every slice's tuples, one trailer. */
export function joinCopy(parts: Array<Uint8Array | null>): Uint8Array | null {
  const some = parts.filter((p): p is Uint8Array => p !== null);
  if (some.length <= 1) return some[0] ?? null;
  const HEADER = 19; // signature (11), flags (4), header extension length (4): logd writes no extension
  const bodies = some.map((p) => {
    const ext = Buffer.from(p.buffer, p.byteOffset, p.byteLength).readInt32BE(15);
    if (ext !== 0) throw new Error('joinCopy: a COPY header with an extension');
    return p.subarray(HEADER + ext, p.byteLength - 2);
  });
  const out = Buffer.allocUnsafe(HEADER + bodies.reduce((n, b) => n + b.byteLength, 0) + 2);
  out.set(some[0].subarray(0, HEADER), 0);
  let at = HEADER;
  for (const b of bodies) {
    out.set(b, at);
    at += b.byteLength;
  }
  out.writeInt16BE(-1, at);
  return out;
}

/** The ranks of the writers that joined in a slice (a writer's frame may come again: the last one wins). */
async function upsertWriters(c: pg.ClientBase, runId: string, writers: EncodedSlice['writers']): Promise<void> {
  if (!writers.length) return;
  await c.query(
    `INSERT INTO logd_writers (run_id, writer, rank) SELECT $1, w, r FROM unnest($2::bigint[], $3::int[]) AS u(w, r)
     ON CONFLICT (run_id, writer) DO UPDATE SET rank = excluded.rank`,
    [runId, writers.map((w) => w.idx), writers.map((w) => w.rank)],
  );
}

/** Bytes per INSERT of images, and images per INSERT: bound parameters go over in binary, no hex or escaping. */
const IMAGE_BATCH_BYTES = 8 << 20;
const IMAGE_BATCH_ROWS = 100;

/** Each image once per run: one that is there already (the same picture logged again later) is left as it is. */
async function insertImages(c: pg.ClientBase, runId: string, images: ImageBytes[]): Promise<void> {
  for (let i = 0; i < images.length;) {
    const args: unknown[] = [runId];
    const rows: string[] = [];
    let bytes = 0;
    for (; i < images.length && rows.length < IMAGE_BATCH_ROWS && (rows.length === 0 || bytes + images[i].data.byteLength <= IMAGE_BATCH_BYTES); i++) {
      const img = images[i];
      args.push(img.sha256, img.format, Buffer.from(img.data.buffer, img.data.byteOffset, img.data.byteLength));
      rows.push(`($1, $${args.length - 2}, $${args.length - 1}, $${args.length}::bytea)`);
      bytes += img.data.byteLength;
    }
    await c.query(`INSERT INTO logd_images (run_id, sha256, format, data) VALUES ${rows.join(', ')} ON CONFLICT (run_id, sha256) DO NOTHING`, args);
  }
}

function withDeadline<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the shared store did not answer within the deadline (${what})`)), Math.max(1, ms));
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/** PostgreSQL text cannot hold NUL. */
function clean(s: string): string {
  return s.includes('\0') ? s.replaceAll('\0', '\uFFFD') : s;
}
