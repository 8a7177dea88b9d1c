// The shared source: the PostgreSQL store that every node's uploader fills
// (schema in daemon/upload/schema.ts). History is read as it is stored — per
// run, writer and metric chunks of float8[] — in binary, so one metric of a
// million-row run is a handful of arrays, not a million rows. Console output
// and media are rows keyed by the offset of their frame in the run's log, so
// they page as the local source does, with that offset as the cursor.
import { OWN_MEDIA_PREFIX } from '../../src/media.js';
import pg from 'pg';
import { parseStoreUrl, redact, type StoreUrl } from '../upload/url.js';
import { pgOptions, lacksPassword, NO_PASSWORD } from '../upload/pgpass.js';
import { SCHEMA_VERSION, storeVersion } from '../upload/schema.js';
import { copyOut } from '../upload/copy.js';
import { assemble, dropFirstRows, type RawChunk, type Q, type Snapshot, type Skel } from './shared-chunks.js';
import { batches, readRuns, groupMetricNames } from './shared-group.js';
import { editSharedRun, removeSharedRun } from './shared-edit.js';
import { STREAM_HISTORY, STREAM_SYSTEM } from '../upload/pg-sink.js';
import type { QuerySource, RunFilter, RunPage, HistoryQuery, RunInfo, History, ConsoleLine, MediaItem, RunEditAsk } from './source.js';
import { RunNotFound } from './source.js';
import { downsampleHistory } from './downsampled.js';
import { latestTimeline } from './latest-timeline.js';

/** A page of console output or media: at most this many entries and about this many bytes (whole frames; one frame at least). */
const PAGE_ENTRIES = 10_000;
const PAGE_BYTES = 4 << 20;
/** The first schema version with console output and media. */
const MEDIA_SCHEMA = 2;

interface RunDbRow {
  id: string; node: string; project: string; name: string; grp: string; job_type: string; tags: string[]; notes: string; mode: string;
  state: string; state_reason: string; exit_code: number; created_at: number; finished_at: number;
  config_json: string; summary_json: string; metadata_json: string; history_rows: string;
}

export class SharedSource implements QuerySource {
  readonly kind = 'shared' as const;
  readonly where: string;
  private pool: pg.Pool;
  /** The store's schema version, as check() found it. */
  private version = SCHEMA_VERSION;

  /** `pages`: the bounds of a console or media page (smaller in tests, to cross page ends). */
  constructor(private url: StoreUrl, private pages = { entries: PAGE_ENTRIES, bytes: PAGE_BYTES }) {
    this.where = `the shared store ${url.shown}`;
    this.pool = new pg.Pool(pgOptions(url, { max: 4, connectionTimeoutMillis: 15_000, application_name: 'logd reader', allowExitOnIdle: true }));
    this.pool.on('error', () => {});
  }

  /** Connects and refuses a store that is not logd's, is newer than this logd, or is empty. */
  async check(): Promise<void> {
    const c = await this.pool.connect().catch((e: Error & { code?: string }) => {
      const hint = lacksPassword(e) ? `; ${NO_PASSWORD}` : e.code === '28P01' ? '; fix the user or password where you give them: LOGD_STORE_URL, the --store-url-file or ~/.pgpass' : '';
      throw this.error(`cannot read ${this.where}: ${e.message}${hint}`);
    });
    try {
      const v = await storeVersion(c).catch((e: Error) => {
        throw this.error(`cannot read ${this.where}: ${e.message}`);
      });
      if (v > SCHEMA_VERSION) throw this.error(`${this.where} has schema version ${v}, newer than this logd reads (${SCHEMA_VERSION}); upgrade logd`);
      if (v === 0) throw this.error(`${this.where} holds no logd data yet (no schema); nodes create it when they upload (LOGD_UPLOAD_URL), or run \`logd store migrate\``);
      this.version = v;
    } finally {
      c.release();
    }
  }

  private error(msg: string): Error {
    return new Error(redact(msg, this.url));
  }

