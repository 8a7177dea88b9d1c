// Filtering and sorting runs by their fields, config and summary: the
// runs table of the dashboard (`/?filter=lr<0.01&sort=summary.loss`) and
// `logd runs --filter 'lr < 0.01' --sort summary.loss` read the same
// expressions. No dependencies: the daemon's UI server, the CLI and the page
// (web/) all import it.
//
//   filter := term (';' | ',' | ' and ') term ...      every term must hold
//   term   := FIELD OP VALUE                            lr < 0.01, state = crashed, name ~ bert
//   OP     := = | == | != | < | <= | > | >= | ~ (contains, any case)
//   FIELD  := id | name | project | group | jobType | state | tags | notes | rank | rows | created | finished
//           | config.KEY | summary.KEY | KEY (config first, then summary)
//           | summary.KEY.min | .max | .count | .last | .best (every value logged: metadata.stats)
// A VALUE may be quoted ('a b', "x;y"). Numbers compare as numbers, anything
// else as text (ISO times compare in order). A run without the field fails
// every term but `!=`.

import type { RunInfo } from './wire.js'; // a type only: nothing is loaded with it

export type FilterOp = '=' | '!=' | '<' | '<=' | '>' | '>=' | '~';

export interface FilterTerm {
  field: string;
  op: FilterOp;
  value: string;
  /** The value as a number, when it is one. */
  num: number | null;
}

/** The JSON shape of a run that listings give (README, `runs --json`), or part of it. */
export interface RunFields {
  id?: string; project?: string; name?: string; group?: string; jobType?: string; state?: string; notes?: string; tags?: string[];
  stateReason?: string; exitCode?: number;
  createdAt?: string; finishedAt?: string | null; historyRows?: number; rank?: number | null;
  config?: Record<string, unknown>; summary?: Record<string, unknown>; metadata?: Record<string, unknown>;
}

export class FilterError extends Error {
  override name = 'FilterError';
}

const OPS: FilterOp[] = ['!=', '<=', '>=', '=', '<', '>', '~'];
const NUMBER = /^[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/i;
const HELP = 'a filter is FIELD OP VALUE terms joined by ";" or "and", e.g. "lr < 0.01; state = crashed"';

/** Splits on ';', ',' and the word "and" outside quotes. */
function splitTerms(text: string): string[] {
  const out: string[] = [];
  let cur = '', quote = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote) {
      cur += c;
      if (c === quote) quote = '';
    } else if (c === '"' || c === "'") {
      quote = c;
      cur += c;
    } else if (c === ';' || c === ',') {
      out.push(cur);
      cur = '';
    } else if (/\s/.test(c) && /^\s+and\s+/i.test(text.slice(i))) {
      out.push(cur);
      cur = '';
      i += /^\s+and\s+/i.exec(text.slice(i))![0].length - 1;
    } else cur += c;
  }
  if (quote) throw new FilterError(`unclosed ${quote} in ${JSON.stringify(text)}`);
  out.push(cur);
  return out.map((t) => t.trim()).filter(Boolean);
}

export function parseTerm(text: string): FilterTerm {
  const m = /^([^\s=!<>~]+)\s*(==|!=|<=|>=|=|<|>|~)\s*(.*)$/s.exec(text.trim());
  if (!m) {
    const bad = /^[^\s=!<>~]*\s*([=!<>~]*)/.exec(text.trim())?.[1];
    throw new FilterError(bad ? `"${text}": unknown operator "${bad}"; use = != < <= > >= or ~` : `"${text}" has no operator; ${HELP}`);
  }
  const op = (m[2] === '==' ? '=' : m[2]) as FilterOp;
  if (!OPS.includes(op)) throw new FilterError(`"${text}": unknown operator "${m[2]}"`);
  let value = m[3].trim();
  if (value === '') throw new FilterError(`"${text}": no value after "${m[2]}"; ${HELP}`);
  if (/^[=<>!~]/.test(value)) throw new FilterError(`"${text}": unknown operator "${m[2]}${/^[=<>!~]+/.exec(value)![0]}"; use = != < <= > >= or ~ (quote a value that starts with one)`);
  const q = value[0];
  if ((q === '"' || q === "'") && value.length >= 2 && value.endsWith(q)) value = value.slice(1, -1);
  return { field: m[1], op, value, num: NUMBER.test(value) ? Number(value) : null };
}

/** Parses a filter expression; throws FilterError saying what is wrong. Empty text: no terms. */
export function parseFilter(text: string): FilterTerm[] {
  return splitTerms(text).map(parseTerm);
}

