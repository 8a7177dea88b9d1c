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

/** A number as JSON: finite numbers as they are, the others as strings. */
export function jsonNumber(v: number): number | string {
  return Number.isFinite(v) ? v : Number.isNaN(v) ? 'NaN' : v > 0 ? 'Infinity' : '-Infinity';
}
