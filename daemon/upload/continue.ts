// Continuing on this node a run that another node logged (init(resume=...)
// of an id this node does not have; docs/shared-store.md). One transaction
// arbitrates between nodes: it locks the run's cursor row, checks that the
// run is final and wholly uploaded (or that its node has gone quiet for
// longer than the takeover lease), has this node write its continuation log,
// and moves the cursor to this node, past that log's first frames. Two nodes
// that resume the same run at once queue on the row lock; the second one
// finds the run `running` on the first and is refused.
import type pg from 'pg';
import { StoreContinueRefused, type StoredRun } from '../store/from-store.js';
import type { Attempt, WriterMeta } from '../store/format.js';

const FINAL = ['finished', 'crashed', 'killed'];

export interface ClaimOptions {
  node: string;
  /** This local store's identity (store-identity.ts), kept with the cursor. */
  source?: string;
  /** The new attempt's process: the store names it as the holder until this node's first upload of the run. */
  owner: { host: string; pid: number };
  /** A run the store shows running whose node uploaded nothing for this long may be taken over (its tail is then lost to the store). */
  takeoverAfterMs: number;
  /** Each statement's limit. */
  statementMs: number;
  /**
   * The longest wait for the run's row lock, below what is left of the claim's deadline: a row that stays
   * locked (its node is uploading it, or another node is claiming it; under load that transaction can be
   * slow) is answered "busy, try again", never taken for a store that does not answer (for which
   * resume='allow' creates the run here as new, a second copy of a run that the store has).
   */
  lockMs: number;
}

/** PostgreSQL's lock_not_available: lock_timeout ran out. */
const LOCK_NOT_AVAILABLE = '55P03';

interface StoreRow {
  id: string; node: string; project: string; name: string; grp: string; job_type: string; tags: string[]; notes: string; mode: string;
  state: string; state_reason: string; exit_code: number; created_at: number; finished_at: number; config_json: string; summary_json: string;
  metadata_json: string; history_rows: string; cur_node: string; log_offset: string; done: boolean; idle_s: number;
}

interface StoredMeta {
  host?: string; pid?: number; writers?: Array<WriterMeta & { attached?: boolean }>; attempts?: Attempt[];
  stats?: Record<string, { last: number | string; min: number | string | null; max: number | string | null; count: number }>;
  lastStep?: number; supersededRows?: number; fromStore?: { node: string; offsetBase: number };
}

