// `/runs/{id}`: a run's info (config, summary, metadata), its metric charts
// grouped by prefix, its histograms, images and text (the Media tab), its
// console output (the Logs tab) and the System tab. Charts grow live while it runs. A
// run that rank health judges (metadata.health) shows its events above the
// tabs, compact, re-read every 2 s while it runs. A resumed run shows its
// attempts and marks where each took over on every chart; a rewound one can
// draw the rows it superseded; a fork links to its source (attempts.ts).
import { alertsSection } from './alerts.js';
import { h, clear, link, stateBadge, objectTable, ago, debounce, append } from './dom.js';
import { describeEnvironment, DIFF_KEY, PACKAGES_KEY } from '../src/environment.js';
import { api, live, type Run } from './api.js';
import { LazyChart, color, type Line } from './chart.js';
import { chartControls, byPrefix } from './controls.js';
import { systemCharts } from './system.js';
import { HealthEvents } from './health.js';
import { mediaTab } from './media.js';
import { logsView } from './logs.js';
import { attemptsSection, forkLine, attemptMarkers, supersededRowsOf } from './attempts.js';
import type { RunHealth } from '../src/health.js';

const KEYS_PAGE = 200;

export function runPage(root: HTMLElement, id: string): () => void {
  const tab = new URLSearchParams(location.search).get('tab') ?? 'charts';
  const charts = new Map<string, LazyChart>();
  const closers: Array<() => void> = [];
  const title = h('h1', {}, id);
  const state = h('span', { id: 'run-state' });
  const reason = h('span', { class: 'muted', id: 'run-reason' });
  const facts = h('p', { class: 'muted', id: 'run-facts' });
  const lineage = h('div', { id: 'run-lineage' });
  const body = h('div', { id: 'tab-body' });
  const healthEvents = new HealthEvents(true);
  const healthEl = h('section', { id: 'run-health', hidden: true }, h('h2', {}, 'Health events'), healthEvents.el);
  const tabs = h('nav', { class: 'tabs' }, ...['charts', 'media', 'logs', 'system', 'info'].map((t) => {
    const a = h('a', { href: `/runs/${encodeURIComponent(id)}${t === 'charts' ? '' : `?tab=${t}`}`, class: t === tab ? 'active' : '', id: `tab-${t}` }, t[0].toUpperCase() + t.slice(1));
    return a;
  }));
  clear(root);
  root.append(h('p', {}, link([], '← all runs')), h('header', {}, title, state, reason), facts, lineage, healthEl, tabs, body);

  const showState = (s: string, why: string) => {
    clear(state);
    state.append(stateBadge(s));
    reason.textContent = why ? ` (${why})` : '';
  };

  void api.run(id).then((r) => {
    clear(title);
    title.append(r.name || r.id, ' ', h('span', { class: 'muted' }, `${r.project}${r.group ? ' · ' : ''}`), r.group ? link(['groups', r.group], `group ${r.group}`) : '');
    document.title = `${r.name || r.id} · logd`;
    showState(r.state, r.stateReason);
    const m = r.metadata as { host?: string; rank?: { rank: number; worldSize: number } | null; writers?: unknown[] };
    facts.textContent = [
      m.host ? `host ${m.host}` : '',
      m.rank && m.rank.rank >= 0 ? `rank ${m.rank.rank}${m.rank.worldSize > 0 ? ` of ${m.rank.worldSize}` : ''}` : '',
      `${(m.writers ?? []).length} writer(s), ${r.writersAttached} attached`,
      `created ${ago(r.createdAt)}`,
    ].filter(Boolean).join(' · ');
    lineage.append(...[forkLine(r), attemptsSection(r)].filter((e): e is HTMLElement => e !== null));
    const showHealth = (run: Run) => {
      const hl = (run.metadata as { health?: RunHealth }).health;
      if (!hl) return;
      healthEl.hidden = false;
      healthEvents.update(hl.events ?? []);
    };
    showHealth(r);
    // Events come without rows (a stall): the run is re-read, not the feed.
    // Only a rank or a group's run is judged at all.
    const poll = setInterval(() => {
      if (r.state !== 'running' || (!r.group && r.rank === null)) return clearInterval(poll);
      void api.run(id).then((now) => ((r.state = now.state), showHealth(now)), () => {});
    }, 2000);
    closers.push(() => clearInterval(poll));
    if (tab === 'info') infoTab(body, r);
    else if (tab === 'system') closers.push(systemCharts(body, [r]));
    else if (tab === 'media') closers.push(mediaTab(body, r));
    else if (tab === 'logs') closers.push(logsView(body, { run: r.id }));
    else chartsTab(r);
    closers.push(live(new URLSearchParams([['runs', `${id}:${r.historyRows}`]]), {
      rows: (e) => {
        const seen = new Set<string>();
        for (const row of e.rows) for (const k in row.v) seen.add(k);
        onNewKeys([...seen].filter((k) => !charts.has(k)));
        refreshAll();
      },
      reload: () => refreshAll(),
      state: (e) => (showState(e.state, e.stateReason), refreshAll()),
    }));
  }, (e: Error) => body.append(h('p', { class: 'error' }, e.message)));

  const refreshAll = debounce(200, () => charts.forEach((c) => c.refresh()));
  /** Metrics that a live run starts logging get their charts (set by the charts tab). */
  let onNewKeys: (keys: string[]) => void = () => {};

  function chartsTab(r: Run): void {
    const { el: controls, options } = chartControls(() => charts.forEach((c) => c.redraw()));
    const filter = h('input', { type: 'search', id: 'metric-search', placeholder: 'search metrics' });
    const count = h('span', { class: 'muted', id: 'metric-count' });
    const list = h('div', { id: 'charts' });
    const more = h('button', { id: 'more-metrics', hidden: true }, 'more metrics');
    const markers = attemptMarkers(r);
    const superseded = supersededToggle(supersededRowsOf(r), () => charts.forEach((c) => c.refresh()));
    body.append(h('div', { class: 'filters' }, controls, superseded.el, filter, count), list, more);
    let offset = 0, text = '', total = 0, allKeys = 0;
    const sections = new Map<string, HTMLElement>();
    const empty = h('p', { class: 'muted', id: 'no-metrics' }, 'no metrics logged yet');
    const showCount = () => {
      count.textContent = text ? `${total} of ${allKeys} metrics match` : `${allKeys} metrics`;
      more.hidden = offset >= total;
      more.textContent = `${total - offset} more metrics`;
      if (allKeys === 0) list.append(empty); else empty.remove();
    };
    const addCharts = (keys: string[]) => {
      for (const [prefix, ks] of byPrefix(keys)) {
        let sec = sections.get(prefix);
        if (!sec) {
          const grid = h('div', { class: 'grid' });
          sec = h('details', { open: true, class: 'section', 'data-prefix': prefix }, h('summary', {}, prefix || 'metrics'), grid);
          sections.set(prefix, sec);
          list.append(sec);
        }
        for (const k of ks) {
          const c = new LazyChart(k, async (points) => {
            const res = await api.history(r.id, [k], points, superseded.on());
            const start = Date.parse(r.createdAt) / 1000;
            const lines: Line[] = [{ label: k, data: res.series[k] ?? { step: [], time: [], value: [], points: 0 }, band: true, start }];
            for (const s of res.superseded?.[k] ?? []) lines.push({ label: `${k} (attempt ${s.attempt}, superseded)`, data: s, superseded: true, color: color(0), start });
            return lines;
          }, options, { 'data-key': k }, () => markers);
          charts.set(k, c);
          sec.lastElementChild!.append(c.el);
        }
      }
    };
    const load = async (reset: boolean) => {
      if (reset) {
        offset = 0;
        charts.forEach((c) => c.destroy());
        charts.clear();
        sections.clear();
        clear(list);
      }
      const page = await api.keys(r.id, text, offset, KEYS_PAGE);
      offset += page.keys.length;
      total = page.total;
      allKeys = page.allKeys;
      addCharts(page.keys);
      showCount();
    };
    // New metrics of a live run: charted at once when every matching name is
    // already shown; otherwise they wait in the pages behind "more metrics".
    // Names the page never loaded (a run of 10 000 metrics) look new too, so
    // the server's count decides, asked at most once a second.
    const recount = debounce(1000, () => void (async () => {
      const now = await api.keys(r.id, text, 0, 0);
      if (now.allKeys === allKeys) return;
      const wasComplete = offset >= total;
      allKeys = now.allKeys;
      total = now.total;
      if (wasComplete) {
        const page = await api.keys(r.id, text, 0, Math.min(total, offset + KEYS_PAGE));
        const fresh = page.keys.filter((k) => !charts.has(k));
        addCharts(fresh);
        offset += fresh.length;
      }
      showCount();
    })().catch(() => {}));
    onNewKeys = (keys) => {
      if (keys.length > 0) recount();
    };
    filter.addEventListener('input', debounce(250, () => ((text = filter.value), void load(true))));
    more.addEventListener('click', () => void load(false));
    void load(true).catch((e: Error) => list.append(h('p', { class: 'error' }, e.message)));
  }

  return () => {
    closers.forEach((c) => c());
    charts.forEach((c) => c.destroy());
  };
}

