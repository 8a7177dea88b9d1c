// `/compare?runs=a,b&groups=g1,g2`: 2 to 20 runs or groups (jobs) side by
// side. The config and summary keys that differ first (the ones they share
// behind a toggle), then one chart per metric any of them logged: a run as its
// line, a group as the mean of its ranks with their min–max band. The legend
// tells items apart where names repeat (name · group · short id). `by=KEY`
// draws the runs that share a config key's value as one line (their mean and
// band, /api/aggregate); `colour=KEY` colours each line by its value.
import { h, clear, link, stateBadge, fmt, append } from '../dom.js';
import { api, type Run, type ChartSeries } from '../api.js';
import { LazyChart, type Line } from '../chart.js';
import { chartControls, byPrefix } from '../controls.js';
import { labels, flatten, groupConfig, groupSummary, diffRows, type Compared } from './diff.js';
import { makeAxis, colourOf, type Cell } from '../explore/axes.js';
import { saveViewControl } from '../saved-views.js';

/** A colour as #rrggbb: the chart adds alpha digits to it for bands and raw lines. */
function hex(c: string): string {
  const m = /^rgb\((\d+),(\d+),(\d+)\)$/.exec(c);
  return m ? '#' + m.slice(1).map((x) => Number(x).toString(16).padStart(2, '0')).join('') : c;
}

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
  const lineControls = h('span', { class: 'controls', id: 'line-controls' });
  const what = [ids.length ? `${ids.length} run${ids.length === 1 ? '' : 's'}` : '', groups.length ? `${groups.length} group${groups.length === 1 ? '' : 's'}` : ''].filter(Boolean).join(' and ');
  clear(root);
  append(root, h('p', {}, link([], '← all runs')), h('header', {}, h('h1', {}, `Comparing ${what || 'nothing'}`), saveViewControl()), head, diff, h('div', { class: 'filters' }, controls, lineControls), list);
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
    drawControls(items);
    drawCharts(items, names);
  }

  /** "Group lines by" and "colour by": a config key (or tags) of the compared runs; in the URL as `by=` and `colour=`. */
  function drawControls(items: Item[]): void {
    const keys = [...new Set(items.flatMap((it) => Object.keys(it.config)))].sort().map((k) => `config.${k}`);
    const choice = (id: string, label: string, param: string, title: string) => {
      const current = p.get(param) ?? '';
      const s = h('select', { id, title }, h('option', { value: '' }, 'none'), h('option', { value: 'tags', selected: current === 'tags' }, 'tags'),
        ...keys.map((k) => h('option', { value: k, selected: k === current }, k)));
      s.addEventListener('change', () => {
        if (s.value) p.set(param, s.value);
        else p.delete(param);
        history.replaceState(null, '', `${location.pathname}?${p}`);
        drawCharts(items, labels(items));
      });
      return h('label', {}, `${label} `, s);
    };
    lineControls.replaceChildren(
      choice('group-by', 'group lines by', 'by', 'runs with the same value of this key become one line: their mean with its min–max band'),
      choice('colour-by', 'colour by', 'colour', 'each line coloured by its value of this key'));
  }

  /** One chart per metric; the runs grouped by `by` are one line each value. */
  function drawCharts(items: Item[], names: string[]): void {
    for (const c of charts.splice(0)) c.destroy();
    clear(list);
    const by = p.get('by') ?? '', colourKey = p.get('colour') ?? '';
    const valueOf = (it: Item, key: string): Cell => {
      if (key === 'tags') return it.kind === 'run' ? (it.members[0]?.tags ?? []).join(', ') || null : null;
      const v = it.config[key.replace(/^config\./, '')];
      return v === undefined || v === null || (typeof v === 'object' && (v as { mixed?: boolean }).mixed) ? null : typeof v === 'number' ? v : typeof v === 'string' ? v : JSON.stringify(v);
    };
    // What each line is: an item, or the runs sharing a value of `by`.
    type Drawn = { label: string; colourValue: Cell; start: number; read: (k: string, points: number) => Promise<{ data: ChartSeries; band: boolean } | null> };
    const drawn: Drawn[] = [];
    const partitions = new Map<string, Item[]>();
    items.forEach((it, i) => {
      if (by && it.kind === 'run') {
        const v = valueOf(it, by);
        const key = v === null ? '(none)' : String(v);
        (partitions.get(key) ?? partitions.set(key, []).get(key)!).push(it);
        return;
      }
      drawn.push({
        label: names[i], colourValue: colourKey ? valueOf(it, colourKey) : null, start: it.start,
        read: async (k, points) => {
          if (it.kind === 'run') {
            const s = (await api.history(it.id, [k], points)).series[k];
            return s ? { data: s, band: false } : null;
          }
          const s = (await api.groupSeries(it.id, [k], points, undefined, true)).series[k]?.aggregate;
          return s && s.step.length ? { data: s, band: true } : null;
        },
      });
    });
    for (const [value, runs] of [...partitions].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
      drawn.push({
        label: `${by} = ${value} (${runs.length} run${runs.length === 1 ? '' : 's'})`,
        colourValue: colourKey === by ? (valueOf(runs[0], by)) : colourKey ? valueOf(runs[0], colourKey) : null,
        start: Math.min(...runs.map((r) => r.start)),
        read: async (k, points) => {
          const s = (await api.aggregate(runs.map((r) => r.id), [k], points)).series[k];
          return s && s.step.length ? { data: s, band: runs.length > 1 } : null;
        },
      });
    }
    const colourAxis = colourKey ? makeAxis(colourKey, drawn.map((d) => d.colourValue)) : null;
    list.dataset.lines = String(drawn.length);
    const keys = [...new Set(items.flatMap((it) => it.keys))].sort();
    for (const [prefix, ks] of byPrefix(keys)) {
      const grid = h('div', { class: 'grid' });
      list.append(h('details', { open: true, class: 'section' }, h('summary', {}, prefix || 'metrics'), grid));
      for (const k of ks) {
        const c = new LazyChart(k, async (points) => {
          const got = await Promise.all(drawn.map((d) => d.read(k, points)));
          return drawn.map((d, i): Line | null => (got[i] ? { label: d.label, data: got[i]!.data, band: got[i]!.band, start: d.start, ...(colourAxis ? { color: hex(colourOf(colourAxis, d.colourValue)) } : {}) } : null))
            .filter((l): l is Line => l !== null);
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
