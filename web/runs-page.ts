// `/`: the runs list. Filters and search go to the server (they page);
// sorting orders the page shown; runs of a group fold into one row that
// opens; states change live.
import { h, clear, link, stateBadge, ago, debounce } from './dom.js';
import { api, live, type Run } from './api.js';

/** daemon/ui/server.ts embeds a first page of as many runs (RUNS_PAGE). */
const PAGE = 100;
type SortKey = 'createdAt' | 'name' | 'project' | 'state' | 'historyRows';

export function runsPage(root: HTMLElement): () => void {
  const params = new URLSearchParams(location.search);
  const f = {
    text: params.get('text') ?? '', project: params.get('project') ?? '', state: params.get('state') ?? '', tag: params.get('tag') ?? '',
    offset: Number(params.get('offset') ?? 0) || 0,
  };
  let sort: SortKey = 'createdAt', desc = true;
  const open = new Set<string>();
  const selected = new Set<string>();
  let runs: Run[] = [];
  let total = 0;

  const search = h('input', { type: 'search', id: 'search', placeholder: 'search id, name, project, group, notes', value: f.text });
  const project = h('input', { type: 'text', id: 'filter-project', placeholder: 'project', value: f.project });
  const tag = h('input', { type: 'text', id: 'filter-tag', placeholder: 'tag', value: f.tag });
  const state = h('select', { id: 'filter-state' }, ...['', 'running', 'finished', 'crashed', 'killed'].map((s) => h('option', { value: s, selected: s === f.state }, s || 'any state')));
  const compare = h('button', { id: 'compare', disabled: true }, 'Compare selected');
  const info = h('span', { class: 'muted', id: 'count' });
  const prev = h('button', {}, '‹ newer'), next = h('button', {}, 'older ›');
  const table = h('table', { class: 'runs', id: 'runs' });
  const problem = h('p', { class: 'error' });
  clear(root);
  root.append(
    h('header', {}, h('h1', {}, 'Runs'), info),
    h('div', { class: 'filters' }, search, project, tag, state, compare),
    problem, table, h('div', { class: 'pager' }, prev, next),
  );

  const reload = async () => {
    const q = { text: search.value, project: project.value, state: state.value, tag: tag.value, offset: f.offset, limit: PAGE };
    const u = new URLSearchParams();
    for (const [k, v] of Object.entries(q)) if (v && k !== 'limit') u.set(k, String(v));
    history.replaceState(null, '', '/' + (u.toString() ? `?${u}` : ''));
    try {
      const page = await api.runs(q);
      runs = page.runs;
      total = page.total;
      problem.textContent = '';
      render();
    } catch (e) {
      problem.textContent = (e as Error).message;
    }
  };
  const later = debounce(250, () => ((f.offset = 0), void reload()));
  for (const el of [search, project, tag]) el.addEventListener('input', later);
  state.addEventListener('change', () => ((f.offset = 0), void reload()));
  prev.addEventListener('click', () => ((f.offset = Math.max(0, f.offset - PAGE)), void reload()));
  next.addEventListener('click', () => ((f.offset += PAGE), void reload()));
  compare.addEventListener('click', () => (location.href = `/compare?runs=${[...selected].map(encodeURIComponent).join(',')}`));

  function header(label: string, key: SortKey): HTMLElement {
    const th = h('th', { class: 'sortable', 'data-sort': key }, label, sort === key ? (desc ? ' ▾' : ' ▴') : '');
    th.addEventListener('click', () => {
      desc = sort === key ? !desc : key === 'createdAt' || key === 'historyRows';
      sort = key;
      render();
    });
    return th;
  }

  function sorted(list: Run[]): Run[] {
    const v = (r: Run) => (sort === 'historyRows' ? r.historyRows : String(r[sort]));
    return [...list].sort((a, b) => {
      const x = v(a), y = v(b);
      const c = x < y ? -1 : x > y ? 1 : 0;
      return desc ? -c : c;
    });
  }

  function runRow(r: Run, inGroup: boolean): HTMLTableRowElement {
    const box = h('input', { type: 'checkbox', checked: selected.has(r.id), 'aria-label': `select ${r.id}` });
    box.addEventListener('change', () => {
      if (box.checked) selected.add(r.id);
      else selected.delete(r.id);
      compare.disabled = selected.size < 2;
      compare.textContent = `Compare selected (${selected.size})`;
    });
    return h('tr', { class: inGroup ? 'run in-group' : 'run', 'data-run-id': r.id },
      h('td', {}, box),
      h('td', { class: 'name' }, link(['runs', r.id], r.name || r.id), r.rank !== null ? h('span', { class: 'muted' }, ` rank ${r.rank}`) : null),
      h('td', {}, r.project),
      h('td', {}, r.group ? link(['groups', r.group], r.group) : ''),
      h('td', { class: 'state-cell' }, stateBadge(r.state)),
      h('td', { class: 'num rows-cell' }, r.historyRows),
      h('td', { title: r.createdAt }, ago(r.createdAt)),
      h('td', { class: 'muted mono' }, r.id));
  }

  function render(): void {
    info.textContent = total ? `${f.offset + 1}–${f.offset + runs.length} of ${total}` : 'no runs match';
    prev.disabled = f.offset === 0;
    next.disabled = f.offset + runs.length >= total;
    const body = h('tbody');
    const groups = new Map<string, Run[]>();
    for (const r of runs) if (r.group) (groups.get(r.group) ?? groups.set(r.group, []).get(r.group)!).push(r);
    const done = new Set<string>();
    for (const r of sorted(runs)) {
      if (!r.group || groups.get(r.group)!.length === 1) {
        body.append(runRow(r, false));
        continue;
      }
      if (done.has(r.group)) continue;
      done.add(r.group);
      const members = groups.get(r.group)!.sort((a, b) => (a.rank ?? 1e9) - (b.rank ?? 1e9));
      const counts = new Map<string, number>();
      for (const m of members) counts.set(m.state, (counts.get(m.state) ?? 0) + 1);
      const isOpen = open.has(r.group);
      const toggle = h('button', { class: 'toggle', 'aria-expanded': String(isOpen) }, isOpen ? '▾' : '▸');
      toggle.addEventListener('click', () => {
        if (open.has(r.group)) open.delete(r.group);
        else open.add(r.group);
        render();
      });
      body.append(h('tr', { class: 'group-row', 'data-group': r.group },
        h('td', {}, toggle),
        h('td', { class: 'name' }, link(['groups', r.group], r.group), h('span', { class: 'muted' }, ` ${members.length} runs`)),
        h('td', {}, r.project),
        h('td', {}, 'group'),
        h('td', { class: 'state-cell' }, ...[...counts].map(([s, n]) => h('span', {}, stateBadge(s), n > 1 ? ` ×${n} ` : ' '))),
        h('td', { class: 'num' }, members.reduce((n, m) => n + m.historyRows, 0)),
        h('td', {}, ago(r.createdAt)),
        h('td', {})));
      if (isOpen) for (const m of members) body.append(runRow(m, true));
    }
    clear(table);
    table.append(h('thead', {}, h('tr', {}, h('th', {}), header('name', 'name'), header('project', 'project'), h('th', {}, 'group'),
      header('state', 'state'), header('rows', 'historyRows'), header('created', 'createdAt'), h('th', {}, 'id'))), body);
  }

  void reload();
  const close = live(new URLSearchParams({ list: '1' }), {
    state: (e) => {
      const r = runs.find((x) => x.id === e.run);
      if (!r) return;
      if (e.info) Object.assign(r, e.info);
      r.state = e.state;
      r.stateReason = e.stateReason;
      r.historyRows = e.historyRows;
      render();
    },
    runs: () => void reload(),
  });
  return close;
}