  private async q<T extends pg.QueryResultRow>(text: string, values: unknown[]): Promise<T[]> {
    try {
      const res = await this.pool.query<T>(text, values);
      return res.rows;
    } catch (e) {
      throw this.error(`reading ${this.where} failed: ${(e as Error).message}`);
    }
  }

  /**
   * A read-only REPEATABLE READ transaction on a connection of its own: every query in it sees the snapshot of the
   * first, so a compaction (daemon/compaction/) committing between the skeleton, row bodies and values of a run's
   * chunks cannot merge away chunks the skeleton named. `end(true)` commits, `end(false)` rolls back; either
   * gives the connection back.
   */
  /**
   * A REPEATABLE READ snapshot on one pooled connection. `head`: a statement without parameters sent with the BEGIN
   * in one round trip (its rows in `head`): a small run's read is a handful of round trips, which are most of its
   * cost when a group's thousand runs are read.
   */
  private async begin(head?: string): Promise<Snapshot & { head: pg.QueryResultRow[]; end: (ok: boolean) => Promise<void> }> {
    let c: pg.PoolClient;
    try {
      c = await this.pool.connect();
    } catch (e) {
      throw this.error(`reading ${this.where} failed: ${(e as Error).message}`);
    }
    let broken = false;
    const onError = () => (broken = true);
    c.on('error', onError);
    const q: Q = async <R extends pg.QueryResultRow>(text: string, values: unknown[]): Promise<R[]> => {
      try {
        return (await c.query<R>(text, values)).rows;
      } catch (e) {
        throw this.error(`reading ${this.where} failed: ${(e as Error).message}`);
      }
    };
    const copy = async (sql: string) => {
      try {
        return await copyOut(c, sql);
      } catch (e) {
        throw this.error(`reading ${this.where} failed: ${(e as Error).message}`);
      }
    };
    const release = () => {
      c.off('error', onError);
      c.release(broken);
    };
    let headRows: pg.QueryResultRow[] = [];
    try {
      if (!head) await q('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY', []);
      else {
        const results = await c.query(`BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; ${head}`).catch((e: Error) => {
          throw this.error(`reading ${this.where} failed: ${e.message}`);
        });
        headRows = (results as unknown as pg.QueryResult[])[1].rows;
      }
    } catch (e) {
      broken = true;
      release();
      throw e;
    }
    return {
      q,
      copy,
      head: headRows,
      end: async (ok) => {
        try {
          if (ok) await q('COMMIT', []);
          else await c.query('ROLLBACK').catch(() => (broken = true));
        } catch (e) {
          broken = true;
          throw e;
        } finally {
          release();
        }
      },
    };
  }

  private async snapshot<T>(fn: (s: Snapshot) => Promise<T>): Promise<T> {
    const s = await this.begin();
    let ok = false;
    try {
      const out = await fn(s);
      ok = true;
      return out;
    } finally {
      await s.end(ok);
    }
  }

  async listRuns(f: RunFilter): Promise<RunPage> {
    const where: string[] = [];
    const args: unknown[] = [];
    const arg = (v: unknown) => (args.push(v), `$${args.length}`);
    if (f.project) where.push(`project = ${arg(f.project)}`);
    if (f.group) where.push(`grp = ${arg(f.group)}`);
    if (f.state) where.push(`state = ${arg(f.state)}`);
    if (f.tag) where.push(`${arg(f.tag)} = ANY(tags)`);
    if (f.text) {
      const like = arg(`%${f.text.replace(/[\\%_]/g, (c) => '\\' + c)}%`);
      where.push(`(id ILIKE ${like} OR name ILIKE ${like} OR project ILIKE ${like} OR grp ILIKE ${like} OR notes ILIKE ${like})`);
    }
    const cond = where.length ? `WHERE ${where.join(' AND ')}` : '';
    const total = Number((await this.q<{ n: string }>(`SELECT count(*) AS n FROM logd_runs ${cond}`, args))[0].n);
    const limit = f.limit && f.limit > 0 ? f.limit : 1000;
    const rows = await this.q<RunDbRow>(`SELECT * FROM logd_runs ${cond} ORDER BY created_at DESC, id LIMIT ${arg(limit)} OFFSET ${arg(f.offset ?? 0)}`, args);
    return { runs: rows.map(infoOf), total };
  }