/** Inside an open transaction on `c`: the claim; the caller commits. Returns the new cursor, or null when the store lacks the run. */
export async function claimRun(
  c: pg.ClientBase, id: string, o: ClaimOptions, materialize: (s: StoredRun) => Promise<number>,
): Promise<{ offset: number; rows: number } | null> {
  await c.query(`SET LOCAL lock_timeout = ${Math.max(1, Math.floor(Math.min(o.lockMs, o.statementMs)))}`);
  await c.query(`SET LOCAL statement_timeout = ${Math.max(1, Math.floor(o.statementMs))}`);
  let res;
  try {
    res = await c.query<StoreRow>(
      `SELECT r.*, c.node AS cur_node, c.log_offset, c.done, extract(epoch FROM now() - r.uploaded_at)::float8 AS idle_s
         FROM logd_runs r JOIN logd_cursors c ON c.run_id = r.id WHERE r.id = $1 FOR UPDATE OF r, c`, [id]);
  } catch (e) {
    if ((e as { code?: string }).code !== LOCK_NOT_AVAILABLE) throw e;
    throw new StoreContinueRefused('behind', `run ${id} is in the shared store, and its row stayed locked for ${Math.round(o.lockMs)} ms (its node is uploading it, or another node is taking it over right now); try again in a moment`);
  }
  const r = res.rows[0];
  if (!r) return null;
  const m = JSON.parse(r.metadata_json || '{}') as StoredMeta;
  const holder = `pid ${m.pid ?? '?'} on ${m.host || 'an unknown host'} (node "${r.cur_node}")`;
  const idle = `its last upload ${Math.round(r.idle_s)} s ago`;
  const wholeIn = FINAL.includes(r.state) && r.done;
  const stale = r.idle_s * 1000 >= o.takeoverAfterMs;
  if (!wholeIn && !stale) {
    if (FINAL.includes(r.state) || r.state === 'finishing') {
      throw new StoreContinueRefused('behind', `run ${id} ended on node "${r.cur_node}", but its upload to the shared store is not complete yet (${idle}); try again once it is (logd status on that node shows the backlog)`);
    }
    throw new StoreContinueRefused('held', `run ${id} is still running, held by ${holder}, ${idle}; it can be continued once that process has ended and its node has uploaded it (or, if that node is gone for good, after ${Math.round(o.takeoverAfterMs / 1000)} s without an upload from it: LOGD_TAKEOVER_AFTER_S)`);
  }
  const keys = (await c.query<{ key_id: number; name: string }>('SELECT key_id, name FROM logd_keys WHERE run_id = $1 AND stream = 0 ORDER BY key_id', [id])).rows;
  const names: string[] = [];
  for (const k of keys) names[k.key_id] = k.name;
  const idOf = new Map(names.map((n, i) => [n, i]));
  const attempts: Attempt[] = m.attempts?.length ? m.attempts.map((a) => ({ ...a })) : [{ n: 1, startedAt: r.created_at, host: m.host ?? '', pid: m.pid ?? 0, fromStep: 0 }];
  const last = attempts[attempts.length - 1];
  if (!wholeIn) {
    // Taken over: the quiet node's last attempt ends here as far as the store knows; what it did not upload is lost to the store.
    Object.assign(last, { endedAt: Date.now() / 1000, state: 'crashed', reason: takeoverReason(r.cur_node, idle, o.node), exitCode: -1 });
  } else if (!last.state) {
    Object.assign(last, { endedAt: r.finished_at, state: r.state, reason: r.state_reason, exitCode: r.exit_code });
  }
  const supersededRows = m.supersededRows ?? 0;
  // A run taken over: its metadata is the live run's as of its node's last upload, which can count rows
  // that were not durable yet then, and so never came: the new attempt's steps follow the stored rows.
  // (Its per-key stats are left as they are: exact ones would read every stored value, within the claim's deadline.)
  const lastStep = wholeIn ? m.lastStep ?? -1 : Math.min(m.lastStep ?? Infinity, await storedLastStep(c, id));
  const userSummary: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(JSON.parse(r.summary_json || '{}') as Record<string, unknown>)) if (!m.stats?.[k]) userSummary[k] = v;
  const storeEnd = (m.fromStore?.offsetBase ?? 0) + Number(r.log_offset);
  const first = attempts[0];
  const offset = await materialize({
    meta: {
      id, project: r.project, name: r.name, group: r.grp, jobType: r.job_type, tags: r.tags, notes: r.notes, mode: r.mode, createdAt: r.created_at,
      runToken: '', ownerWriterId: 'w-gone-1', host: first.host, pid: first.pid, rank: null, config: JSON.parse(r.config_json || '{}') as Record<string, unknown>,
      fromStore: { node: r.cur_node, offsetBase: storeEnd },
    },
    keys: names,
    writers: (m.writers ?? []).map(({ attached: _a, ...w }) => w),
    attempts,
    base: {
      rows: Number(r.history_rows) - supersededRows, lastStep, supersededRows,
      stats: Object.entries(m.stats ?? {}).filter(([k]) => idOf.has(k)).map(([k, s]) => ({ id: idOf.get(k)!, ...s })),
    },
    userSummary,
  });
  await c.query('UPDATE logd_cursors SET node = $2, source = NULLIF($4, \'\'), log_offset = $3, system_done = true, done = false, updated_at = now() WHERE run_id = $1', [id, o.node, offset, o.source ?? '']);
  await c.query("UPDATE logd_runs SET node = $2, state = 'running', state_reason = $3, metadata_json = $4, uploaded_at = clock_timestamp() WHERE id = $1",
    [id, o.node, `continued on node "${o.node}" as attempt ${attempts.length + 1}`, JSON.stringify({ ...m, host: o.owner.host, pid: o.owner.pid })]);
  return { offset, rows: Number(r.history_rows) };
}

/** The highest step of the rows the store holds of a run (-1: none). */
async function storedLastStep(c: pg.ClientBase, id: string): Promise<number> {
  const res = await c.query<{ s: number | null }>('SELECT max(s) AS s FROM logd_rows, unnest(steps) AS s WHERE run_id = $1 AND stream = 0', [id]);
  return res.rows[0]?.s ?? -1;
}

/** A taken-over attempt's end, as the store records it (`takenOverBy` reads it back). */
function takeoverReason(gone: string, idle: string, by: string): string {
  return `node "${gone}" stopped uploading (${idle}); taken over by node "${by}"`;
}

/**
 * The node that took the run over from `node`, when the store's metadata
 * records that one of `node`'s attempts was taken over; else null. A node
 * that comes back to a run taken from it says so, instead of taking the
 * other node for a second one with its LOGD_NODE.
 */
export function takenOverBy(metadataJson: string, node: string): string | null {
  let attempts: Attempt[] = [];
  try {
    attempts = (JSON.parse(metadataJson || '{}') as StoredMeta).attempts ?? [];
  } catch {
    return null;
  }
  const prefix = `node "${node}" stopped uploading (`;
  for (const a of attempts) {
    if (a.state !== 'crashed' || !a.reason?.startsWith(prefix)) continue;
    const by = /; taken over by node "(.*)"$/.exec(a.reason);
    if (by) return by[1];
  }
  return null;
}
