// `/explore`: which settings won. The runs the runs table showed (its filters
// and expression travel in the URL) or the ones selected there (`runs=`), as
// parallel coordinates over chosen config and summary keys and as a scatter
// of one key against another; brushing the axes narrows the table under them
// to the runs inside every brush. Every choice lives in the URL:
//   /explore?filter=…&axes=config.lr,config.batch,summary.loss&colour=summary.loss&x=config.lr&y=summary.loss&brush=[…]
import { h, clear, link, stateBadge, append } from '../dom.js';
import { get } from '../api.js';
import { makeAxis, brushFromParam, brushToParam, inBrush, short, type Axis, type Brush, type Cell } from './axes.js';
import { parallelCoordinates } from './parallel.js';
import { scatter } from './scatter.js';
import { saveViewControl } from '../saved-views.js';

interface ExploreAnswer {
  total: number;
  runs: Array<{ id: string; name: string; group: string; state: string; rank: number | null }>;
  values: Record<string, Cell[]>;
  fields: { config: string[]; summary: string[] };
}

/** The listing's filters, as the runs table puts them in its URL. */
const FILTERS = ['project', 'state', 'tag', 'text', 'filter', 'runs'];
const TABLE_ROWS = 200;
/** Axes chosen for a first view: config keys that vary, then a summary metric. */
const DEFAULT_CONFIG_AXES = 6;