/**
 * "show superseded rows": off by default, kept in the URL (?superseded=1);
 * shown only for a run a rewind superseded rows of. Turning it changes what
 * the charts ask the server for, so they load again.
 */
function supersededToggle(rows: number, onChange: () => void): { el: HTMLElement | null; on: () => boolean } {
  if (rows === 0) return { el: null, on: () => false };
  const box = h('input', { type: 'checkbox', id: 'show-superseded', checked: new URLSearchParams(location.search).get('superseded') === '1' });
  box.addEventListener('change', () => {
    const u = new URLSearchParams(location.search);
    if (box.checked) u.set('superseded', '1'); else u.delete('superseded');
    history.replaceState(null, '', location.pathname + (u.toString() ? `?${u}` : ''));
    onChange();
  });
  return {
    el: h('label', { title: 'rows of earlier attempts above the step a later attempt resumed from (resume_from), drawn faint and dashed' }, box, ` show superseded rows (${rows})`),
    on: () => box.checked,
  };
}

/** Unix seconds or an ISO time as a local date and time with how long ago; anything else as it is. */
function when(v: unknown): string {
  const ms = typeof v === 'number' && v > 1e9 && v < 1e11 ? v * 1000 : typeof v === 'string' && /^\d{4}-\d\d-\d\dT/.test(v) ? Date.parse(v) : NaN;
  if (!Number.isFinite(ms)) return v === undefined || v === null ? '' : String(v);
  const iso = new Date(ms).toISOString();
  return `${new Date(ms).toLocaleString()} (${ago(iso)})`;
}

