// The dashboard's JSON API: what the page reads, documented in the README.
// Every answer is built from the query source (local or shared store) and the
// series cache; nothing here writes.
import type { QuerySource, RunInfo, RunPage } from '../query/index.js';
import { RunNotFound } from '../query/index.js';
import { SeriesCache, RunSeries } from './series.js';
import { GroupSeries } from './group-series.js';
import { metricSeries, acrossRuns, type ChartSeries } from './downsample.js';
import { FirstLoads } from './first-load.js';
import { RunIndex, fieldsOf, type RunJson } from './run-index.js';
import { selectRuns, type RunFields } from '../../src/run-filter.js';
import { splitJobs, pickJob } from '../../src/story/jobs.js';
import { mergeGroupHealth, type GroupHealth } from './health.js';
import { HttpError, intParam, listingParams } from './params.js';
import { runConsole, groupConsole } from './console.js';
import { runMedia, runImage } from './media.js';
import { SupersededRows } from './superseded.js';

export { HttpError };

const MAX_POINTS = 20_000;
const DEFAULT_POINTS = 1000;
/** How long a group's listing serves the calls that follow it (groupListing). */
const GROUP_LISTING_MS = 1000;
/** A group page reads at most this many runs (ranks). */
const GROUP_RUNS = 1024;

/** The JSON shape of a run (the CLI's `runs --json` shape, plus `rank`). */
export function runJson(r: RunInfo): Record<string, unknown> {
  const metadata = parse(r.metadataJson) as { rank?: { rank?: number } | null };
  return {
    id: r.id, project: r.project, name: r.name, group: r.group, jobType: r.jobType, tags: r.tags, notes: r.notes, mode: r.mode,
    state: r.state, stateReason: r.stateReason, exitCode: r.exitCode,
    createdAt: new Date(r.createdAt * 1000).toISOString(), finishedAt: r.finishedAt ? new Date(r.finishedAt * 1000).toISOString() : null,
    historyRows: Number(r.historyRows), writersAttached: r.writers,
    rank: metadata.rank && typeof metadata.rank.rank === 'number' && metadata.rank.rank >= 0 ? metadata.rank.rank : null,
    config: parse(r.configJson), summary: parse(r.summaryJson), metadata,
  };
}

function parse(text: string): Record<string, unknown> {
  try {
    return JSON.parse(text || '{}') as Record<string, unknown>;
  } catch {
    return { unreadable: text.slice(0, 200) };
  }
}

/** `keys` may repeat (metric names can hold commas): one name per parameter. */
function keysParam(q: URLSearchParams): string[] {
  return q.getAll('keys').filter((k) => k !== '');
}

export class Api {
  readonly cache: SeriesCache;
  /** Some metrics of many runs (group pages, the compare page's lines). */
  readonly groups: GroupSeries;
  /** Answers read downsampled from the source, for runs the cache does not hold. */
  readonly firstLoads: FirstLoads;
  private system = new Map<string, { at: number; series: Promise<RunSeries> }>();
  /** Groups' listings, shared for a moment (groupListing). */
  private listings = new Map<string, { at: number; page: Promise<RunPage> }>();
  /** Every run of a listing, for filters and sorts by config and summary. */
  readonly index: RunIndex;
  /** The rows a rewind superseded, read only when a page asks (`superseded=1`). */
  private readonly superseded: SupersededRows;

  constructor(readonly source: QuerySource) {
    this.cache = new SeriesCache(source);
    this.groups = new GroupSeries(source, this.cache);
    this.superseded = new SupersededRows(source);
    this.firstLoads = new FirstLoads(source);
    this.index = new RunIndex(source, (r) => runJson(r) as RunJson);
  }

  async getRun(id: string): Promise<RunInfo> {
    try {
      return await this.source.getRun(id);
    } catch (e) {
      if (e instanceof RunNotFound) throw new HttpError(404, e.message);
      throw e;
    }
  }

