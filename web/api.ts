// The page's only way to the server: the JSON API and the live feed. The
// token travels in a cookie the server set when the URL carried ?token=; an
// answer of 401 (the cookie is gone, or `logd ui` restarted with a new token)
// puts a field for the token at the top of the page.
import type { JobStory } from '../src/story/story.js';
import { h } from './dom.js';
import type { HealthEvent, RankProgress, StepRatePoint } from '../src/health.js';
import type { AttemptLike } from '../src/attempts.js';
export interface Run {
  id: string; project: string; name: string; group: string; jobType: string; tags: string[]; notes: string; mode: string;
  state: string; stateReason: string; exitCode: number; createdAt: string; finishedAt: string | null;
  historyRows: number; writersAttached: number; rank: number | null;
  config: Record<string, unknown>; summary: Record<string, unknown>; metadata: Record<string, unknown>;
}

export interface ChartSeries {
  step: number[]; time: number[]; value: Array<number | null>; min?: Array<number | null>; max?: Array<number | null>; points: number;
}

/** An earlier attempt's points of a metric that a later attempt's rewind (resume_from) superseded. */
export type SupersededSeries = ChartSeries & { attempt: number };

/** One attempt of a run (metadata.attempts; daemon/store/format.ts Attempt): times in Unix seconds. */
export interface Attempt {
  n: number; startedAt: number; host: string; pid: number;
  /** The first step it was to log; with resumedFromStep, that step + 1. */
  fromStep: number; resumedFromStep?: number;
  /** Absent while it runs. */
  endedAt?: number; state?: string; reason?: string; exitCode?: number;
}

/** GET /api/groups/{group}/health (daemon/ui/health.ts). */
export interface RankHealth extends RankProgress { name: string; runState: string; rate?: StepRatePoint[] }
/** `story`: the job's story when a rank failed (src/story/story.ts); absent from a server older than it. */
/** Which launch of a group a page shows, and every launch of it. */
export interface GroupJobInfo { n: number; of: number; jobs: Array<{ n: number; startedAt: number; endedAt: number; runs: number }> }
export interface GroupHealth { job?: GroupJobInfo; group: string; stalled: boolean; ranks: RankHealth[]; events: HealthEvent[]; now: number; story?: JobStory | null }

/** One histogram, image or text of a run (GET /api/runs/{id}/media; daemon/query MediaItem). */
export interface MediaItem {
  w: number; rank: number | null; key: string; step: number; t: number; kind: 'histogram' | 'image' | 'text';
  counts?: number[]; edges?: number[]; nonfinite?: number;
  sha256?: string; format?: 'png' | 'jpeg'; width?: number; height?: number; bytes?: number; caption?: string; lost?: string;
  text?: string;
  /** A continued run's: the attempt that logged it (by time, src/attempts.ts). */
  attempt?: number;
}
/** metadata.media: per key its kind, how many were stored, the last step. */
export type MediaIndex = Record<string, { kind: string; count: number; lastStep: number }>;
export interface MediaAnswer { run: string; state: string; keys: MediaIndex; kept: boolean; why?: string; entries: MediaItem[]; truncated: boolean; stride: number; total?: number; attempts?: AttemptLike[] }

/** One printed line (GET …/console); `run` on a group's answer. */
/** `attempt`: the attempt of a continued run that printed the line (src/attempts.ts); absent for a run of one. */
export interface LogLine { t: number; stream: 'out' | 'err'; rank: number | null; writer: number; line: string; run?: string; attempt?: number }
export interface ConsoleAnswer {
  kept: boolean; why?: string; lines: LogLine[]; next: string; more: boolean; skipped: number; ranks: number[];
  /** A run's answer: its state. A group's: each run's. */
  state?: string; runs?: Record<string, string>;
  /** A continued run's answer: its attempts. A group's: those of its continued runs, by run. */
  attempts?: AttemptLike[] | Record<string, AttemptLike[]>;
}
export interface ConsoleQuery { rank?: number | null; stream?: string; grep?: string; regex?: boolean; after?: string; tail?: number }

