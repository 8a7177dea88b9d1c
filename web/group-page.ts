// `/groups/{group}`: every rank's run overlaid per metric (legend by rank), or
// the mean across ranks with its min–max band; then the system charts of each
// node in the group. Live while any rank runs.
import { h, clear, link, stateBadge, debounce } from './dom.js';
import { api, live, type Run } from './api.js';
import { LazyChart, type Line } from './chart.js';
import { chartControls, byPrefix } from './controls.js';
import { systemCharts } from './system.js';

export const rankLabel = (r: Run) => (r.rank !== null ? `rank ${r.rank}` : r.name || r.id);

export function groupPage(root: HTMLElement, group: string): () => void {
  const p = new URLSearchParams(location.search);
  const charts: LazyChart[] = [];
  const closers: Array<() => void> = [];
  const mode = h('select', { id: 'group-mode' }, h('option', { value: 'ranks', selected: p.get('mode') !== 'mean' }, 'every rank'), h('option', { value: 'mean', selected: p.get('mode') === 'mean' }, 'mean, min–max band'));
  const { el: controls, options } = chartControls(() => charts.forEach((c) => c.redraw()));
  const runsEl = h('div', { id: 'group-runs' });
  const list = h('div', { id: 'charts' });
  const sys = h('div', { id: 'group-system' });
  clear(root);
  root.append(h('p', {}, link([], '← all runs')), h('header', {}, h('h1', {}, 'Group ', h('span', { id: 'group-name' }, group))), runsEl,
    h('div', { class: 'filters' }, mode, controls), list, sys);
  mode.addEventListener('change', () => {
    const u = new URLSearchParams(location.search);
    if (mode.value === 'mean') u.set('mode', 'mean'); else u.delete('mode');
    history.replaceState(null, '', location.pathname + (u.toString() ? `?${u}` : ''));
    charts.forEach((c) => c.refresh());
  });

  void api.group(group).then((g) => {
    document.title = `group ${group} · logd`;
    const states = new Map<string, HTMLElement>();
    runsEl.append(h('table', { class: 'runs' }, h('tbody', {}, ...g.runs.map((r) => {
      const cell = h('td', { class: 'state-cell' }, stateBadge(r.state));
      states.set(r.id, cell);
      return h('tr', { class: 'run', 'data-run-id': r.id }, h('td', {}, link(['runs', r.id], rankLabel(r))), h('td', {}, r.name), cell, h('td', { class: 'num' }, r.historyRows));
    }))));
    if (g.total > g.runs.length) runsEl.append(h('p', { class: 'muted' }, `showing ${g.runs.length} of ${g.total} runs`));
    const byId = new Map(g.runs.map((r) => [r.id, r]));
    for (const [prefix, keys] of byPrefix(g.keys)) {
      const grid = h('div', { class: 'grid' });
      list.append(h('details', { open: true, class: 'section', 'data-prefix': prefix }, h('summary', {}, prefix || 'metrics'), grid));
      for (const k of keys) {
        const c = new LazyChart(k, async (points) => {
          const res = await api.group(group, [k], points);
          const s = res.series[k];
          if (!s) return [];
          if (mode.value === 'mean') return [{ label: `mean of ${Object.keys(s.runs).length}`, data: s.aggregate, band: true }];
          return g.runs.filter((r) => s.runs[r.id]).map((r): Line => ({ label: rankLabel(r), data: s.runs[r.id], band: false }));
        }, options, { 'data-key': k });
        charts.push(c);
        grid.append(c.el);
      }
    }
    if (g.keys.length === 0) list.append(h('p', { class: 'muted' }, 'no metrics logged yet'));
    // One set of system charts per node: the lowest rank on each host.
    const perHost = new Map<string, Run>();
    for (const r of g.runs) {
      const host = String((r.metadata as { host?: string }).host ?? '');
      if (!perHost.has(host)) perHost.set(host, r);
    }
    closers.push(systemCharts(sys, [...perHost.values()]));
    const refresh = debounce(300, () => charts.forEach((c) => c.refresh()));
    // A rank that joins later, or a metric first logged now, redraws the page
    // (rare: a group's shape settles in its first seconds).
    const known = new Set(g.keys);
    const reshape = debounce(1000, () => void api.group(group).then((now) => {
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