  async getRun(id: string): Promise<RunInfo> {
    const rows = await this.q<RunDbRow>('SELECT * FROM logd_runs WHERE id = $1', [id]);
    if (!rows.length) throw new RunNotFound(id, this.where);
    return infoOf(rows[0]);
  }

  async history(id: string, hq: HistoryQuery = {}): Promise<History> {
    if (hq.points && hq.points > 0) {
      // The wanted metrics' chunks only (steps, times and their values), bucketed here.
      const whole = await this.history(id, { ...hq, points: 0, tailRows: 0, allAttempts: false });
      return downsampleHistory(whole, hq.keys ?? [], hq.points);
    }
    let whole: History | null = null;
    for await (const h of this.headed(id, hq, Infinity)) whole = h;
    return whole!;
  }

  /**
   * Many runs' histories (the dashboard's group page): per batch of runs (shared-group.ts) one snapshot whose BEGIN
   * carries which of them exist and which were rewound, then their keys, skeletons and chunks in three statements.
   * A rewound run is read on its own (its latest timeline is decided over its whole history).
   */
  async histories(runs: Array<{ id: string; rows: number }>, query: { keys?: string[] } = {}): Promise<Map<string, History>> {
    const out = new Map<string, History>();
    for await (const batch of this.historyBatches(runs, query)) for (const [id, h] of batch) out.set(id, h);
    return out;
  }

  /**
   * histories() a batch at a time (the reads-server's ReadHistories sends one while the store reads the next).
   * `rows` < 0: not known; the store's counts are looked up first (one statement), to batch by.
   */
  async *historyBatches(runs: Array<{ id: string; rows: number }>, query: { keys?: string[] } = {}): AsyncGenerator<Map<string, History>> {
    if (runs.some((r) => r.rows < 0)) {
      const counts = new Map((await this.q<{ id: string; n: number }>('SELECT id, history_rows::float8 AS n FROM logd_runs WHERE id = ANY($1)', [runs.map((r) => r.id)])).map((r) => [r.id, r.n]));
      runs = runs.map((r) => ({ id: r.id, rows: r.rows < 0 ? counts.get(r.id) ?? 0 : r.rows }));
    }
    for (const batch of batches(runs)) {
      const out = new Map<string, History>();
      const ids = [...new Set(batch.map((r) => r.id))];
      const s = await this.begin(`SELECT id, position('resumedFromStep' in metadata_json) > 0 AS rewound FROM logd_runs
        WHERE id = ANY(ARRAY[${ids.map((id) => pg.escapeLiteral(id)).join(',')}]::text[])`);
      let ok = false;
      let rewound: string[] = [];
      try {
        const found = s.head as Array<{ id: string; rewound: boolean }>;
        rewound = found.filter((r) => r.rewound).map((r) => r.id);
        const plain = found.filter((r) => !r.rewound).map((r) => r.id);
        for (const [id, h] of await readRuns(s, plain, query.keys)) out.set(id, h);
        ok = true;
      } finally {
        await s.end(ok);
      }
      for (const id of rewound) out.set(id, await this.history(id, { keys: query.keys }));
      yield out;
    }
  }

  /** Many runs' metric names (shared-group.ts): one statement over the key dictionaries, no chunk read. */
  metricNames(ids: string[]): Promise<Map<string, string[]>> {
    return groupMetricNames((text, values) => this.q(text, values), ids);
  }