const consoleParams = (q: ConsoleQuery) => ({
  rank: q.rank ?? undefined, stream: q.stream, grep: q.grep, regex: q.regex && q.grep ? '1' : undefined, after: q.after, tail: q.tail,
});

export class ApiError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

export async function get<T>(path: string, params: Record<string, string | number | string[] | undefined> = {}): Promise<T> {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === '') continue;
    for (const x of Array.isArray(v) ? v : [v]) q.append(k, String(x));
  }
  const qs = q.toString();
  const embedded = takeEmbedded(path, q);
  if (embedded !== undefined) return embedded as T;
  return call<T>(path + (qs ? `?${qs}` : ''), { credentials: 'same-origin', headers: { accept: 'application/json' } });
}

/** One request and its JSON answer; an error that says what happened (a 401 asks for the token). */
async function call<T>(url: string, init: RequestInit): Promise<T> {
  let res: Response;
  try {
    res = await fetch(url, init);
  } catch (e) {
    throw new ApiError(0, `the dashboard server does not answer (${(e as Error).message}); is \`logd ui\` still running?`);
  }
  const body = (await res.json().catch(() => ({ error: `the server answered ${res.status} without JSON` }))) as T & { error?: string };
  if (res.status === 401) askForToken();
  if (!res.ok) throw new ApiError(res.status, body.error ?? `HTTP ${res.status}`);
  return body;
}

/** A write (POST or DELETE, saved views only), with the same errors as get(). */
export async function send<T>(method: 'POST' | 'DELETE', path: string, body?: unknown): Promise<T> {
  return call<T>(path, { method, credentials: 'same-origin', headers: { accept: 'application/json', ...(body !== undefined ? { 'content-type': 'application/json' } : {}) }, body: body !== undefined ? JSON.stringify(body) : undefined });
}

/** A form for the token that reloads this very page with it (the server keeps it and drops it from the URL). */
function askForToken(): void {
  if (document.getElementById('token-form')) return;
  const hidden = [...new URLSearchParams(location.search)].filter(([k]) => k !== 'token').map(([k, v]) => h('input', { type: 'hidden', name: k, value: v }));
  document.body.prepend(h('form', { id: 'token-form', class: 'token-banner', method: 'get', action: location.pathname },
    h('label', { for: 'token' }, 'This dashboard needs its access token (the part after ?token= in the URL `logd ui` printed): '),
    h('input', { type: 'password', id: 'token', name: 'token', autocomplete: 'off', required: true }), ...hidden,
    h('button', { type: 'submit' }, 'Go on')));
}

/** A query's identity: its non-empty parameters in order, offset 0 being no offset. */
function normalised(path: string, q: URLSearchParams): string {
  const kept = [...q].filter(([k, v]) => v !== '' && !(k === 'offset' && v === '0')).sort(([a, x], [b, y]) => (a < b ? -1 : a > b ? 1 : x < y ? -1 : x > y ? 1 : 0));
  return `${path}?${new URLSearchParams(kept)}`;
}

/**
 * An answer the server carried in the page (daemon/ui/pages.ts embeddedAnswer)
 * for this very query: used once, so later asks (a live reload) fetch anew.
 */
function takeEmbedded(path: string, q: URLSearchParams): unknown {
  for (const el of document.querySelectorAll<HTMLScriptElement>('script.logd-answer')) {
    const url = new URL(el.dataset.url ?? '', location.origin);
    if (normalised(url.pathname, url.searchParams) !== normalised(path, q)) continue;
    el.remove();
    try {
      return JSON.parse(el.textContent ?? '');
    } catch {
      return undefined;
    }
  }
  return undefined;
}

