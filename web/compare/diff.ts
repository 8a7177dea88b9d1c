// What the compare page tells apart (no DOM: tested in Node): a legend label
// per compared item that no other item shares, and the config and summary
// keys whose values differ between them. A group is compared as one item: a
// config value its runs share (or their range, or "mixed"), the mean of each
// summary number over its runs.

export interface Compared {
  kind: 'run' | 'group';
  /** A run's id, a group's name. */
  id: string;
  name: string;
  group: string;
  /** Flattened: `optimizer.lr`. */
  config: Record<string, unknown>;
  summary: Record<string, unknown>;
  /** A group's: how many runs it holds. */
  runs?: number;
}

/** A value a group's runs do not share. */
export interface Mixed { mixed: true; text: string }

/** Nested objects as dotted keys (`optim.lr`), three levels deep; arrays stay values. */
export function flatten(o: unknown, prefix = '', out: Record<string, unknown> = Object.create(null) as Record<string, unknown>, depth = 0): Record<string, unknown> {
  if (!o || typeof o !== 'object' || Array.isArray(o)) return out;
  for (const [k, v] of Object.entries(o as Record<string, unknown>)) {
    if (v && typeof v === 'object' && !Array.isArray(v) && depth < 3) flatten(v, `${prefix}${k}.`, out, depth + 1);
    else out[prefix + k] = v;
  }
  return out;
}

/** Labels that tell the items apart: the name; where names repeat, the group and a short id too. */
export function labels(items: Array<Pick<Compared, 'kind' | 'id' | 'name' | 'group'>>): string[] {
  const base = items.map((it) => (it.kind === 'group' ? `group ${it.id}` : it.name || it.id));
  const seen = new Map<string, number>();
  for (const b of base) seen.set(b, (seen.get(b) ?? 0) + 1);
  const withGroup = items.map((it, i) => (seen.get(base[i])! > 1 && it.kind === 'run' && it.group ? `${base[i]} · ${it.group}` : base[i]));
  const again = new Map<string, number>();
  for (const b of withGroup) again.set(b, (again.get(b) ?? 0) + 1);
  return items.map((it, i) => (again.get(withGroup[i])! > 1 && it.kind === 'run' ? `${withGroup[i]} · ${it.id.slice(0, 8)}` : withGroup[i]));
}

/** A group's config: per key the value every run that has it shares; else the range of numbers or "mixed". */
export function groupConfig(configs: Array<Record<string, unknown>>): Record<string, unknown> {
  const keys = new Set(configs.flatMap((c) => Object.keys(c)));
  // Without a prototype: a key named __proto__ is a key like any other.
  const out: Record<string, unknown> = Object.create(null);
  for (const k of keys) {
    const vs = configs.map((c) => c[k]).filter((v) => v !== undefined);
    const texts = new Set(vs.map((v) => JSON.stringify(v)));
    if (texts.size === 1 && vs.length === configs.length) out[k] = vs[0];
    else if (vs.length > 0 && vs.every((v) => typeof v === 'number')) {
      const ns = vs as number[];
      out[k] = { mixed: true, text: `${fmtNum(Math.min(...ns))} – ${fmtNum(Math.max(...ns))}${vs.length < configs.length ? ` (${vs.length} of ${configs.length} runs)` : ''}` } satisfies Mixed;
    } else out[k] = { mixed: true, text: `${texts.size} values${vs.length < configs.length ? ` in ${vs.length} of ${configs.length} runs` : ''}` } satisfies Mixed;
  }
  return out;
}

/** A group's summary: the mean of each number over the runs that have it; a text every run shares stays. */
export function groupSummary(summaries: Array<Record<string, unknown>>): Record<string, unknown> {
  const keys = new Set(summaries.flatMap((s) => Object.keys(s)));
  const out: Record<string, unknown> = Object.create(null);
  for (const k of keys) {
    const vs = summaries.map((s) => s[k]).filter((v) => v !== undefined && v !== null);
    const ns = vs.filter((v): v is number => typeof v === 'number' && Number.isFinite(v));
    if (ns.length > 0 && ns.length === vs.length) out[k] = ns.reduce((a, b) => a + b, 0) / ns.length;
    else if (vs.length > 0 && new Set(vs.map((v) => JSON.stringify(v))).size === 1) out[k] = vs[0];
    else if (vs.length > 0) out[k] = { mixed: true, text: `${vs.length} values` } satisfies Mixed;
  }
  return out;
}

export interface DiffRow { key: string; values: unknown[]; same: boolean }

/**
 * Every config (`config.KEY`) and summary (`summary.KEY`) key of the items,
 * each with its value per item (undefined where an item has none) and whether
 * they are all the same; differing keys first, each part in key order.
 */
export function diffRows(items: Compared[]): DiffRow[] {
  const rows: DiffRow[] = [];
  for (const part of ['config', 'summary'] as const) {
    const keys = [...new Set(items.flatMap((it) => Object.keys(it[part])))].sort();
    for (const k of keys) {
      const values = items.map((it) => (Object.prototype.hasOwnProperty.call(it[part], k) ? it[part][k] : undefined));
      const texts = new Set(values.map((v) => (v === undefined ? '\u0000none' : JSON.stringify(v))));
      rows.push({ key: `${part}.${k}`, values, same: texts.size === 1 });
    }
  }
  return [...rows.filter((r) => !r.same), ...rows.filter((r) => r.same)];
}

function fmtNum(x: number): string {
  return Number.isInteger(x) ? String(x) : String(Number(x.toPrecision(4)));
}
