// What every API answer shares: the error that carries its HTTP status, and
// the reading of integer query parameters. Its own file so that the modules
// api.ts delegates to (console.ts, media.ts) need not import api.ts.

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