  /** A rewound run: its rows are kept by writer, and which are current is decided here, over the whole history. */
  private async rewound(id: string, hq: HistoryQuery): Promise<History> {
    const info = await this.getRun(id);
    const whole = latestTimeline(await this.rows(id, { ...hq, tailRows: 0 }), info.metadataJson, !!hq.allAttempts);
    return hq.tailRows && hq.tailRows > 0 && whole.rows > hq.tailRows ? dropFirstRows(whole, whole.rows - hq.tailRows) : whole;
  }

  /**
   * The history in pieces, each about `sliceRows` rows, read in one snapshot of the store: a reader sends one
   * piece while PostgreSQL reads the next, and holds a piece, not the run, in memory. Only the plain case is
   * read in slices; a downsampled read, a tail and a rewound run's latest timeline (decided over the whole
   * history) come as one piece.
   */
  async *historyPieces(id: string, hq: HistoryQuery = {}, sliceRows = SLICE_ROWS): AsyncGenerator<History> {
    if (hq.points && hq.points > 0) {
      yield await this.history(id, hq);
      return;
    }
    yield* this.headed(id, hq, hq.tailRows && hq.tailRows > 0 ? Infinity : sliceRows);
  }

  /** A read of the stored rows (not downsampled): its snapshot opened with what it needs to know first. */
  private async *headed(id: string, hq: HistoryQuery, sliceRows: number): AsyncGenerator<History> {
    // The run's rewound mark, its keys and its chunks' skeleton come with the BEGIN (one round trip, no metadata
    // parsed); the id is quoted, the stream a number of ours.
    const stream = hq.system ? STREAM_SYSTEM : STREAM_HISTORY;
    const lit = pg.escapeLiteral(id);
    const s = await this.begin(`SELECT
      (SELECT position('resumedFromStep' in metadata_json) > 0 FROM logd_runs WHERE id = ${lit}) AS rewound,
      (SELECT coalesce(json_agg(json_build_array(key_id, name) ORDER BY key_id), '[]'::json) FROM logd_keys WHERE run_id = ${lit} AND stream = ${stream}) AS keys,
      (SELECT coalesce(json_agg(json_build_array(writer::float8, seq_lo, ord::float8, nrows) ORDER BY ord, writer, seq_lo), '[]'::json)
         FROM logd_rows WHERE run_id = ${lit} AND stream = ${stream}) AS skel`);
    let ok = false;
    let ended = false;
    try {
      const head = s.head[0] as { rewound: boolean | null; keys: Array<[number, string]>; skel: Array<[number, number, number, number]> };
      if (head.rewound === null) throw new RunNotFound(id, this.where);
      if (!hq.system && (hq.allAttempts || head.rewound)) {
        ended = true;
        await s.end(true);
        yield await this.rewound(id, hq);
        return;
      }
      const known = {
        keyRows: head.keys.map(([key_id, name]) => ({ key_id, name })),
        skel: head.skel.map(([writer, seq_lo, ord, nrows]) => ({ writer, seq_lo, ord, nrows })),
      };
      yield* this.piecesIn(s, id, hq, sliceRows, known);
      ok = true;
    } finally {
      if (!ended) await s.end(ok);
    }
  }

  /** The stored rows, as uploaded (one snapshot of the store). */
  private async rows(id: string, hq: HistoryQuery): Promise<History> {
    return this.snapshot((s) => this.rowsIn(s, id, hq));
  }

  private async rowsIn(s: Snapshot, id: string, hq: HistoryQuery): Promise<History> {
    let whole: History | null = null;
    for await (const h of this.piecesIn(s, id, hq, Infinity)) whole = h;
    return whole!;
  }