/** Fields whose values are times (Unix seconds or ISO). */
const TIME_FIELDS = /^(created|finished|joinedAt|leftAt|startedAt|endedAt|at|lastSeen|updatedAt|attachedAt|detachedAt)$/i;

/** A writer or a rank as fields: times as times, nested objects as `key: value` pairs. */
function fields(o: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) {
    if (TIME_FIELDS.test(k)) out[k] = when(v);
    else if (k === 'rank') out[k] = rankWords(v);
    else if (k === 'environment' && v && typeof v === 'object') out[k] = describeEnvironment(v as Record<string, unknown>).map(([a, b]) => `${a}: ${b}`).join(' · ');
    else if (v && typeof v === 'object' && !Array.isArray(v)) out[k] = Object.entries(v as Record<string, unknown>).map(([a, b]) => `${a}: ${typeof b === 'object' ? JSON.stringify(b) : String(b)}`).join(', ');
    else out[k] = v;
  }
  return out;
}

/** The rank in words: `rank 2 of 4 (local rank 2, node rank 0)`. */
function rankWords(rank: unknown): string {
  if (!rank || typeof rank !== 'object') return 'none';
  const x = rank as { rank?: number; worldSize?: number; world_size?: number; localRank?: number; local_rank?: number; nodeRank?: number; node_rank?: number };
  const known = (v: number | undefined) => (typeof v === 'number' && v >= 0 ? v : undefined);
  const world = known(x.worldSize ?? x.world_size), local = known(x.localRank ?? x.local_rank), node = known(x.nodeRank ?? x.node_rank);
  const extra = [local !== undefined ? `local rank ${local}` : '', node !== undefined ? `node rank ${node}` : ''].filter(Boolean).join(', ');
  return `rank ${x.rank ?? '?'}${world !== undefined ? ` of ${world}` : ''}${extra ? ` (${extra})` : ''}`;
}

/** One of the run's own text items (its diff, its package list: src/environment.ts), read when opened. */
function ownText(runId: string, id: string, title: string, key: string): HTMLElement {
  const pre = h('pre', { class: 'own-text' });
  const box = h('details', { id }, h('summary', {}, title), pre) as HTMLDetailsElement;
  box.addEventListener('toggle', () => {
    if (!box.open || pre.dataset.loaded) return;
    pre.dataset.loaded = '1';
    pre.textContent = 'reading…';
    api.media(runId, 'text', key).then((a) => {
      pre.textContent = a.entries.map((e) => e.text ?? '').join('\n') || 'nothing was stored';
    }, (e: Error) => {
      pre.textContent = `it could not be read: ${e.message}`;
      delete pre.dataset.loaded;
    });
  });
  return box;
}

function infoTab(body: HTMLElement, r: Run): void {
  const m = r.metadata as { host?: string; pid?: number; rank?: unknown; writers?: Array<Record<string, unknown>>; environment?: Record<string, unknown> };
  const environment = m.environment;
  append(body,
    h('section', { id: 'metadata' }, h('h2', {}, 'Run'), objectTable({
      id: r.id, project: r.project, name: r.name, group: r.group, jobType: r.jobType, tags: r.tags.join(', '), notes: r.notes,
      state: r.state, reason: r.stateReason, exitCode: r.exitCode, created: when(r.createdAt), finished: r.finishedAt ? when(r.finishedAt) : '',
      rows: r.historyRows, host: m.host ?? '', pid: m.pid ?? '', rank: rankWords(m.rank), 'writers attached': r.writersAttached,
    })),
    alertsSection({ run: r.id }),
    environment ? h('section', { id: 'environment' }, h('h2', {}, 'Code and environment'), objectTable(Object.fromEntries(describeEnvironment(environment))),
      typeof (environment.git as { diffBytes?: unknown } | null)?.diffBytes === 'number' ? ownText(r.id, 'own-diff', 'The diff of its dirty work tree', DIFF_KEY) : null,
      typeof environment.packagesCount === 'number' ? ownText(r.id, 'own-packages', `The ${environment.packagesCount} packages installed`, PACKAGES_KEY) : null) : null,
    h('section', { id: 'writers' }, h('h2', {}, 'Writers'), ...(m.writers ?? []).map((w) => objectTable(fields(w)))),
    h('section', { id: 'config' }, h('h2', {}, 'Config'), objectTable(r.config)),
    h('section', { id: 'summary' }, h('h2', {}, 'Summary'), objectTable(r.summary)),
  );
}