  /**
   * A page of runs. `filter` (an expression: `lr < 0.01; state = crashed`),
   * `sort` (a field, config.KEY or summary.KEY; `desc=1`) and `fields=1`
   * (the config and summary keys, for choosing columns) work over every run
   * matching the other filters (RunIndex); without them the source pages.
   */
  async runs(q: URLSearchParams): Promise<unknown> {
    const limit = intParam(q, 'limit', 100, 1000), offset = intParam(q, 'offset', 0, Number.MAX_SAFE_INTEGER);
    const { base, terms } = listingParams(q);
    const sort = q.get('sort') ?? '', desc = q.get('desc') === '1', fields = q.get('fields') === '1';
    if (terms.length === 0 && !sort && !fields) {
      const page = await this.source.listRuns({ ...base, limit, offset });
      return { runs: page.runs.map(runJson), total: page.total, offset, limit };
    }
    const how = JSON.stringify([q.get('filter') ?? '', sort, desc]);
    const picked = await this.index.selected(base, how, (runs) => selectRuns(runs as Array<RunJson & RunFields>, terms, sort, desc));
    return { runs: picked.slice(offset, offset + limit), total: picked.length, offset, limit, ...(fields ? { fields: fieldsOf(picked) } : {}) };
  }

  async run(id: string): Promise<unknown> {
    return runJson(await this.getRun(id));
  }

  /** A run's metric names, filtered by `q` (substring) and paged: a run may have 10 000. */
  async keys(id: string, q: URLSearchParams): Promise<unknown> {
    const r = await this.getRun(id);
    const rows = Number(r.historyRows);
    const names = this.cache.peek(id, rows, supersededOf(r))?.keys ?? (await this.firstLoads.keyNames(id, rows)) ?? (await this.cache.get(id, rows, supersededOf(r))).keys;
    const text = (q.get('q') ?? '').toLowerCase();
    const all = text ? names.filter((k) => k.toLowerCase().includes(text)) : names;
    const sorted = [...all].sort();
    const offset = intParam(q, 'offset', 0, Number.MAX_SAFE_INTEGER), limit = intParam(q, 'limit', 200, 5000); // limit=0: only the counts
    return { keys: sorted.slice(offset, offset + limit), total: sorted.length, allKeys: names.length, offset, limit };
  }

  async history(id: string, q: URLSearchParams): Promise<unknown> {
    const r = await this.getRun(id);
    const rows = Number(r.historyRows);
    const points = intParam(q, 'points', DEFAULT_POINTS, MAX_POINTS) || DEFAULT_POINTS;
    const keys = keysParam(q);
    const series: Record<string, ChartSeries> = Object.create(null); // a metric may be named __proto__
    const s = this.cache.peek(id, rows, supersededOf(r));
    let answer: { run: string; state: string; rows: number; series: Record<string, ChartSeries>; superseded?: unknown };
    if (!s) {
      // Not held (a first visit): downsampled where the data is, not read whole.
      const got = await this.firstLoads.series(id, rows, keys, points, r.state !== 'running');
      for (const [k, v] of got) series[k] = v;
      answer = { run: id, state: r.state, rows, series };
    } else {
      for (const k of keys.length ? keys : s.keys.slice(0, 100)) {
        const kid = s.keyId(k);
        if (kid !== undefined) series[k] = metricSeries(s, kid, points);
      }
      answer = { run: id, state: r.state, rows: s.rows, series };
    }
    // On request only: the rows earlier attempts logged above the step a later one resumed from.
    if (q.get('superseded') === '1') answer.superseded = await this.superseded.series(id, supersededOf(r), keys.length ? keys : Object.keys(series), points);
    return answer;
  }

  async systemOf(id: string, q: URLSearchParams): Promise<unknown> {
    const r = await this.getRun(id);
    const s = await this.systemSeries(id, r.state === 'running');
    const points = intParam(q, 'points', 300, MAX_POINTS) || 300;
    const keys = keysParam(q);
    const series: Record<string, ChartSeries> = Object.create(null);
    for (const k of keys.length ? keys : s.keys) {
      const kid = s.keyId(k);
      if (kid !== undefined) series[k] = metricSeries(s, kid, points);
    }
    const meta = parse(r.metadataJson) as { host?: string; system?: { gpus?: unknown[] } | null };
    return { run: id, host: meta.host ?? '', gpus: meta.system?.gpus ?? [], keys: s.keys, series };
  }

