// A group of hundreds of ranks on one page (no DOM: tested in Node): tables
// show a page of rows (the ranks that need a look first) until "show all" is
// pressed, and the step-rate chart draws the slowest few, not 512 lines.

/** Rows a rank table shows before "show all". */
export const RANK_ROWS = 64;
/** Above this many ranks, the rate chart draws only the slowest RATE_SLOWEST. */
export const RATE_LINES = 16;
export const RATE_SLOWEST = 8;

/**
 * The rows to show of `items` (kept in their order): every one when there are
 * at most `limit` or `all` is set; else those `first` picks (up to `limit`),
 * then the others in order up to `limit`.
 */
export function shownRows<T>(items: T[], limit: number, all: boolean, first: (x: T) => boolean = () => false): T[] {
  if (all || items.length <= limit) return items;
  const keep = new Set<T>();
  for (const x of items) if (keep.size < limit && first(x)) keep.add(x);
  for (const x of items) if (keep.size < limit) keep.add(x);
  return items.filter((x) => keep.has(x));
}

/** The `k` items with the lowest `rate` (NaN last), lowest first. */
export function slowest<T>(items: T[], k: number, rate: (x: T) => number): T[] {
  return [...items].sort((a, b) => {
    const x = rate(a), y = rate(b);
    return Number.isNaN(x) ? 1 : Number.isNaN(y) ? -1 : x - y;
  }).slice(0, k);
}
