// `/groups/{group}`: the group's runs (rank, name, node, state), then per
// metric the mean across ranks with its min–max band where ranks overlap (the
// default), or every rank's line (one click: "every rank", ?mode=ranks); then
// the system charts of every node in the group. Above the charts, the health
// strip (health.ts): each rank's progress and the group's events, polled every
// 2 s while a rank runs (a stall brings no rows, so the feed cannot tell).
// Live while any rank runs. The Logs tab (?tab=logs) shows every rank's
// console output merged by time instead of the charts.
import { shownRows, RANK_ROWS } from './many-ranks.js';
import { h, clear, link, stateBadge, debounce } from './dom.js';
import { api, live, ApiError, type Run } from './api.js';
import { LazyChart, type Line } from './chart.js';
import { chartControls, byPrefix } from './controls.js';
import { systemCharts, nodeOf } from './system.js';
import { HealthStrip } from './health.js';
import { logsView } from './logs.js';
import { alertsSection } from './alerts.js';

const HEALTH_POLL_MS = 2000;

export const rankLabel = (r: Run) => (r.rank !== null ? `rank ${r.rank}` : r.name || r.id);

type Mode = 'band' | 'ranks';
const startOf = (r: Run) => Date.parse(r.createdAt) / 1000;

/** Two or more runs whose steps of this metric overlap: a band says more than N lines. */
export function ranksOverlap(series: Array<{ step: number[] }>): boolean {
  const spans = series.filter((s) => s.step.length > 0).map((s) => [Math.min(...s.step), Math.max(...s.step)] as const).sort((a, b) => a[0] - b[0]);
  for (let i = 1; i < spans.length; i++) if (spans[i][0] <= spans[i - 1][1]) return true;
  return false;
}

