// `/compare?runs=a,b,c`: the selected runs overlaid, one chart per metric any
// of them logged (legend by run name); x = relative time lines up runs that
// started at different moments.
import { h, clear, link, stateBadge } from './dom.js';
import { api, type Run } from './api.js';
import { LazyChart, type Line } from './chart.js';
import { chartControls, byPrefix } from './controls.js';

export function comparePage(root: HTMLElement): () => void {
  const ids = (new URLSearchParams(location.search).get('runs') ?? '').split(',').filter(Boolean).slice(0, 64);
  const charts: LazyChart[] = [];
  const { el: controls, options } = chartControls(() => charts.forEach((c) => c.redraw()));
  const head = h('div', { id: 'compare-runs' });
  const list = h('div', { id: 'charts' });
  clear(root);
  root.append(h('p', {}, link([], '← all runs')), h('header', {}, h('h1', {}, `Comparing ${ids.length} runs`)), head, h('div', { class: 'filters' }, controls), list);
  if (ids.length === 0) {
    list.append(h('p', { class: 'muted' }, 'no runs chosen: select runs in the runs list and press "Compare selected"'));
    return () => {};
  }
  void Promise.all(ids.map((id) => api.run(id))).then(async (runs: Run[]) => {
    head.append(h('table', { class: 'runs' }, h('tbody', {}, ...runs.map((r) => h('tr', { 'data-run-id': r.id }, h('td', {}, link(['runs', r.id], r.name || r.id)), h('td', {}, r.project), h('td', {}, stateBadge(r.state)))))));
    const keySets = await Promise.all(runs.map((r) => api.keys(r.id, '', 0, 5000)));
    const keys = [...new Set(keySets.flatMap((k) => k.keys))].sort();
    for (const [prefix, ks] of byPrefix(keys)) {
      const grid = h('div', { class: 'grid' });
      list.append(h('details', { open: true, class: 'section' }, h('summary', {}, prefix || 'metrics'), grid));
      for (const k of ks) {
        const c = new LazyChart(k, async (points) => {
          const all = await Promise.all(runs.map((r) => api.history(r.id, [k], points)));
          return runs.map((r, i): Line | null => (all[i].series[k] ? { label: r.name || r.id, data: all[i].series[k], band: false, start: Date.parse(r.createdAt) / 1000 } : null)).filter((l): l is Line => l !== null);
        }, options, { 'data-key': k });
        charts.push(c);
        grid.append(c.el);
      }
    }
  }, (e: Error) => list.append(h('p', { class: 'error' }, e.message)));
  return () => charts.forEach((c) => c.destroy());
}
