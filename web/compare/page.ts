// `/compare?runs=a,b&groups=g1,g2`: 2 to 20 runs or groups (jobs) side by
// side. The config and summary keys that differ first (the ones they share
// behind a toggle), then one chart per metric any of them logged: a run as its
// line, a group as the mean of its ranks with their min–max band. The legend
// tells items apart where names repeat (name · group · short id).
import { h, clear, link, stateBadge, fmt, append } from '../dom.js';
import { api, type Run, type ChartSeries } from '../api.js';
import { LazyChart, type Line } from '../chart.js';
import { chartControls, byPrefix } from '../controls.js';
import { labels, flatten, groupConfig, groupSummary, diffRows, type Compared } from './diff.js';

/** At most this many items compared at once. */
const MAX_ITEMS = 20;

interface Item extends Compared {
  state: string;
  start: number;
  /** A group's runs; a run's own. */
  members: Run[];
  keys: string[];
}

export function comparePage(root: HTMLElement): () => void {
  const p = new URLSearchParams(location.search);
  const ids = (p.get('runs') ?? '').split(',').filter(Boolean);
  const groups = (p.get('groups') ?? '').split(',').filter(Boolean);
  const asked = ids.length + groups.length;
  const charts: LazyChart[] = [];
  const { el: controls, options } = chartControls(() => charts.forEach((c) => c.redraw()));
  const head = h('div', { id: 'compare-runs' });
  const diff = h('div', { id: 'compare-diff' });
  const list = h('div', { id: 'charts' });
  const what = [ids.length ? `${ids.length} run${ids.length === 1 ? '' : 's'}` : '', groups.length ? `${groups.length} group${groups.length === 1 ? '' : 's'}` : ''].filter(Boolean).join(' and ');
  clear(root);
  append(root, h('p', {}, link([], '← all runs')), h('header', {}, h('h1', {}, `Comparing ${what || 'nothing'}`)), head, diff, h('div', { class: 'filters' }, controls), list);
  if (asked === 0) {
    list.append(h('p', { class: 'muted' }, 'nothing chosen: select runs or groups in the runs list and press "Compare selected"'));
    return () => {};
  }
  if (asked > MAX_ITEMS) head.append(h('p', { class: 'muted' }, `${asked} chosen: the first ${MAX_ITEMS} are compared`));

  void load().catch((e: Error) => list.append(h('p', { class: 'error' }, e.message)));
  return () => charts.forEach((c) => c.destroy());

  async function load(): Promise<void> {
    const runItems = ids.slice(0, MAX_ITEMS).map(async (id): Promise<Item> => {
      const r = await api.run(id);
      const keys = (await api.keys(id, '', 0, 5000)).keys;
      return { kind: 'run', id: r.id, name: r.name, group: r.group, config: flatten(r.config), summary: flatten(r.summary), state: r.state, start: Date.parse(r.createdAt) / 1000, members: [r], keys };
    });
    const groupItems = groups.slice(0, Math.max(0, MAX_ITEMS - ids.length)).map(async (g): Promise<Item> => {
      const a = await api.group(g);
      const states = new Map<string, number>();
      for (const r of a.runs) states.set(r.state, (states.get(r.state) ?? 0) + 1);
      return {
        kind: 'group', id: g, name: g, group: g, runs: a.runs.length, members: a.runs, keys: a.keys,
        config: groupConfig(a.runs.map((r) => flatten(r.config))), summary: groupSummary(a.runs.map((r) => flatten(r.summary))),
        state: states.size === 1 ? [...states.keys()][0] : [...states].map(([s, n]) => `${s} ×${n}`).join(', '),
        start: Math.min(...a.runs.map((r) => Date.parse(r.createdAt) / 1000)),
      };
    });
    const items = await Promise.all([...runItems, ...groupItems]);
    const names = labels(items);
    head.append(h('table', { class: 'runs', id: 'compare-items' },
      h('thead', {}, h('tr', {}, h('th', {}, 'legend'), h('th', {}, 'what'), h('th', {}, 'state'), h('th', {}, 'id'))),
      h('tbody', {}, ...items.map((it, i) => h('tr', { 'data-item': `${it.kind}:${it.id}`, ...(it.kind === 'run' ? { 'data-run-id': it.id } : { 'data-group': it.id }) },
        h('td', { class: 'legend-label' }, names[i]),
        h('td', {}, it.kind === 'run' ? link(['runs', it.id], it.name || it.id) : h('span', {}, link(['groups', it.id], it.id), h('span', { class: 'muted' }, ` ${it.runs} runs, mean ± range`))),
        h('td', {}, it.kind === 'run' ? stateBadge(it.state) : h('span', { class: 'muted' }, it.state)),
        h('td', { class: 'muted mono' }, it.kind === 'run' ? it.id : ''))))));
    drawDiff(items, names);
    const keys = [...new Set(items.flatMap((it) => it.keys))].sort();
    for (const [prefix, ks] of byPrefix(keys)) {
      const grid = h('div', { class: 'grid' });
      list.append(h('details', { open: true, class: 'section' }, h('summary', {}, prefix || 'metrics'), grid));
      for (const k of ks) {
        const c = new LazyChart(k, async (points) => {
          const got = await Promise.all(items.map(async (it): Promise<{ data: ChartSeries; band: boolean } | null> => {
            if (it.kind === 'run') {
              const s = (await api.history(it.id, [k], points)).series[k];
              return s ? { data: s, band: false } : null;
            }
            const s = (await api.group(it.id, [k], points, undefined, true)).series[k]?.aggregate;
            return s && s.step.length ? { data: s, band: true } : null;
          }));
          return items.map((it, i): Line | null => (got[i] ? { label: names[i], data: got[i]!.data, band: got[i]!.band, start: it.start } : null)).filter((l): l is Line => l !== null);
        }, options, { 'data-key': k });
        charts.push(c);
        grid.append(c.el);
      }
    }
  }

  function drawDiff(items: Item[], names: string[]): void {
    const rows = diffRows(items);
    const differ = rows.filter((r) => !r.same);
    const same = rows.length - differ.length;
    const showSame = h('input', { type: 'checkbox', id: 'show-same', checked: p.get('same') === '1' });
    const table = h('table', { class: 'runs diff-table', id: 'diff-table' });
    const render = () => {
      const shown = showSame.checked ? rows : differ;
      clear(table);
      table.append(
        h('thead', {}, h('tr', {}, h('th', {}, 'key'), ...names.map((n) => h('th', {}, n)))),
        h('tbody', {}, ...shown.map((r) => h('tr', { class: r.same ? 'same' : 'differs', 'data-key': r.key },
          h('th', { class: 'mono' }, r.key),
          ...r.values.map((v) => h('td', { class: v === undefined ? 'muted' : typeof v === 'number' ? 'num' : '' }, cellText(v)))))));
      const u = new URLSearchParams(location.search);
      if (showSame.checked) u.set('same', '1');
      else u.delete('same');
      history.replaceState(null, '', `${location.pathname}?${u}`);
    };
    showSame.addEventListener('change', render);
    append(diff,
      h('h2', {}, differ.length ? `${differ.length} config and summary keys differ` : 'No config or summary key differs'),
      same ? h('label', {}, showSame, ` show the ${same} that are the same too`) : null,
      table);
    render();
  }
}

function cellText(v: unknown): string {
  if (v === undefined) return '—';
  if (v && typeof v === 'object' && (v as { mixed?: boolean }).mixed) return (v as { text: string }).text;
  return fmt(v);
}