export function groupPage(root: HTMLElement, group: string): () => void {
  const p = new URLSearchParams(location.search);
  const tab = p.get('tab') === 'logs' ? 'logs' : 'charts';
  const charts: LazyChart[] = [];
  const closers: Array<() => void> = [];
  let mode: Mode = p.get('mode') === 'ranks' ? 'ranks' : 'band';
  /** Which launch of the group (?job=N, 1 = the oldest, or all); the latest when absent. */
  const job = p.get('job') ?? undefined;
  const bandBtn = h('button', { id: 'mode-band', class: 'seg', title: 'the mean across ranks with its min–max band, where ranks log the same steps' }, 'mean ± min/max');
  const ranksBtn = h('button', { id: 'mode-ranks', class: 'seg', title: "one line per rank" }, 'every rank');
  const showMode = () => {
    bandBtn.setAttribute('aria-pressed', String(mode === 'band'));
    ranksBtn.setAttribute('aria-pressed', String(mode === 'ranks'));
  };
  showMode();
  const { el: controls, options } = chartControls(() => charts.forEach((c) => c.redraw()));
  const runsEl = h('div', { id: 'group-runs' });
  const list = h('div', { id: 'charts' });
  const sys = h('div', { id: 'group-system' });
  const health = new HealthStrip();
  const tabs = h('nav', { class: 'tabs' }, ...(['charts', 'logs'] as const).map((t) =>
    h('a', { href: `/groups/${encodeURIComponent(group)}${t === 'charts' ? '' : `?tab=${t}`}`, class: t === tab ? 'active' : '', id: `tab-${t}` }, t[0].toUpperCase() + t.slice(1))));
  const logsEl = h('div', { id: 'tab-body' });
  clear(root);
  root.append(h('p', {}, link([], '← all runs')), h('header', {}, h('h1', {}, 'Group ', h('span', { id: 'group-name' }, group))), runsEl, health.el, alertsSection({ group }), tabs,
    ...(tab === 'logs' ? [logsEl] : [h('div', { class: 'filters' }, h('span', { class: 'segmented', id: 'group-mode' }, bandBtn, ranksBtn), controls), list, sys]));
  const setMode = (m: Mode) => {
    if (m === mode) return;
    mode = m;
    showMode();
    const u = new URLSearchParams(location.search);
    u.delete('mode');
    if (m === 'ranks') u.set('mode', 'ranks');
    history.replaceState(null, '', location.pathname + (u.toString() ? `?${u}` : ''));
    charts.forEach((c) => c.refresh());
  };
  bandBtn.addEventListener('click', () => setMode('band'));
  let healthTimer: ReturnType<typeof setTimeout> | null = null;
  let healthBusy = false, stopped = false;
  const pollHealth = () => {
    if (healthBusy || healthTimer !== null || stopped) return;
    healthBusy = true;
    const again = (ms: number) => {
      healthBusy = false;
      if (!stopped && ms > 0) healthTimer = setTimeout(() => ((healthTimer = null), pollHealth()), ms);
    };
    void api.groupHealth(group, job).then((gh) => {
      if (stopped) return;
      health.update(gh);
      again(gh.ranks.some((r) => r.runState === 'running') ? HEALTH_POLL_MS : 0);
    }, (e: Error) => again(e instanceof ApiError && e.status === 404 ? 0 : HEALTH_POLL_MS * 2));
  };
  pollHealth();
  closers.push(() => {
    stopped = true;
    if (healthTimer) clearTimeout(healthTimer);
  });
  ranksBtn.addEventListener('click', () => setMode('ranks'));

  void api.group(group, [], 0, job).then((g) => {
    document.title = `group ${group} · logd`;
    if (g.job && g.job.of > 1) {
      // Each launch under this group name is a job of its own: the latest is shown, the earlier ones a click away.
      const href = (k: string) => `/groups/${encodeURIComponent(group)}?job=${k}`;
      runsEl.append(h('p', { id: 'group-jobs', 'data-job': String(g.job.n), 'data-jobs': String(g.job.of) },
        g.job.n === 0 ? `all ${g.job.of} jobs of this group · ` : `job ${g.job.n} of ${g.job.of}${g.job.n === g.job.of ? ' (the latest)' : ''} · `,
        ...g.job.jobs.flatMap((j) => [j.n === g.job!.n ? h('b', {}, `job ${j.n}`) : h('a', { href: href(String(j.n)), class: 'job-link' }, `job ${j.n}`),
          ` (${new Date(j.startedAt * 1000).toISOString().slice(0, 16).replace('T', ' ')}, ${j.runs} run${j.runs === 1 ? '' : 's'}) `]),
        g.job.n === 0 ? '' : h('a', { href: href('all'), class: 'job-link' }, 'all')));
    }
    const states = new Map<string, HTMLElement>();
    // Hundreds of ranks: a page of rows (ranks that crashed or were killed first) until "show all".
    const body = h('tbody');
    const fill = (all: boolean) => {
      clear(body);
      body.append(...shownRows(g.runs, RANK_ROWS, all, (r) => r.state === 'crashed' || r.state === 'killed').map((r) => {
        const cell = h('td', { class: 'state-cell' }, stateBadge(r.state));
        states.set(r.id, cell);
        return h('tr', { class: 'run', 'data-run-id': r.id }, h('td', {}, link(['runs', r.id], rankLabel(r))), h('td', {}, r.name),
          h('td', { class: 'node-cell' }, nodeOf(r)), cell, h('td', { class: 'num' }, r.historyRows));
      }));
    };
    fill(false);
    runsEl.append(h('table', { class: 'runs' },
      h('thead', {}, h('tr', {}, h('th', {}, 'rank'), h('th', {}, 'name'), h('th', {}, 'node'), h('th', {}, 'state'), h('th', { class: 'num' }, 'rows'))), body));
    if (g.runs.length > RANK_ROWS) {
      const all = h('button', { id: 'group-show-all' }, `show all ${g.runs.length}`);
      const note = h('p', { class: 'muted', id: 'group-more' }, `${RANK_ROWS} of ${g.runs.length} ranks shown (those that crashed or were killed first) `, all);
      all.addEventListener('click', () => (fill(true), note.remove()));
      runsEl.append(note);
    }
    if (g.total > g.runs.length) runsEl.append(h('p', { class: 'muted' }, `showing ${g.runs.length} of ${g.total} runs`));
    if (tab === 'logs') {
      closers.push(logsView(logsEl, { group, names: new Map(g.runs.map((r) => [r.id, rankLabel(r)])) }));
      return;
    }
    const byId = new Map(g.runs.map((r) => [r.id, r]));
    const groupStart = Math.min(...g.runs.map(startOf));
    for (const [prefix, keys] of byPrefix(g.keys)) {
      const grid = h('div', { class: 'grid' });
      list.append(h('details', { open: true, class: 'section', 'data-prefix': prefix }, h('summary', {}, prefix || 'metrics'), grid));
      for (const k of keys) {
        const c = new LazyChart(k, async (points) => {
          if (mode === 'band' && g.runs.length > RANK_ROWS) {
            // Hundreds of ranks: only the mean and band travel, not every rank's line.
            const agg = (await api.groupSeries(group, [k], points, job, true)).series[k]?.aggregate;
            c.el.dataset.mode = 'band';
            return agg && agg.step.length ? [{ label: `mean of ${g.runs.length}`, data: agg, band: true, start: groupStart }] : [];
          }
          const res = await api.groupSeries(group, [k], points, job);
          const s = res.series[k];
          if (!s) return [];
          const per = g.runs.filter((r) => s.runs[r.id]);
          const band = mode === 'band' && ranksOverlap(per.map((r) => s.runs[r.id]));
          c.el.dataset.mode = band ? 'band' : 'ranks';
          if (band) return [{ label: `mean of ${per.length}`, data: s.aggregate, band: true, start: groupStart }];
          return per.map((r): Line => ({ label: rankLabel(r), data: s.runs[r.id], band: false, start: startOf(r) }));
        }, options, { 'data-key': k });
        charts.push(c);
        grid.append(c.el);
      }
    }
    if (g.keys.length === 0) list.append(h('p', { class: 'muted' }, 'no metrics logged yet'));
    // One set of system charts per node (LOGD_NODE, else the host): the lowest rank on each.
    const perNode = new Map<string, Run>();
    for (const r of g.runs) if (!perNode.has(nodeOf(r))) perNode.set(nodeOf(r), r);
    if (perNode.size > 1) sys.append(h('p', { class: 'muted', id: 'node-count' }, `${perNode.size} nodes: the system of each, as seen by its lowest rank`));
    closers.push(systemCharts(sys, [...perNode.values()]));
    const refresh = debounce(300, () => charts.forEach((c) => c.refresh()));
    // A rank that joins later, or a metric first logged now, redraws the page
    // (rare: a group's shape settles in its first seconds).
    const known = new Set(g.keys);
    const reshape = debounce(1000, () => void api.group(group, [], 0, job).then((now) => {
      if (now.total !== g.total || now.keys.some((k) => !known.has(k))) {
        stop();
        groupPage(root, group);
      }
    }, () => {}));
    const poll = setInterval(reshape, 5000);
    closers.push(() => clearInterval(poll));
    closers.push(live(new URLSearchParams(g.runs.map((r) => ['runs', `${r.id}:${r.historyRows}`])), {
      rows: (e) => {
        if (e.rows.some((row) => Object.keys(row.v).some((k) => !known.has(k)))) reshape();
        refresh();
      },
      reload: refresh,
      state: (e) => {
        const cell = states.get(e.run);
        if (cell) (clear(cell), cell.append(stateBadge(e.state)));
        const r = byId.get(e.run);
        if (r) r.state = e.state;
        pollHealth(); // a rank ended: its final state (a no-op while polling)
        refresh();
      },
    }));
  }, (e: Error) => list.append(h('p', { class: 'error' }, e.message)));
  function stop(): void {
    closers.forEach((c) => c());
    closers.length = 0;
    charts.forEach((c) => c.destroy());
  }
  return stop;
}
