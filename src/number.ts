// Numbers as people read them in tables.

/** About 6 significant digits (integers whole, NaN and infinities as they are); --json output keeps every digit. */
export function shortNumber(v: number): number {
  return Number.isInteger(v) || !Number.isFinite(v) ? v : Number(v.toPrecision(6));
}
