// The runs table's filters and sorts over every run (`/api/runs?filter=…&sort=…`):
// the runs matching the listing's own filters (project, state, tag, text),
// read whole from the source once and held (its live runs read anew, while no
// run comes or goes), then filtered and sorted by config and summary values
// here (src/run-filter.ts). A listing with no filter expression and no sort
// still pages at the source.
import type { QuerySource, RunFilter, RunInfo } from '../query/index.js';

/** Held this long, whatever happens. */
const FRESH_MS = 2000;
/**
 * After FRESH_MS a held listing is checked, not read again: while the
 * source's count and newest run stay the same (no run came or went), only its
 * live runs are read anew (their state, rows and summary change). Past this,
 * or with more live runs than LIVE_REREAD, it is read whole again.
 */
const KEEP_MS = 10 * 60_000;
const LIVE_REREAD = 256;
const LIVE = new Set(['running', 'finishing']);
const KEPT = 4;
/** "Every run" for a source (the wire carries a uint32 limit). */
const ALL = 2 ** 31 - 1;

/** A run in the API's JSON shape (api.ts runJson). */
export type RunJson = Record<string, unknown> & { id?: string; state?: string; config?: Record<string, unknown>; summary?: Record<string, unknown> };

interface Entry {
  at: number;
  readAt: number;
  total: number;
  newest: string;
  /** Ids of the runs that were live when last read. */
  live: string[];
  runs: Promise<RunJson[]>;
  /** Filtered and sorted views of `runs`, by what picked them. */
  selected: Map<string, unknown[]>;
}

export class RunIndex {
  private held = new Map<string, Entry>();

  constructor(private readonly source: QuerySource, private readonly toJson: (r: RunInfo) => RunJson) {}

  /**
   * The runs matching `base` that `select` picks (a filter, an order),
   * remembered per `how` while the listing is held: paging through a sorted
   * table is a slice.
   */
  async selected<T>(base: RunFilter, how: string, select: (runs: RunJson[]) => T[]): Promise<T[]> {
    const runs = await this.runs(base);
    const entry = this.held.get(keyOf(base));
    if (!entry || (await entry.runs) !== runs) return select(runs);
    let hit = entry.selected.get(how) as T[] | undefined;
    if (!hit) {
      hit = select(runs);
      if (entry.selected.size >= 8) entry.selected.delete(entry.selected.keys().next().value!);
      entry.selected.set(how, hit);
    }
    return hit;
  }

  /** Forgets every listing held (runs were edited or removed from this dashboard). */
  forget(): void {
    this.held.clear();
  }

  /** Every run matching `base`, newest first, in the API's JSON shape. */
  async runs(base: RunFilter): Promise<RunJson[]> {
    const key = keyOf(base);
    const hit = this.held.get(key);
    const now = Date.now();
    if (hit && now - hit.at < FRESH_MS) return hit.runs;
    if (hit && now - hit.readAt < KEEP_MS && hit.live.length <= LIVE_REREAD) {
      const kept = await this.check(base, hit).catch(() => null);
      if (kept) return kept;
    }
    const entry: Entry = { at: now, readAt: now, total: 0, newest: '', live: [], runs: Promise.resolve([]), selected: new Map() };
    entry.runs = this.source.listRuns({ ...base, limit: ALL, offset: 0 }).then((page) => {
      entry.total = page.total;
      entry.newest = page.runs[0]?.id ?? '';
      entry.live = page.runs.filter((r) => LIVE.has(r.state)).map((r) => r.id);
      return page.runs.map(this.toJson);
    });
    entry.runs.catch(() => this.held.delete(key));
    this.held.delete(key);
    this.held.set(key, entry);
    if (this.held.size > KEPT) this.held.delete(this.held.keys().next().value!);
    return entry.runs;
  }

  /** The held runs, their live ones read anew, while no run came or went; null when they did. */
  private async check(base: RunFilter, hit: Entry): Promise<RunJson[] | null> {
    const head = await this.source.listRuns({ ...base, limit: 1, offset: 0 });
    if (head.total !== hit.total || (head.runs[0]?.id ?? '') !== hit.newest) return null;
    const runs = await hit.runs;
    if (hit.live.length === 0) {
      hit.at = Date.now();
      return runs;
    }
    const fresh = await Promise.all(hit.live.map((id) => this.source.getRun(id)));
    const byId = new Map(fresh.map((r) => [r.id, this.toJson(r)]));
    const next = runs.map((r) => byId.get(r.id as string) ?? r);
    hit.live = fresh.filter((r) => LIVE.has(r.state)).map((r) => r.id);
    hit.runs = Promise.resolve(next);
    hit.selected.clear();
    hit.at = Date.now();
    return next;
  }
}

function keyOf(base: RunFilter): string {
  return JSON.stringify([base.project ?? '', base.group ?? '', base.state ?? '', base.tag ?? '', base.text ?? '']);
}

/** The config and summary keys of the runs (for choosing columns): nested config objects as dotted paths. */
export function fieldsOf(runs: RunJson[], max = 300): { config: string[]; summary: string[] } {
  const config = new Set<string>(), summary = new Set<string>();
  const walk = (o: unknown, prefix: string, into: Set<string>, depth: number) => {
    if (!o || typeof o !== 'object' || Array.isArray(o)) return;
    for (const [k, v] of Object.entries(o as Record<string, unknown>)) {
      if (into.size >= max) return;
      if (v && typeof v === 'object' && !Array.isArray(v) && depth < 2) walk(v, `${prefix}${k}.`, into, depth + 1);
      else into.add(prefix + k);
    }
  };
  for (const r of runs.slice(0, 2000)) {
    walk(r.config, '', config, 0);
    walk(r.summary, '', summary, 1);
  }
  return { config: [...config].sort(), summary: [...summary].sort() };
}