/** A key of a config or summary object: the key itself (`a/b`, `a.b`), else a path through nested objects. */
function lookup(o: Record<string, unknown> | undefined, key: string): unknown {
  if (!o || typeof o !== 'object') return undefined;
  if (Object.prototype.hasOwnProperty.call(o, key)) return o[key];
  const parts = key.split('.');
  let cur: unknown = o;
  for (let i = 0; i < parts.length; i++) {
    if (cur === null || typeof cur !== 'object') return undefined;
    // The longest run of parts that is a key at this level (a nested key may hold dots).
    let found = false;
    for (let j = parts.length; j > i; j--) {
      const k = parts.slice(i, j).join('.');
      if (Object.prototype.hasOwnProperty.call(cur, k)) {
        cur = (cur as Record<string, unknown>)[k];
        i = j - 1;
        found = true;
        break;
      }
    }
    if (!found) return undefined;
  }
  return cur;
}

const RUN_FIELDS: Record<string, (r: RunFields) => unknown> = {
  id: (r) => r.id, name: (r) => r.name, project: (r) => r.project, group: (r) => r.group, jobtype: (r) => r.jobType, job_type: (r) => r.jobType,
  state: (r) => r.state, notes: (r) => r.notes, tags: (r) => r.tags, tag: (r) => r.tags,
  rank: (r) => r.rank ?? ((r.metadata?.rank as { rank?: number } | null | undefined)?.rank ?? null),
  rows: (r) => r.historyRows, historyrows: (r) => r.historyRows,
  created: (r) => r.createdAt, createdat: (r) => r.createdAt, finished: (r) => r.finishedAt, finishedat: (r) => r.finishedAt,
  node: (r) => (r.metadata?.node ?? r.metadata?.host) as unknown, host: (r) => r.metadata?.host,
  statereason: (r) => r.stateReason || null, reason: (r) => r.stateReason || null,
  exitcode: (r) => (r.state === 'running' || r.state === 'finishing' ? null : r.exitCode), exit: (r) => (r.state === 'running' || r.state === 'finishing' ? null : r.exitCode),
  // How the owner's process ended (metadata.end, docs/story.md): the signal by name, and when.
  signal: (r) => (r.metadata?.end as { signal?: string | null } | undefined)?.signal ?? null,
  ended: (r) => {
    const at = (r.metadata?.end as { at?: number } | undefined)?.at;
    return typeof at === 'number' ? new Date(at * 1000).toISOString() : null;
  },
};

/** The run fields a column or a filter may name besides config and summary keys. */
export const RUN_FIELD_NAMES = ['id', 'name', 'project', 'group', 'jobType', 'state', 'stateReason', 'exitCode', 'signal', 'ended', 'notes', 'tags', 'rank', 'rows', 'created', 'finished', 'node', 'host'];

/** Whether `field` names a run field (not a config or summary key). */
export function isRunField(field: string): boolean {
  return Object.prototype.hasOwnProperty.call(RUN_FIELDS, field.toLowerCase());
}

/** The value of a field (see the grammar above); undefined when the run has none. */
export function fieldValue(r: RunFields, field: string): unknown {
  if (field.startsWith('config.')) return lookup(r.config, field.slice(7));
  if (field.startsWith('summary.')) {
    const v = lookup(r.summary, field.slice(8));
    return v !== undefined ? v : statOf(r, field.slice(8));
  }
  // An own entry only: a field named __proto__ or constructor is a config or summary key like any other.
  const own = isRunField(field) ? RUN_FIELDS[field.toLowerCase()] : undefined;
  if (own) return own(r);
  const c = lookup(r.config, field);
  return c !== undefined ? c : lookup(r.summary, field);
}

/** Summary keys whose best value is their lowest (losses, errors); any other key's best is its highest. */
export const LOWER_IS_BETTER = /loss|err|perplex|mse|mae|rmse|wer|cer|nll|time|latency/i;

/**
 * `KEY.min`, `KEY.max`, `KEY.count`, `KEY.last` and `KEY.best` of a logged metric, from the run's per-key stats
 * (metadata.stats: every value logged, not only the last); `best` is the min of a key named like a loss or an
 * error (LOWER_IS_BETTER), else the max. Undefined for a summary key of another name.
 */
function statOf(r: RunFields, path: string): unknown {
  const m = /^(.+)\.(min|max|count|last|best)$/.exec(path);
  if (!m) return undefined;
  const stats = r.metadata?.stats as Record<string, { min?: number; max?: number; count?: number; last?: number }> | undefined;
  const s = stats && Object.prototype.hasOwnProperty.call(stats, m[1]) ? stats[m[1]] : undefined;
  if (!s) return undefined;
  if (m[2] === 'best') return LOWER_IS_BETTER.test(m[1]) ? s.min : s.max;
  return s[m[2] as 'min' | 'max' | 'count' | 'last'];
}

