// An axis of the parameter views (parallel coordinates, scatter): from the
// values of one key across runs to positions in 0..1, ticks and colours. No
// DOM: tested in Node.
//
// A key whose values are all numbers is numeric: linear, or logarithmic when
// every value is positive and they span 100× or more (a learning rate). A key
// with any text value (a number in some runs and a string in others, too) is
// categorical: every value as text, in natural order. Runs without the key,
// and non-finite numbers, have no position: the views draw them on a row of
// their own, "missing".

export type Cell = number | string | null;

export interface Tick { at: number; label: string }

export interface Axis {
  key: string;
  kind: 'linear' | 'log' | 'category';
  /** Numeric axes: the range of the finite values. */
  min: number;
  max: number;
  /** Categorical axes: the values as text, in order. */
  categories: string[];
  /** Numbers and text among its values (drawn as categories). */
  mixed: boolean;
  /** Runs without a position (no value, or not finite). */
  missing: number;
  /** 0 (bottom, left) to 1; null: no position. */
  pos(v: Cell): number | null;
  ticks(): Tick[];
  /** A position's value back, for brushes on numeric axes. */
  valueAt(p: number): number;
}

const collator = new Intl.Collator(undefined, { numeric: true, sensitivity: 'base' });
/** At most this many category labels on an axis; the rest are there, unlabelled. */
const MAX_LABELS = 24;

export function makeAxis(key: string, values: Cell[]): Axis {
  let numbers = 0, texts = 0, missing = 0;
  let min = Infinity, max = -Infinity;
  for (const v of values) {
    if (v === null) missing++;
    else if (typeof v === 'number') {
      if (!Number.isFinite(v)) {
        missing++;
        continue;
      }
      numbers++;
      if (v < min) min = v;
      if (v > max) max = v;
    } else texts++;
  }
  if (texts > 0) return categoryAxis(key, values, numbers > 0);
  if (numbers === 0) return { key, kind: 'linear', min: 0, max: 0, categories: [], mixed: false, missing, pos: () => null, ticks: () => [], valueAt: () => 0 };
  const log = min > 0 && max / min >= 100;
  const lo = log ? Math.log10(min) : min, hi = log ? Math.log10(max) : max;
  const span = hi - lo;
  const t = (x: number) => (span === 0 ? 0.5 : ((log ? Math.log10(x) : x) - lo) / span);
  return {
    key, kind: log ? 'log' : 'linear', min, max, categories: [], mixed: false, missing,
    pos: (v) => (typeof v === 'number' && Number.isFinite(v) && (!log || v > 0) ? t(v) : null),
    ticks: () => (log ? logTicks(min, max) : linearTicks(min, max)).map((x) => ({ at: t(x), label: short(x) })),
    valueAt: (p) => (span === 0 ? min : log ? 10 ** (lo + p * span) : lo + p * span),
  };
}

function categoryAxis(key: string, values: Cell[], mixed: boolean): Axis {
  const set = new Set<string>();
  for (const v of values) if (v !== null && !(typeof v === 'number' && !Number.isFinite(v))) set.add(String(v));
  const categories = [...set].sort(collator.compare);
  const index = new Map(categories.map((c, i) => [c, i]));
  const n = categories.length;
  const at = (i: number) => (n === 1 ? 0.5 : i / (n - 1));
  const missing = values.filter((v) => v === null || (typeof v === 'number' && !Number.isFinite(v))).length;
  return {
    key, kind: 'category', min: 0, max: n - 1, categories, mixed, missing,
    pos: (v) => {
      if (v === null) return null;
      const i = index.get(String(v));
      return i === undefined ? null : at(i);
    },
    ticks: () => {
      const every = Math.ceil(n / MAX_LABELS);
      const out: Tick[] = [];
      for (let i = 0; i < n; i += every) out.push({ at: at(i), label: categories[i] });
      return out;
    },
    valueAt: (p) => Math.round(p * (n - 1)),
  };
}