export function explorePage(root: HTMLElement): () => void {
  const params = new URLSearchParams(location.search);
  const listing: Record<string, string> = {};
  for (const k of FILTERS) if (params.get(k)) listing[k] = params.get(k)!;
  const list = (k: string) => (params.get(k) ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  const state = {
    axes: list('axes'),
    colour: params.get('colour') ?? '',
    x: params.get('x') ?? '',
    y: params.get('y') ?? '',
    brushes: params.getAll('brush'),
  };
  const back = new URLSearchParams(Object.entries(listing).filter(([k]) => k !== 'runs'));
  const title = h('h1', {}, 'Parameters');
  const count = h('span', { class: 'muted', id: 'explore-count' });
  const problem = h('p', { class: 'error', id: 'explore-problem' });
  const controls = h('div', { class: 'filters', id: 'explore-controls' });
  const pcBox = h('div', { id: 'parallel', class: 'explore-box' });
  const scBox = h('div', { id: 'scatter', class: 'explore-box' });
  const table = h('div', { id: 'explore-runs' });
  clear(root);
  append(root,
    h('p', {}, h('a', { href: '/' + (back.toString() ? `?${back}` : '') }, '← the runs table')),
    h('header', {}, title, count, saveViewControl()),
    listing.filter ? h('p', { class: 'muted mono' }, `filter: ${listing.filter}`) : null,
    problem, controls, pcBox, scBox, table,
  );

  let answer: ExploreAnswer | null = null;
  const open = (id: string) => (location.href = `/runs/${encodeURIComponent(id)}`);

  const ask = (keys: string[]) => get<ExploreAnswer>('/api/explore', { ...listing, keys });

  const save = () => {
    const u = new URLSearchParams(listing);
    if (state.axes.length) u.set('axes', state.axes.join(','));
    if (state.colour) u.set('colour', state.colour);
    if (state.x) u.set('x', state.x);
    if (state.y) u.set('y', state.y);
    for (const b of state.brushes) u.append('brush', b);
    history.replaceState(null, '', `/explore?${u}`);
  };

  async function start(): Promise<void> {
    try {
      if (state.axes.length === 0) {
        // A first view: the keys there are, then those of them whose values differ between runs.
        const first = await ask([]);
        const config = first.fields.config.slice(0, 30).map((k) => `config.${k}`);
        const metric = pickMetric(first.fields.summary);
        const probe = await ask([...config, ...(metric ? [metric] : [])].slice(0, 32));
        const varying = config.filter((k) => new Set(probe.values[k].map((v) => JSON.stringify(v))).size > 1).slice(0, DEFAULT_CONFIG_AXES);
        state.axes = [...(varying.length ? varying : config.slice(0, 3)), ...(metric ? [metric] : [])];
        if (!state.colour && metric) state.colour = metric;
      }
      if (!state.y) state.y = state.colour || state.axes[state.axes.length - 1] || '';
      if (!state.x) state.x = state.axes.find((k) => k !== state.y) ?? '';
      await load();
    } catch (e) {
      problem.textContent = (e as Error).message;
    }
  }

  async function load(): Promise<void> {
    const keys = [...new Set([...state.axes, state.colour, state.x, state.y].filter(Boolean))];
    answer = await ask(keys);
    problem.textContent = '';
    save();
    draw();
  }

  function draw(): void {
    const a = answer!;
    const n = a.runs.length;
    count.textContent = a.total > n ? `${n} of ${a.total} runs (the first ${n})` : `${n} runs`;
    title.textContent = listing.runs ? `Parameters of ${n} selected runs` : 'Parameters';
    const axisOf = new Map<string, Axis>();
    const axis = (k: string) => axisOf.get(k) ?? axisOf.set(k, makeAxis(k, a.values[k] ?? new Array<Cell>(n).fill(null))).get(k)!;
    const axes = state.axes.map(axis);
    const brushes = new Map<string, Brush>();
    for (const text of state.brushes) {
      for (const ax of axes) {
        const b = brushFromParam(ax, text);
        if (b) brushes.set(ax.key, b);
      }
    }
    drawControls(a);
    const colour = { axis: state.colour ? axis(state.colour) : null, values: state.colour ? a.values[state.colour] ?? [] : [] };
    clear(pcBox);
    clear(scBox);
    if (n === 0) {
      pcBox.append(h('p', { class: 'muted' }, 'no runs match: change the filters in the runs table'));
      clear(table);
      return;
    }
    const t0 = performance.now();
    const pc = axes.length
      ? parallelCoordinates(Math.max(640, pcBox.clientWidth || 960), {
        runs: a.runs, axes, values: axes.map((ax) => a.values[ax.key] ?? []), colour, brushes,
        onBrush: (key, b) => {
          if (b) brushes.set(key, b);
          else brushes.delete(key);
          state.brushes = [...brushes.values()].map((x) => brushToParam(axis(x.key), x));
          save();
          narrow();
        },
        open,
      })
      : null;
    if (pc) pcBox.append(h('h2', {}, 'Parallel coordinates'), pc.el);
    else pcBox.append(h('p', { class: 'muted' }, 'no axes: add a config or summary key above'));
    const sc = state.x && state.y ? scatter({ runs: a.runs, x: { axis: axis(state.x), values: a.values[state.x] ?? [] }, y: { axis: axis(state.y), values: a.values[state.y] ?? [] }, colour, open }) : null;
    if (sc) {
      scBox.append(h('h2', {}, 'Scatter'), sc.el);
      if (sc.left) scBox.append(h('p', { class: 'muted' }, `${sc.left} runs without ${state.x} or ${state.y} are not drawn`));
    }
    pcBox.dataset.drawMs = (performance.now() - t0).toFixed(1);
    narrow();

    /** The runs inside every brush: faded outside, listed under the charts. */
    function narrow(): void {
      const inside = new Uint8Array(n).fill(1);
      for (const [key, b] of brushes) {
        const ax = axis(key), vs = a.values[key] ?? [];
        for (let r = 0; r < n; r++) if (inside[r] && !inBrush(ax, b, vs[r])) inside[r] = 0;
      }
      pc?.restyle(inside);
      sc?.restyle(inside);
      drawTable(a, inside, brushes, axis);
    }
  }

  function drawTable(a: ExploreAnswer, inside: Uint8Array, brushes: Map<string, Brush>, axis: (k: string) => Axis): void {
    const keys = [...new Set([...state.axes, state.colour].filter(Boolean))];
    const rows: number[] = [];
    for (let r = 0; r < a.runs.length; r++) if (inside[r]) rows.push(r);
    // Best first by the colour key (lowest first for a loss or an error, highest first otherwise).
    if (state.colour) {
      const vs = a.values[state.colour] ?? [];
      const sign = /loss|err|perplex|time|mse|mae/i.test(state.colour) ? 1 : -1;
      rows.sort((p, q) => {
        const x = vs[p], y = vs[q];
        if (typeof x !== 'number' || !Number.isFinite(x)) return 1;
        if (typeof y !== 'number' || !Number.isFinite(y)) return -1;
        return sign * (x - y);
      });
    }
    clear(table);
    const numericBrushes = [...brushes.values()].filter((b) => axis(b.key).kind !== 'category');
    const expr = numericBrushes.map((b) => {
      const ax = axis(b.key);
      return `${b.key} >= ${ax.valueAt(b.lo)}; ${b.key} <= ${ax.valueAt(b.hi)}`;
    });
    const tableLink = new URLSearchParams(back);
    if (expr.length) tableLink.set('filter', [listing.filter, ...expr].filter(Boolean).join('; '));
    append(table,
      h('h2', {}, brushes.size ? `${rows.length} of ${a.runs.length} runs inside the brushes` : `${a.runs.length} runs`),
      brushes.size ? h('p', {}, 'Drag along an axis to brush it; click an axis to clear its brush. ', expr.length && !listing.runs ? h('a', { href: `/?${tableLink}`, id: 'explore-to-table' }, 'these runs in the runs table') : null) : h('p', { class: 'muted' }, 'Drag along an axis to keep only the runs within that range.'),
      h('table', { class: 'runs', id: 'explore-table' },
        h('thead', {}, h('tr', {}, h('th', {}, 'name'), h('th', {}, 'group'), h('th', {}, 'state'), ...keys.map((k) => h('th', { class: 'extra' }, k)))),
        h('tbody', {}, ...rows.slice(0, TABLE_ROWS).map((r) => {
          const run = a.runs[r];
          return h('tr', { 'data-run-id': run.id },
            h('td', {}, link(['runs', run.id], run.name || run.id), run.rank !== null ? h('span', { class: 'muted' }, ` rank ${run.rank}`) : null),
            h('td', {}, run.group ? link(['groups', run.group], run.group) : ''),
            h('td', {}, stateBadge(run.state)),
            ...keys.map((k) => {
              const v = a.values[k]?.[r] ?? null;
              return h('td', { class: typeof v === 'number' ? 'num extra' : 'extra', 'data-column': k }, v === null ? '' : typeof v === 'number' ? short(v) : v);
            }));
        }))),
      rows.length > TABLE_ROWS ? h('p', { class: 'muted' }, `the first ${TABLE_ROWS} of ${rows.length} shown`) : null,
    );
  }

  function drawControls(a: ExploreAnswer): void {
    const all = [...a.fields.config.map((k) => `config.${k}`), ...a.fields.summary.map((k) => `summary.${k}`)];
    const options = (chosen: string, blank: string) => [h('option', { value: '', selected: chosen === '' }, blank), ...all.map((k) => h('option', { value: k, selected: k === chosen }, k))];
    const chips = state.axes.map((k) => {
      const rm = h('button', { class: 'remove-column', title: `remove the axis ${k}`, 'aria-label': `remove axis ${k}` }, '×');
      rm.addEventListener('click', () => {
        state.axes = state.axes.filter((x) => x !== k);
        void load().catch((e: Error) => (problem.textContent = e.message));
      });
      return h('span', { class: 'chip', 'data-axis': k }, k, rm);
    });
    const add = h('input', { type: 'text', id: 'add-axis', class: 'mono', placeholder: 'add an axis: config.lr, summary.loss', list: 'axis-keys' });
    const keyList = h('datalist', { id: 'axis-keys' }, ...all.map((k) => h('option', { value: k })));
    const addAxis = () => {
      const k = add.value.trim();
      if (!k || state.axes.includes(k)) return;
      state.axes.push(k);
      void load().catch((e: Error) => (problem.textContent = e.message));
    };
    add.addEventListener('keydown', (e) => e.key === 'Enter' && addAxis());
    add.addEventListener('change', addAxis);
    const select = (id: string, label: string, chosen: string, blank: string, set: (v: string) => void) => {
      const s = h('select', { id }, ...options(chosen, blank));
      s.addEventListener('change', () => {
        set(s.value);
        void load().catch((e: Error) => (problem.textContent = e.message));
      });
      return h('label', {}, label, ' ', s);
    };
    clear(controls);
    controls.append(
      h('span', { class: 'muted' }, 'axes:'), ...chips, add, keyList,
      select('colour-by', 'colour by', state.colour, 'none', (v) => (state.colour = v)),
      select('scatter-x', 'scatter x', state.x, 'none', (v) => (state.x = v)),
      select('scatter-y', 'y', state.y, 'none', (v) => (state.y = v)),
    );
  }

  void start();
  return () => {};
}

/** The summary metric a first view colours by: a loss, else an accuracy, else the first. */
function pickMetric(summary: string[]): string {
  const pick = summary.find((k) => /^(val[_/.]?)?loss$/i.test(k)) ?? summary.find((k) => /loss/i.test(k)) ?? summary.find((k) => /acc/i.test(k)) ?? summary.find((k) => !k.startsWith('_')) ?? '';
  return pick ? `summary.${pick}` : '';
}
