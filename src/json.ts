// JSON that keeps non-finite numbers: a user logging a NaN loss wants to see
// it. NaN/Infinity/-Infinity travel as the strings "NaN", "Infinity", "-Infinity".
export function toJson(value: unknown): string {
  return JSON.stringify(value, (_k, v) => {
    if (typeof v === 'number' && !Number.isFinite(v)) return Number.isNaN(v) ? 'NaN' : v > 0 ? 'Infinity' : '-Infinity';
    if (typeof v === 'bigint') return v.toString();
    return v;
  });
}

export function parseJsonObject(text: string, what: string): Record<string, unknown> {
  if (text === '') return {};
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new Error(`${what} is not valid JSON (${(e as Error).message})`);
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new Error(`${what} must be a JSON object`);
  return v as Record<string, unknown>;
}

/**
 * An object for user-chosen keys. Without a prototype, a key named
 * `__proto__` is an ordinary key: on a plain object, assigning it would set
 * the prototype instead, and the value would vanish from summaries and exports.
 */
export function ownRecord<T = unknown>(from?: Record<string, T>): Record<string, T> {
  const o = Object.create(null) as Record<string, T>;
  if (from) Object.assign(o, from);
  return o;
}

/** A number as JSON: finite numbers as they are, the others as strings. */
export function jsonNumber(v: number): number | string {
  return Number.isFinite(v) ? v : Number.isNaN(v) ? 'NaN' : v > 0 ? 'Infinity' : '-Infinity';
}
