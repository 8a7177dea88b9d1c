// The values behind the parameter views (`GET /api/explore`): for every run a
// listing picks (the runs table's filters and expression, or the runs named in
// `runs=`), the few fields the page draws (config and summary keys, run
// fields), columnar, with the keys there are to choose from. A parallel
// coordinates view of 10 000 runs needs some hundred kilobytes of this, not
// the 10 MB of their whole JSON.
import { selectRuns, fieldValue, type RunFields } from '../../src/run-filter.js';
import { fieldsOf, type RunIndex, type RunJson } from './run-index.js';
import { HttpError, intParam, listingParams } from './params.js';
import { RunNotFound } from '../query/index.js';

/** At most this many runs in one answer (the page says when more matched). */
export const EXPLORE_MAX = 20_000;
const MAX_KEYS = 32;
/** A text value is cut here: an axis of categories shows names, not documents. */
const MAX_TEXT = 200;

export type Cell = number | string | null;

export interface ExploreAnswer {
  /** Runs matching, before the cap. */
  total: number;
  runs: Array<{ id: string; name: string; group: string; state: string; rank: number | null }>;
  /** Per key asked, one value per run in `runs`' order: a number, a text (booleans and objects as text), or null where the run has none. */
  values: Record<string, Cell[]>;
  fields: { config: string[]; summary: string[] };
}

/** A value for an axis: finite numbers stay numbers (±inf and NaN too, as the page decides); the rest is text. */
export function cell(v: unknown): Cell {
  if (v === undefined || v === null) return null;
  if (typeof v === 'number') return v;
  if (typeof v === 'string') return v.length > MAX_TEXT ? v.slice(0, MAX_TEXT) + '…' : v;
  if (typeof v === 'boolean') return String(v);
  const text = JSON.stringify(v);
  return text.length > MAX_TEXT ? text.slice(0, MAX_TEXT) + '…' : text;
}

/** Up to this many chosen runs are read one by one; more, through the whole listing. */
const BY_ID = 500;

export async function explore(index: RunIndex, getRun: (id: string) => Promise<RunJson>, q: URLSearchParams): Promise<ExploreAnswer> {
  const { base, terms } = listingParams(q);
  const keys = [...new Set(q.getAll('keys').map((k) => k.trim()).filter(Boolean))];
  if (keys.length > MAX_KEYS) throw new HttpError(400, `at most ${MAX_KEYS} keys at once, not ${keys.length}`);
  const limit = intParam(q, 'limit', EXPLORE_MAX, EXPLORE_MAX);
  const ids = (q.get('runs') ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  let picked: RunJson[];
  if (ids.length > 0 && ids.length <= BY_ID) {
    // A selection: each run read by its id (a hundred small reads), not the store's whole listing.
    const got = await Promise.all(ids.map((id) => getRun(id).catch((e: Error) => {
      if (e instanceof RunNotFound) return null;
      throw e;
    })));
    picked = got.filter((r): r is RunJson => r !== null);
  } else if (ids.length > 0) {
    // Chosen runs: from every run of the store, in the order named.
    const all = await index.runs({});
    const byId = new Map(all.map((r) => [r.id as string, r]));
    picked = ids.map((id) => byId.get(id)).filter((r): r is RunJson => r !== undefined);
  } else {
    const how = JSON.stringify([q.get('filter') ?? '', '', false]);
    picked = await index.selected(base, how, (runs) => selectRuns(runs as Array<RunJson & RunFields>, terms, '', false));
  }
  const shown = picked.slice(0, limit);
  // Without a prototype: a key named __proto__ is a key like any other.
  const values: Record<string, Cell[]> = Object.create(null);
  for (const k of keys) values[k] = shown.map((r) => cell(fieldValue(r as RunFields, k)));
  return {
    total: picked.length,
    runs: shown.map((r) => ({ id: r.id as string, name: String(r.name ?? ''), group: String(r.group ?? ''), state: String(r.state ?? ''), rank: (r.rank as number | null) ?? null })),
    values,
    fields: fieldsOf(picked),
  };
}