  /** System samples change as the run lives: re-read at most every 2 s while it runs, once after. */
  private systemSeries(id: string, running: boolean): Promise<RunSeries> {
    const hit = this.system.get(id);
    if (hit && (!running || Date.now() - hit.at < 2000)) return hit.series;
    const series = this.source.history(id, { system: true }).then((h) => {
      const s = new RunSeries();
      s.append(h);
      return s;
    }, (e: Error) => {
      this.system.delete(id);
      if (e instanceof RunNotFound) throw new HttpError(404, e.message);
      if (/system metrics are off/.test(e.message)) return new RunSeries();
      throw e;
    });
    this.system.set(id, { at: Date.now(), series });
    if (this.system.size > 32) this.system.delete(this.system.keys().next().value!);
    return series;
  }

  /** A run's histograms, images and text (media.ts). */
  async media(id: string, q: URLSearchParams): Promise<unknown> {
    return runMedia(this.source, await this.getRun(id), q);
  }

  image(id: string, sha: string, download = false): Promise<{ data: Uint8Array; type: string; attachment: string | null }> {
    return runImage(this.source, id, sha, download);
  }

  /** A run's console output as lines, filtered, from a cursor (console.ts). */
  async console(id: string, q: URLSearchParams): Promise<unknown> {
    const r = await this.getRun(id);
    return runConsole(this.source, r, runJson(r).rank as number | null, q);
  }

  /** The group's console output, every run's merged by time. */
  async groupConsole(group: string, q: URLSearchParams): Promise<unknown> {
    const page = await this.groupRuns(group, q);
    const runs = page.runs.filter((r) => r.group === group).map((info) => ({ info, rank: runJson(info).rank as number | null }))
      .sort((a, b) => (a.rank ?? 1e9) - (b.rank ?? 1e9) || a.info.id.localeCompare(b.info.id));
    return groupConsole(this.source, group, runs, q);
  }

  /**
   * The runs of one job of the group (src/story/jobs.ts): `?job=N` (1 = the oldest launch), `latest` (the default)
   * or `all`; `jobs` lists every launch of the group, so a page can offer the earlier ones.
   */
  private async groupRuns(group: string, q: URLSearchParams = new URLSearchParams()) {
    const page = await this.groupListing(group);
    if (page.total === 0) throw new HttpError(404, `group ${JSON.stringify(group.slice(0, 200))} has no runs in ${this.source.where}; the runs list at / shows every group`);
    const jobs = splitJobs(page.runs.filter((r) => r.group === group));
    let job;
    try {
      job = pickJob(jobs, q.get('job') ?? undefined);
    } catch (e) {
      throw new HttpError(400, `job: ${(e as Error).message}`);
    }
    const jobList = jobs.map((j) => ({ n: j.n, startedAt: j.startedAt, endedAt: j.endedAt, runs: j.runs.length }));
    return { runs: job.runs, total: job.n === jobs.length || job.n === 0 ? job.runs.length + (page.total - page.runs.length) : job.runs.length, job: { n: job.n, of: jobs.length, jobs: jobList } };
  }

  /**
   * The group's listing, shared by the calls that ask within GROUP_LISTING_MS of each other (a group page opens
   * its charts together, each a call; 1 024 ranks are a listing of some 10 MB to read and parse).
   */
  private groupListing(group: string): Promise<RunPage> {
    const now = Date.now();
    const held = this.listings.get(group);
    if (held && now - held.at < GROUP_LISTING_MS) return held.page;
    const page = this.source.listRuns({ group, limit: GROUP_RUNS });
    this.listings.set(group, { at: now, page });
    page.catch(() => this.listings.delete(group));
    for (const [g, l] of this.listings) if (now - l.at >= GROUP_LISTING_MS) this.listings.delete(g);
    return page;
  }

  /** The group's rank health: every rank's progress and the group's events, merged (health.ts). One listing, no history read. */
  async groupHealth(group: string, q?: URLSearchParams): Promise<GroupHealth & { group: string }> {
    const page = await this.groupRuns(group, q);
    return { group, job: page.job, ...mergeGroupHealth(page.runs) };
  }

