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
import { decodeFloat8Array, decodeInt4Array } from '../upload/copy.js';
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
   * Queries that must see one state of the store: a run's chunks are read in three statements (skeleton, row
   * bodies, values), and a compaction (daemon/compaction/) committing between them would merge away chunks the
   * skeleton named. In one REPEATABLE READ transaction they all read the snapshot of the first.
   */
  private async snapshot<T>(fn: (q: <R extends pg.QueryResultRow>(text: string, values: unknown[]) => Promise<R[]>) => Promise<T>): Promise<T> {
    let c: pg.PoolClient;
    try {
      c = await this.pool.connect();
    } catch (e) {
      throw this.error(`reading ${this.where} failed: ${(e as Error).message}`);
    }
    let broken = false;
    const onError = () => (broken = true);
    c.on('error', onError);
    const q = async <R extends pg.QueryResultRow>(text: string, values: unknown[]): Promise<R[]> => {
      try {
        return (await c.query<R>(text, values)).rows;
      } catch (e) {
        throw this.error(`reading ${this.where} failed: ${(e as Error).message}`);
      }
    };
    try {
      await q('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY', []);
      const out = await fn(q);
      await q('COMMIT', []);
      return out;
    } catch (e) {
      await c.query('ROLLBACK').catch(() => (broken = true));
      throw e;
    } finally {
      c.off('error', onError);
      c.release(broken);
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
    const info = await this.getRun(id);
    if (!hq.system && (hq.allAttempts || info.metadataJson.includes('resumedFromStep'))) {
      // A rewound run: its rows are kept by writer, and which are current is decided here, over the whole history.
      const whole = latestTimeline(await this.rows(id, { ...hq, tailRows: 0 }), info.metadataJson, !!hq.allAttempts);
      return hq.tailRows && hq.tailRows > 0 && whole.rows > hq.tailRows ? dropFirstRows(whole, whole.rows - hq.tailRows) : whole;
    }
    return this.rows(id, hq);
  }

  /** The stored rows, as uploaded (one snapshot of the store). */
  private async rows(id: string, hq: HistoryQuery): Promise<History> {
    return this.snapshot((q) => this.rowsIn(q, id, hq));
  }

  private async rowsIn(q: <R extends pg.QueryResultRow>(text: string, values: unknown[]) => Promise<R[]>, id: string, hq: HistoryQuery): Promise<History> {
    const stream = hq.system ? STREAM_SYSTEM : STREAM_HISTORY;
    const keyRows = await q<{ key_id: number; name: string }>('SELECT key_id, name FROM logd_keys WHERE run_id = $1 AND stream = $2 ORDER BY key_id', [id, stream]);
    const keys = keyRows.map((k) => k.name);
    const pos = new Map<number, number>(keyRows.map((k, i) => [k.key_id, i]));
    const wanted = hq.keys?.length ? keyRows.filter((k) => hq.keys!.includes(k.name)).map((k) => k.key_id) : null;
    if (wanted && wanted.length === 0) return assemble(keys, [], pos, true);

    // Chunks in arrival order; for a tail, only the last ones.
    type Skel = { writer: number; seq_lo: number; ord: number; nrows: number };
    let skel = await q<Skel>('SELECT writer::float8, seq_lo, ord::float8, nrows FROM logd_rows WHERE run_id = $1 AND stream = $2 ORDER BY ord, writer, seq_lo', [id, stream]);
    let cut = 0;
    if (hq.tailRows && hq.tailRows > 0) {
      let n = 0, i = skel.length;
      while (i > 0 && n < hq.tailRows) n += skel[--i].nrows;
      skel = skel.slice(i);
      cut = Math.max(0, n - hq.tailRows);
    }
    if (!skel.length) return assemble(keys, [], pos, !!wanted);
    const ws = skel.map((s) => s.writer), ss = skel.map((s) => s.seq_lo);
    const sel = 'run_id = $1 AND stream = $2 AND (writer, seq_lo) IN (SELECT * FROM unnest($3::bigint[], $4::float8[]))';
    // Arrays travel in PostgreSQL's binary array form (array_send), base64 in
    // the text protocol: no float is printed or parsed on either side.
    const [bodies, vals] = await Promise.all([
      q<{ writer: number; seq_lo: number; steps: string; times: string }>(
        `SELECT writer::float8, seq_lo, ${b64('steps')} AS steps, ${b64('times')} AS times FROM logd_rows WHERE ${sel}`, [id, stream, ws, ss]),
      q<{ writer: number; seq_lo: number; key_id: number; idx: string | null; vals: string }>(
        `SELECT writer::float8, seq_lo, key_id, ${b64('idx')} AS idx, ${b64('vals')} AS vals FROM logd_values WHERE ${sel}${wanted ? ' AND key_id = ANY($5::int[])' : ''}`,
        wanted ? [id, stream, ws, ss, wanted] : [id, stream, ws, ss]),
    ]);
    const byChunk = new Map<string, { steps: Float64Array; times: Float64Array; writer: number; values: ValueRow[] }>();
    for (const b of bodies) byChunk.set(`${b.writer}/${b.seq_lo}`, { steps: f64s(b.steps), times: f64s(b.times), writer: b.writer, values: [] });
    for (const v of vals) {
      byChunk.get(`${v.writer}/${v.seq_lo}`)?.values.push({ key_id: v.key_id, idx: v.idx === null ? null : decodeInt4Array(Buffer.from(v.idx, 'base64')), vals: f64s(v.vals) });
    }
    const chunks = skel.map((s) => byChunk.get(`${s.writer}/${s.seq_lo}`)!).filter(Boolean);
    const h = assemble(keys, chunks, pos, !!wanted);
    return cut > 0 ? dropFirstRows(h, cut) : h;
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
    if (e.name !== undefined && e.name.trim() === '') throw new Error('a run\'s name cannot be empty');
    const r = (await this.q<{ name: string; tags: string[]; notes: string }>(
      `UPDATE logd_runs SET name = CASE WHEN $2::text IS NULL THEN name ELSE $2 END,
         tags = ARRAY(SELECT DISTINCT t FROM unnest(array_cat(tags, $3::text[])) t WHERE NOT t = ANY($4::text[])),
         notes = CASE WHEN $5::text IS NULL THEN notes ELSE $5 END
       WHERE id = $1 RETURNING name, tags, notes`,
      [id, e.name ?? null, e.addTags ?? [], e.removeTags ?? [], e.notes ?? null]))[0];
    if (!r) throw new RunNotFound(id, this.where);
    return r;
  }

  /**
   * Every row of the run in every table of the store (by run_id), and its own row, in one transaction. Its upload
   * cursor stays, marked done: the node that uploaded it does not send it again (it would, from the start, were
   * the cursor gone); a run continued or edited there later comes back with what is new.
   */
  async removeRun(id: string): Promise<void> {
    await this.mustExist(id);
    const tables = (await this.q<{ table_name: string }>(
      "SELECT table_name FROM information_schema.columns WHERE table_schema = current_schema() AND column_name = 'run_id' AND table_name LIKE 'logd\\_%'", [])).map((r) => r.table_name);
    const c = await this.pool.connect();
    try {
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

  async close(): Promise<void> {
    await this.pool.end().catch(() => {});
  }
}

interface ValueRow { key_id: number; idx: Int32Array | null; vals: Float64Array }

const b64 = (col: string) => `encode(array_send(${col}), 'base64')`;
const f64s = (text: string) => decodeFloat8Array(Buffer.from(text, 'base64'));

/** Chunks into the columnar History; with a key filter, rows carrying none of the keys are left out (as the local source does). */
function assemble(keys: string[], chunks: Array<{ steps: Float64Array; times: Float64Array; writer: number; values: ValueRow[] }>, pos: Map<number, number>, filtered: boolean): History {
  let rows = 0, pairs = 0;
  for (const c of chunks) {
    rows += c.steps.length;
    for (const v of c.values) pairs += v.vals.length;
  }
  const steps = new Float64Array(rows), times = new Float64Array(rows), writers = new Uint32Array(rows);
  const start = new Uint32Array(rows + 1), keyIds = new Uint32Array(pairs), values = new Float64Array(pairs);
  let r0 = 0, p0 = 0;
  for (const c of chunks) {
    const n = c.steps.length;
    const counts = new Uint32Array(n);
    for (const v of c.values) {
      if (v.idx) for (let i = 0; i < v.idx.length; i++) counts[v.idx[i]]++;
      else for (let i = 0; i < n; i++) counts[i]++;
    }
    // Row offsets of this chunk; rows without a pair vanish when filtering.
    const at = new Uint32Array(n);
    let r = r0, p = p0;
    const rowOut = new Int32Array(n);
    for (let i = 0; i < n; i++) {
      if (filtered && counts[i] === 0) {
        rowOut[i] = -1;
        continue;
      }
      rowOut[i] = r;
      steps[r] = c.steps[i];
      times[r] = c.times[i];
      writers[r] = c.writer;
      start[r] = p;
      at[i] = p;
      p += counts[i];
      r++;
    }
    for (const v of [...c.values].sort((a, b) => a.key_id - b.key_id)) {
      const k = pos.get(v.key_id) ?? 0;
      for (let j = 0; j < v.vals.length; j++) {
        const i = v.idx ? v.idx[j] : j;
        keyIds[at[i]] = k;
        values[at[i]++] = v.vals[j];
      }
    }
    r0 = r;
    p0 = p;
  }
  start[r0] = p0;
  return { keys, rows: r0, steps: steps.subarray(0, r0), times: times.subarray(0, r0), writers: writers.subarray(0, r0), start: start.subarray(0, r0 + 1), keyIds: keyIds.subarray(0, p0), values: values.subarray(0, p0) };
}

function dropFirstRows(h: History, n: number): History {
  const p = h.start[n];
  const start = new Uint32Array(h.rows - n + 1);
  for (let r = 0; r <= h.rows - n; r++) start[r] = h.start[r + n] - p;
  return {
    keys: h.keys, rows: h.rows - n, steps: h.steps.subarray(n), times: h.times.subarray(n), writers: h.writers.subarray(n), start, keyIds: h.keyIds.subarray(p), values: h.values.subarray(p),
    ...(h.attempts ? { attempts: h.attempts.subarray(n), superseded: h.superseded!.subarray(n) } : {}),
  };
}

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