export const api = {
  runs: (p: Record<string, string | number | undefined>) => get<{ runs: Run[]; total: number; offset: number; limit: number }>('/api/runs', p),
  run: (id: string) => get<Run>(`/api/runs/${encodeURIComponent(id)}`),
  keys: (id: string, q: string, offset: number, limit: number) =>
    get<{ keys: string[]; total: number; allKeys: number }>(`/api/runs/${encodeURIComponent(id)}/keys`, { q, offset, limit }),
  /** `superseded`: also the rows a rewind superseded, per metric one series per earlier attempt. */
  history: (id: string, keys: string[], points: number, superseded = false) =>
    get<{ rows: number; state: string; series: Record<string, ChartSeries>; superseded?: Record<string, SupersededSeries[]> }>(
      `/api/runs/${encodeURIComponent(id)}/history`, { keys, points, superseded: superseded ? '1' : undefined }),
  system: (id: string, points: number) =>
    get<{ host: string; gpus: Array<Record<string, unknown>>; keys: string[]; series: Record<string, ChartSeries> }>(`/api/runs/${encodeURIComponent(id)}/system`, { points }),
  /** `job`: which launch of the group (1 = the oldest, `all`); the latest when absent (src/story/jobs.ts). */
  /** `aggregateOnly`: the mean and band per metric, not every rank's line (the compare page). */
  group: (g: string, keys: string[] = [], points = 0, job?: string, aggregateOnly = false) =>
    get<{ group: string; job?: GroupJobInfo; runs: Run[]; total: number; keys: string[]; series: Record<string, { aggregate: ChartSeries; runs: Record<string, ChartSeries> }> }>(
      `/api/groups/${encodeURIComponent(g)}`, { keys, points: points || undefined, job, aggregate: aggregateOnly ? '1' : undefined }),
  /** A chart's call: the asked metrics' series alone (`runs=0`: no runs list, which a group of 1 024 ranks makes some 10 MB). */
  groupSeries: (g: string, keys: string[], points = 0, job?: string, aggregateOnly = false) =>
    get<{ group: string; job?: GroupJobInfo; total: number; series: Record<string, { aggregate: ChartSeries; runs: Record<string, ChartSeries> }> }>(
      `/api/groups/${encodeURIComponent(g)}`, { keys, points: points || undefined, job, aggregate: aggregateOnly ? '1' : undefined, runs: '0' }),
  /** Runs as one line: per key the per-step mean, min and max across them. */
  aggregate: (ids: string[], keys: string[], points: number) => get<{ runs: string[]; series: Record<string, ChartSeries> }>('/api/aggregate', { runs: ids.join(','), keys, points }),
  groupHealth: (g: string, job?: string) => get<GroupHealth>(`/api/groups/${encodeURIComponent(g)}/health`, { job }),
  media: (id: string, kind: string, key: string) => get<MediaAnswer>(`/api/runs/${encodeURIComponent(id)}/media`, { kind, key }),
  imageUrl: (id: string, sha256: string) => `/api/runs/${encodeURIComponent(id)}/images/${encodeURIComponent(sha256)}`,
  console: (id: string, q: ConsoleQuery) => get<ConsoleAnswer>(`/api/runs/${encodeURIComponent(id)}/console`, consoleParams(q)),
  groupConsole: (g: string, q: ConsoleQuery) => get<ConsoleAnswer>(`/api/groups/${encodeURIComponent(g)}/console`, consoleParams(q)),
};

export interface LiveHandlers {
  rows?: (e: { run: string; first: number; rows: Array<{ s: number; t: number; v: Record<string, number | null> }> }) => void;
  state?: (e: { run: string; state: string; stateReason: string; historyRows: number; info?: Run }) => void;
  runs?: (e: { total: number }) => void;
  reload?: (e: { run: string }) => void;
}

/** The live feed; EventSource reconnects by itself. Returns a closer. */
export function live(params: URLSearchParams, on: LiveHandlers): () => void {
  const es = new EventSource(`/api/live?${params}`);
  for (const [name, f] of Object.entries(on)) {
    es.addEventListener(name, (ev) => (f as (x: unknown) => void)(JSON.parse((ev as MessageEvent).data)));
  }
  return () => es.close();
}