  /** The stored rows in pieces of about `sliceRows` rows (at least one piece; Infinity: one). */
  private async *piecesIn({ q, copy }: Snapshot, id: string, hq: HistoryQuery, sliceRows: number, known?: { keyRows: Array<{ key_id: number; name: string }>; skel: Skel[] }): AsyncGenerator<History> {
    const stream = hq.system ? STREAM_SYSTEM : STREAM_HISTORY;
    const keyRows = known?.keyRows ?? await q<{ key_id: number; name: string }>('SELECT key_id, name FROM logd_keys WHERE run_id = $1 AND stream = $2 ORDER BY key_id', [id, stream]);
    const keys = keyRows.map((k) => k.name);
    const pos = new Map<number, number>(keyRows.map((k, i) => [k.key_id, i]));
    const wanted = hq.keys?.length ? keyRows.filter((k) => hq.keys!.includes(k.name)).map((k) => k.key_id) : null;
    if (wanted && wanted.length === 0) return void (yield assemble(keys, [], pos, true));

    // Chunks in arrival order; for a tail, only the last ones.
    let skel = known?.skel ?? await q<Skel>('SELECT writer::float8, seq_lo, ord::float8, nrows FROM logd_rows WHERE run_id = $1 AND stream = $2 ORDER BY ord, writer, seq_lo', [id, stream]);
    let cut = 0;
    if (hq.tailRows && hq.tailRows > 0) {
      let n = 0, i = skel.length;
      while (i > 0 && n < hq.tailRows) n += skel[--i].nrows;
      skel = skel.slice(i);
      cut = Math.max(0, n - hq.tailRows);
    }
    if (!skel.length) return void (yield assemble(keys, [], pos, !!wanted));
    const slices: Skel[][] = [[]];
    for (let i = 0, n = 0; i < skel.length; i++) {
      if (n >= sliceRows) slices.push([]), (n = 0);
      slices[slices.length - 1].push(skel[i]);
      n += skel[i].nrows;
    }
    // Arrays travel as PostgreSQL keeps them, in binary COPY (copyOut): no float printed or parsed, nothing
    // base64. COPY takes no parameters: the run id is quoted, the rest are numbers the store gave.
    const lit = (xs: number[]) => `'{${xs.map((x) => String(x)).join(',')}}'`;
    const fetch = async (part: Skel[]) => {
      const sel = `run_id = ${pg.escapeLiteral(id)} AND stream = ${stream} AND (writer, seq_lo) IN (SELECT * FROM unnest(${lit(part.map((s) => s.writer))}::bigint[], ${lit(part.map((s) => s.seq_lo))}::float8[]))`;
      // The chunks' bodies (steps, times) and their values in one statement, one round trip: a body's key_id is
      // null. Told apart here, not by their order (an Append may interleave them).
      const tuples = await copy(`COPY (SELECT writer::float8, seq_lo, NULL::int4, steps, times, NULL::int4[] FROM logd_rows WHERE ${sel}
        UNION ALL SELECT writer::float8, seq_lo, key_id, NULL::float8[], vals, idx FROM logd_values WHERE ${sel}${wanted ? ` AND key_id = ANY(${lit(wanted)}::int[])` : ''}) TO STDOUT (FORMAT binary)`);
      const bodies: Array<Array<Buffer | null>> = [];
      const vals: Array<Array<Buffer | null>> = [];
      for (const [w, sq, k, st, vs, idx] of tuples) {
        if (k === null) bodies.push([w, sq, st, vs]);
        else vals.push([w, sq, k, idx, vs]);
      }
      return [bodies, vals] as const;
    };
    let next = fetch(slices[0]);
    for (let i = 0; i < slices.length; i++) {
      const [bodies, vals] = await next;
      if (i + 1 < slices.length) {
        next = fetch(slices[i + 1]);
        next.catch(() => {}); // awaited next round; a consumer that stops first leaves it to the rollback
      }
      const byChunk = new Map<string, RawChunk>();
      // Fields: float8 and int4 big-endian, arrays in array_send's form (decoded by assemble, into its output).
      for (const [w, sq, st, tm] of bodies) {
        const writer = w!.readDoubleBE(0);
        byChunk.set(`${writer}/${sq!.readDoubleBE(0)}`, { steps: st!, times: tm!, writer, values: [] });
      }
      for (const [w, sq, k, idx, vs] of vals) {
        byChunk.get(`${w!.readDoubleBE(0)}/${sq!.readDoubleBE(0)}`)?.values.push({ key_id: k!.readInt32BE(0), idx, vals: vs! });
      }
      const chunks = slices[i].map((s) => byChunk.get(`${s.writer}/${s.seq_lo}`)!).filter(Boolean);
      const h = assemble(keys, chunks, pos, !!wanted);
      yield i === 0 && cut > 0 ? dropFirstRows(h, cut) : h;
    }
  }

