// What every API answer shares: the error that carries its HTTP status, and
// the reading of integer query parameters. Its own file so that the modules
// api.ts delegates to (console.ts, media.ts) need not import api.ts.

import { parseFilter, FilterError, type FilterTerm } from '../../src/run-filter.js';

export class HttpError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

export function intParam(q: URLSearchParams, name: string, dflt: number, max: number): number {
  const v = q.get(name);
  if (v === null || v === '') return dflt;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new HttpError(400, `${name} must be a non-negative integer, not ${JSON.stringify(v.slice(0, 40))}`);
  return Math.min(n, max);
}

/** A listing's filters (`project`, `group`, `state`, `tag`, `text`) and its filter expression, parsed (400 when bad). */
export function listingParams(q: URLSearchParams): { base: { project: string; group: string; state: string; tag: string; text: string }; terms: FilterTerm[] } {
  const base = { project: q.get('project') ?? '', group: q.get('group') ?? '', state: q.get('state') ?? '', tag: q.get('tag') ?? '', text: q.get('text') ?? '' };
  try {
    return { base, terms: parseFilter(q.get('filter') ?? '') };
  } catch (e) {
    if (e instanceof FilterError) throw new HttpError(400, `filter: ${e.message}`);
    throw e;
  }
}