  /**
   * Runs drawn as one line (the compare page's "group lines by"): per asked
   * key the per-step mean, min and max across the runs named in `runs`, as a
   * group's aggregate is.
   */
  async aggregate(q: URLSearchParams): Promise<unknown> {
    const ids = [...new Set((q.get('runs') ?? '').split(',').map((s) => s.trim()).filter(Boolean))];
    if (ids.length === 0) throw new HttpError(400, 'runs: name the runs to aggregate, runs=ID,ID');
    if (ids.length > AGGREGATE_RUNS) throw new HttpError(400, `at most ${AGGREGATE_RUNS} runs in one line, not ${ids.length}`);
    const infos = await Promise.all(ids.map((id) => this.getRun(id)));
    const keys = keysParam(q);
    const loaded = await this.groups.get(infos.map((r) => ({ id: r.id, historyRows: Number(r.historyRows), superseded: supersededOf(r) })), keys);
    const points = intParam(q, 'points', DEFAULT_POINTS, MAX_POINTS) || DEFAULT_POINTS;
    const series: Record<string, ChartSeries> = Object.create(null);
    for (const k of keys) series[k] = acrossRuns(loaded.map((h) => h.of(k)).filter((s) => s !== undefined), k, points);
    return { runs: ids, series };
  }

  async group(group: string, q: URLSearchParams): Promise<unknown> {
    const page = await this.groupRuns(group, q);
    // `runs=0`: a chart's call, which has the runs and names from the page's first call: the series alone, in no
    // particular order (each rank's by its run id), without each run's JSON made (its metadata parsed) to sort.
    const brief = q.get('runs') === '0';
    const byRank = brief ? page.runs.map((r) => ({ info: r, json: null })) : page.runs.map((r) => ({ info: r, json: runJson(r) }))
      .sort((a, b) => ((a.json.rank as number | null) ?? 1e9) - ((b.json.rank as number | null) ?? 1e9) || a.info.id.localeCompare(b.info.id));
    const runs = byRank.map((r) => r.json);
    // Only the asked metrics of each rank are read (group-series.ts); none asked: the metric names alone.
    const keys = keysParam(q);
    const held = await this.groups.get(byRank.map(({ info: r }) => ({ id: r.id, historyRows: Number(r.historyRows), superseded: supersededOf(r) })), keys);
    const loaded = byRank.map(({ info: r }, i) => [r.id, held[i]] as const);
    const keySet = new Set<string>();
    for (const [, h] of loaded) for (const k of h.names) keySet.add(k);
    const points = intParam(q, 'points', DEFAULT_POINTS, MAX_POINTS) || DEFAULT_POINTS;
    const series: Record<string, { aggregate: ChartSeries; runs: Record<string, ChartSeries> }> = Object.create(null);
    // `aggregate=1`: the group's mean and band only (the compare page), not every rank's line.
    const perRank = q.get('aggregate') !== '1';
    for (const k of keys) {
      const per: Record<string, ChartSeries> = {};
      const withIt: RunSeries[] = [];
      for (const [id, h] of loaded) {
        const s = h.of(k);
        if (!s) continue;
        withIt.push(s);
        if (perRank) per[id] = metricSeries(s, s.keyId(k)!, points);
      }
      series[k] = { aggregate: acrossRuns(withIt, k, points), runs: per };
    }
    if (brief) return { group, job: page.job, total: page.total, series };
    return { group, job: page.job, runs, total: page.total, keys: [...keySet].sort(), rows: Object.fromEntries(byRank.map(({ info: r }) => [r.id, Number(r.historyRows)])), series };
  }
}

/** At most this many runs in one line of runs grouped by a key (`/api/aggregate`). */
const AGGREGATE_RUNS = 256;

/** A rewound run's count of superseded rows (metadata.supersededRows; 0 for any other run): the series cache's generation. */
export function supersededOf(r: RunInfo): number {
  const m = /"supersededRows":(\d+)/.exec(r.metadataJson);
  return m ? Number(m[1]) : 0;
}