/** About five round numbers across [min, max]. */
export function linearTicks(min: number, max: number): number[] {
  if (min === max) return [min];
  const raw = (max - min) / 5;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag;
  const out: number[] = [];
  for (let x = Math.ceil(min / step) * step; x <= max + step * 1e-9; x += step) out.push(Math.abs(x) < step * 1e-9 ? 0 : Number(x.toPrecision(12)));
  return out;
}

/** Powers of ten within [min, max] (and the ends, where fewer than two fall inside). */
export function logTicks(min: number, max: number): number[] {
  const out: number[] = [];
  for (let e = Math.ceil(Math.log10(min) - 1e-9); e <= Math.floor(Math.log10(max) + 1e-9); e++) out.push(10 ** e);
  if (out.length < 2) return [min, max];
  return out;
}

/** A number in at most about 4 significant digits: 0.001, 1e-5, 12.35, 3.2e+6. */
export function short(x: number): string {
  if (x === 0) return '0';
  const a = Math.abs(x);
  if (a >= 1e5 || a < 1e-3) {
    const [m, e] = x.toExponential(2).split('e');
    return `${String(Number(m))}e${e.replace('+', '')}`;
  }
  return String(Number(x.toPrecision(4)));
}

/** Colours of a numeric key (low: purple, high: yellow, as viridis) and of categories. */
const RAMP: Array<[number, number, number]> = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
const PALETTE = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22', '#17becf'];

export function colourOf(axis: Axis | null, v: Cell): string {
  if (!axis) return '#1f77b4';
  const p = axis.pos(v);
  if (p === null) return '#bbbbbb';
  if (axis.kind === 'category') return PALETTE[Math.round(p * (axis.categories.length - 1)) % PALETTE.length];
  const x = p * (RAMP.length - 1);
  const i = Math.min(RAMP.length - 2, Math.floor(x));
  const f = x - i;
  const [a, b] = [RAMP[i], RAMP[i + 1]];
  const c = a.map((ch, k) => Math.round(ch + (b[k] - ch) * f));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

/**
 * A brush on an axis: the positions it spans. Kept in the URL as values
 * (`["config.lr","n",0.001,0.01]`), so a link brushes the same runs even when other
 * runs change the axis's range; a categorical axis keeps its first and last
 * category.
 */
export interface Brush { key: string; lo: number; hi: number }

export function brushToParam(axis: Axis, b: Brush): string {
  const lo = Math.min(b.lo, b.hi), hi = Math.max(b.lo, b.hi);
  if (axis.kind === 'category') {
    const n = axis.categories.length;
    const first = axis.categories[Math.ceil(lo * (n - 1) - 1e-9)] ?? '', last = axis.categories[Math.floor(hi * (n - 1) + 1e-9)] ?? '';
    return JSON.stringify([b.key, 'c', first, last]);
  }
  return JSON.stringify([b.key, 'n', axis.valueAt(lo), axis.valueAt(hi)]);
}

/** A brush of the URL on an axis as positions; null when the axis cannot hold it. */
export function brushFromParam(axis: Axis, text: string): Brush | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return null;
  }
  if (!Array.isArray(parsed) || parsed.length !== 4) return null;
  const [key, kind, a, b] = parsed as [string, string, string | number, string | number];
  if (key !== axis.key) return null;
  if (kind === 'c' && axis.kind === 'category') {
    const lo = axis.pos(a), hi = axis.pos(b);
    return lo === null || hi === null ? null : { key, lo, hi };
  }
  if (kind === 'n' && axis.kind !== 'category') {
    const lo = axis.pos(Number(a)), hi = axis.pos(Number(b));
    // Values outside the range the axis has now: clamp.
    const clamp = (v: number, p: number | null) => (p !== null ? p : v < axis.min ? 0 : 1);
    return { key, lo: clamp(Number(a), lo), hi: clamp(Number(b), hi) };
  }
  return null;
}

/** Whether a value is within a brush (a run without the key never is). */
export function inBrush(axis: Axis, b: Brush, v: Cell): boolean {
  const p = axis.pos(v);
  if (p === null) return false;
  const lo = Math.min(b.lo, b.hi), hi = Math.max(b.lo, b.hi);
  return p >= lo - 1e-9 && p <= hi + 1e-9;
}