  async console(id: string, after: number): Promise<{ entries: ConsoleLine[]; next: number }> {
    const page = await this.page(id, 'logd_console', 'text', after, [], []);
    if (page.end <= after) return { entries: [], next: page.next };
    const rows = await this.q<{ w: number; rank: number | null; t: number; s: 'out' | 'err'; l: string }>(
      `SELECT c.writer::float8 AS w, wr.rank, c.t, c.stream AS s, c.text AS l FROM logd_console c
       LEFT JOIN logd_writers wr ON wr.run_id = c.run_id AND wr.writer = c.writer
       WHERE c.run_id = $1 AND c.log_offset >= $2 AND c.log_offset < $3 ORDER BY c.log_offset, c.n`,
      [id, after, page.end]);
    return { entries: rows.map((r) => ({ w: r.w, rank: r.rank, t: r.t, s: r.s, l: r.l })), next: page.next };
  }

  async media(id: string, after: number, filter: { kind?: string; key?: string } = {}): Promise<{ entries: MediaItem[]; next: number }> {
    const cond: string[] = [];
    const args: unknown[] = [];
    if (filter.kind) (args.push(filter.kind), cond.push(`kind = $${args.length + 2}`));
    if (filter.key) (args.push(filter.key), cond.push(`key = $${args.length + 2}`));
    else (args.push(`${OWN_MEDIA_PREFIX}%`), cond.push(`key NOT LIKE $${args.length + 2}`)); // logd's own items (src/media.ts) only when named
    const page = await this.page(id, 'logd_media', 'entry_json', after, cond, args);
    if (page.end <= after) return { entries: [], next: page.next };
    const rows = await this.q<{ w: number; rank: number | null; entry_json: string }>(
      `SELECT m.writer::float8 AS w, wr.rank, m.entry_json FROM logd_media m
       LEFT JOIN logd_writers wr ON wr.run_id = m.run_id AND wr.writer = m.writer
       WHERE m.run_id = $1 AND m.log_offset >= $2 AND m.log_offset < $${args.length + 3}${cond.map((c) => ` AND m.${c}`).join('')}
       ORDER BY m.log_offset, m.n`,
      [id, after, ...args, page.end]);
    return { entries: rows.map((r) => ({ w: r.w, rank: r.rank, ...(JSON.parse(r.entry_json) as Omit<MediaItem, 'w' | 'rank'>) })), next: page.next };
  }

  async image(id: string, sha256: string): Promise<{ data: Uint8Array; format: 'png' | 'jpeg' } | null> {
    this.needMediaSchema();
    const rows = await this.q<{ format: 'png' | 'jpeg'; data: Buffer }>('SELECT format, data FROM logd_images WHERE run_id = $1 AND sha256 = $2', [id, sha256]);
    if (rows.length) return { data: rows[0].data, format: rows[0].format };
    await this.mustExist(id);
    return null;
  }