const asNumber = (v: unknown): number | null => {
  if (typeof v === 'number') return v;
  if (typeof v === 'boolean') return v ? 1 : 0;
  if (typeof v === 'string' && NUMBER.test(v.trim())) return Number(v);
  return null;
};
const asText = (v: unknown): string => (typeof v === 'string' ? v : typeof v === 'number' || typeof v === 'boolean' ? String(v) : JSON.stringify(v));

function holds(v: unknown, t: FilterTerm): boolean {
  if (Array.isArray(v) && t.field.toLowerCase().startsWith('tag')) {
    return t.op === '!=' ? !v.some((x) => holds(x, { ...t, op: '=' })) : v.some((x) => holds(x, t));
  }
  if (v === undefined || v === null) return t.op === '!=';
  if (t.op === '~') return asText(v).toLowerCase().includes(t.value.toLowerCase());
  const n = asNumber(v);
  let c: number;
  if (n !== null && t.num !== null) c = n < t.num ? -1 : n > t.num ? 1 : n === t.num ? 0 : NaN;
  else {
    const s = asText(v);
    c = s < t.value ? -1 : s > t.value ? 1 : 0;
  }
  switch (t.op) {
    case '=': return c === 0;
    case '!=': return c !== 0;
    case '<': return c < 0;
    case '<=': return c <= 0;
    case '>': return c > 0;
    case '>=': return c >= 0;
  }
  return false;
}

/** Whether a run satisfies every term. */
export function matches(r: RunFields, terms: FilterTerm[]): boolean {
  return terms.every((t) => holds(fieldValue(r, t.field), t));
}

/**
 * An order by one field: numbers by value, then text; runs without the field
 * last in either direction; ties newest first.
 */
export function compareBy(field: string, desc: boolean): (a: RunFields, b: RunFields) => number {
  return (a, b) => compareKeys(sortKey(a, field), sortKey(b, field), desc) || tie(a, b);
}

type SortKey = [rank: number, num: number, text: string];

function sortKey(r: RunFields, field: string): SortKey {
  const v = fieldValue(r, field);
  if (v === undefined || v === null || (typeof v === 'number' && Number.isNaN(v))) return [2, 0, ''];
  const n = asNumber(v);
  return n !== null ? [0, n, ''] : [1, 0, asText(v)];
}

function compareKeys(x: SortKey, y: SortKey, desc: boolean): number {
  if (x[0] !== y[0]) return x[0] - y[0];
  if (x[0] === 2) return 0;
  const c = x[0] === 0 ? (x[1] < y[1] ? -1 : x[1] > y[1] ? 1 : 0) : x[2] < y[2] ? -1 : x[2] > y[2] ? 1 : 0;
  return desc ? -c : c;
}

function tie(a: RunFields, b: RunFields): number {
  const x = a.createdAt ?? '', y = b.createdAt ?? '';
  return x < y ? 1 : x > y ? -1 : (a.id ?? '') < (b.id ?? '') ? -1 : 1;
}

/** Filters and orders runs (a copy); `sort` empty keeps their order. Each run's sort key is read once. */
export function selectRuns<T extends RunFields>(runs: T[], terms: FilterTerm[], sort = '', desc = false): T[] {
  const kept = terms.length ? runs.filter((r) => matches(r, terms)) : [...runs];
  if (!sort) return kept;
  const keyed = kept.map((r) => ({ r, k: sortKey(r, sort) }));
  keyed.sort((a, b) => compareKeys(a.k, b.k, desc) || tie(a.r, b.r));
  return keyed.map((x) => x.r);
}

/** A run as the filter reads it: its fields, its config, summary and metadata parsed, its rank (null for none). */
export function runFields(r: RunInfo): RunFields {
  const parse = (t: string) => {
    try {
      return JSON.parse(t || '{}') as Record<string, unknown>;
    } catch {
      return {};
    }
  };
  const metadata = parse(r.metadataJson);
  const rank = (metadata.rank as { rank?: unknown } | undefined)?.rank;
  return {
    id: r.id, project: r.project, name: r.name, group: r.group, jobType: r.jobType, state: r.state, notes: r.notes, tags: r.tags,
    stateReason: r.stateReason, exitCode: r.exitCode, createdAt: new Date(r.createdAt * 1000).toISOString(),
    finishedAt: r.finishedAt ? new Date(r.finishedAt * 1000).toISOString() : null, historyRows: Number(r.historyRows),
    rank: typeof rank === 'number' && rank >= 0 ? rank : null, config: parse(r.configJson), summary: parse(r.summaryJson), metadata,
  };
}