  /**
   * Where a page of a run's console pieces or media entries from `after` on
   * ends: whole frames (the entries of one frame share its log offset), at
   * most pages.entries entries and about pages.bytes of `big`, one frame at
   * least. Only offsets and sizes are read here; the page itself is the
   * range [after, end) of log offsets, and `next` 0 says it is the last
   * (what was uploaded since is left to the next read). `cond` are extra
   * conditions whose placeholders start at $3.
   */
  private async page(id: string, table: string, big: string, after: number, cond: string[], args: unknown[]): Promise<{ end: number; next: number }> {
    await this.mustExist(id);
    const where = `run_id = $1 AND log_offset >= $2${cond.map((c) => ` AND ${c}`).join('')}`;
    const sizes = await this.q<{ off: number; len: number }>(
      `SELECT log_offset::float8 AS off, octet_length(${big}) AS len FROM ${table} WHERE ${where} ORDER BY log_offset, n LIMIT ${this.pages.entries + 1}`,
      [id, after, ...args]);
    let count = 0, bytes = 0;
    for (let i = 0; i < sizes.length;) {
      const off = sizes[i].off;
      let j = i, frameBytes = 0;
      while (j < sizes.length && sizes[j].off === off) frameBytes += sizes[j++].len;
      if (i > 0 && (count + (j - i) > this.pages.entries || bytes + frameBytes > this.pages.bytes)) return { end: off, next: off };
      if (j === sizes.length && sizes.length > this.pages.entries) {
        // A first frame of more entries than a page: it is the page, whole.
        const after2 = await this.q<{ off: number }>(`SELECT log_offset::float8 AS off FROM ${table} WHERE ${where.replace('log_offset >= $2', 'log_offset > $2')} ORDER BY log_offset, n LIMIT 1`, [id, off, ...args]);
        return after2.length ? { end: after2[0].off, next: after2[0].off } : { end: off + 1, next: 0 };
      }
      count += j - i;
      bytes += frameBytes;
      i = j;
    }
    return { end: sizes.length ? sizes[sizes.length - 1].off + 1 : after, next: 0 };
  }

  /** Console output and media came with schema version 2: an older store has none to read. */
  private needMediaSchema(): void {
    if (this.version < MEDIA_SCHEMA) {
      throw this.error(`${this.where} has schema version ${this.version}, which keeps no console output or media (version ${MEDIA_SCHEMA} does); a node with this logd upgrades it when it uploads, or run \`logd store migrate\``);
    }
  }

  private async mustExist(id: string): Promise<void> {
    this.needMediaSchema();
    const rows = await this.q<{ one: number }>('SELECT 1 AS one FROM logd_runs WHERE id = $1', [id]);
    if (!rows.length) throw new RunNotFound(id, this.where);
  }

  async editRun(id: string, e: RunEditAsk): Promise<{ name: string; tags: string[]; notes: string }> {
    const r = await editSharedRun((text, values) => this.q(text, values), id, e);
    if (!r) throw new RunNotFound(id, this.where);
    return r;
  }

  /** `logd rm --store`: shared-edit.ts. */
  async removeRun(id: string): Promise<void> {
    await this.mustExist(id);
    await removeSharedRun(this.pool, id);
  }

  async close(): Promise<void> {
    await this.pool.end().catch(() => {});
  }
}

/** Rows per piece of a history read in slices (historyPieces): a few MB of values for a run of tens of metrics. */
const SLICE_ROWS = 65_536;

function infoOf(r: RunDbRow): RunInfo {
  let meta: Record<string, unknown> = {};
  try {
    meta = JSON.parse(r.metadata_json || '{}') as Record<string, unknown>;
  } catch {
    /* left empty */
  }
  return {
    id: r.id, project: r.project, name: r.name, group: r.grp, jobType: r.job_type, tags: r.tags, state: r.state, stateReason: r.state_reason,
    createdAt: r.created_at, finishedAt: r.finished_at, exitCode: r.exit_code, configJson: r.config_json, summaryJson: r.summary_json,
    // The store counts every uploaded row; a rewound run's readers get its latest timeline, as from the local store.
    metadataJson: JSON.stringify({ ...meta, node: r.node }), historyRows: Math.max(0, Number(r.history_rows) - (typeof meta.supersededRows === 'number' ? meta.supersededRows : 0)),
    writers: 0, runToken: '', mode: r.mode,
    notes: r.notes, ownerWriterId: '',
  };
}

export async function openSharedSource(raw: string): Promise<QuerySource> {
  const url = parseStoreUrl(raw);
  const src = new SharedSource(url);
  try {
    await src.check();
  } catch (e) {
    await src.close();
    throw e;
  }
  return src;
}
