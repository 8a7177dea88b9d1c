// `/`: the runs table. Filters, the filter expression (`lr < 0.01; state =
// crashed`), sorting by any column and the columns chosen from config and
// summary keys all go to the server (they page) and live in the URL, so a
// link reproduces the view. Runs of a group fold into one row that opens;
// states change live.
import { splitJobs } from '../src/story/jobs.js';
import { storyOfRuns } from '../src/story/story.js';
import type { RunInfo } from '../src/wire.js';
import { h, clear, link, stateBadge, ago, debounce, fmt } from './dom.js';
import { api, live, send, type Run } from './api.js';
import { fieldValue } from '../src/run-filter.js';
import { saveViewControl, savedViewsList } from './saved-views.js';

/** daemon/ui/server.ts embeds a first page of as many runs (RUNS_PAGE). */
const PAGE = 100;

/** The table's own columns: header, sort field. */
const BASE_COLUMNS: Array<[string, string]> = [['name', 'name'], ['project', 'project'], ['group', 'group'], ['state', 'state'], ['rows', 'rows'], ['created', 'created']];
/** Fields that sort highest first on a first click. */
const DESC_FIRST = new Set(['created', 'rows']);

export function runsPage(root: HTMLElement): () => void {
  const params = new URLSearchParams(location.search);
  const f = {
    offset: Number(params.get('offset') ?? 0) || 0,
    sort: params.get('sort') ?? '',
    desc: params.get('desc') === '1',
    cols: (params.get('cols') ?? '').split(',').map((c) => c.trim()).filter(Boolean),
    /** No `cols` in the URL: the runs' main metrics (their most common summary keys) are shown until a column is added or removed. */
    autoCols: !params.has('cols'),
  };
  const open = new Set<string>();
  const selected = new Set<string>();
  /** Groups (jobs) selected as one item each for the compare page. */
  const selectedGroups = new Set<string>();
  let runs: Run[] = [];
  let total = 0;

  const search = h('input', { type: 'search', id: 'search', placeholder: 'search id, name, project, group, notes', value: params.get('text') ?? '' });
  const project = h('input', { type: 'text', id: 'filter-project', placeholder: 'project', value: params.get('project') ?? '' });
  const tag = h('input', { type: 'text', id: 'filter-tag', placeholder: 'tag', value: params.get('tag') ?? '' });
  const state = h('select', { id: 'filter-state' }, ...['', 'running', 'finished', 'crashed', 'killed'].map((s) => h('option', { value: s, selected: s === (params.get('state') ?? '') }, s || 'any state')));
  const expr = h('input', { type: 'search', id: 'filter', class: 'mono', placeholder: 'filter: lr < 0.01; state = crashed; summary.loss < 0.5', value: params.get('filter') ?? '', title: 'FIELD OP VALUE terms joined by ; or "and". FIELD: a config or summary key (config.lr, summary.loss, or just lr), or name, project, group, state, tags, rows, created. OP: = != < <= > >= ~ (contains)' });
  const addCol = h('input', { type: 'text', id: 'add-column', class: 'mono', placeholder: 'add a column: config.lr, summary.loss', list: 'column-keys' });
  const keyList = h('datalist', { id: 'column-keys' });
  const addBtn = h('button', { id: 'add-column-button' }, 'add column');
  const compare = h('button', { id: 'compare', disabled: true, title: 'select 2 to 20 runs or groups' }, 'Compare selected');
  const chartsOf = h('button', { id: 'chart-view', title: 'the charts of the runs this view shows (the first 20), overlaid; group lines and colour them by a config key there' }, 'Charts');
  const explore = h('button', { id: 'explore', title: 'parallel coordinates and a scatter of the selected runs, or of every run this view matches' }, 'Parameters');
  const info = h('span', { class: 'muted', id: 'count' });
  // Managing the selected runs (as `logd tag`, `rename`, `note` and `rm` do), in the store this dashboard reads.
  const tagBtn = h('button', { id: 'tag-selected', disabled: true, title: 'add or remove tags of the selected runs' }, 'Tag…');
  const renameBtn = h('button', { id: 'rename-selected', disabled: true, title: 'rename the selected run (one)' }, 'Rename…');
  const noteBtn = h('button', { id: 'note-selected', disabled: true, title: 'set the notes of the selected run (one)' }, 'Notes…');
  const deleteBtn = h('button', { id: 'delete-selected', class: 'danger', disabled: true, title: 'remove the selected runs for good (not running ones)' }, 'Delete…');
  const managed = h('span', { class: 'muted', id: 'manage-result', role: 'status' });
  const prev = h('button', {}, '‹ newer'), next = h('button', {}, 'older ›');
  const table = h('table', { class: 'runs', id: 'runs' });
  const problem = h('p', { class: 'error', id: 'runs-problem' });
  clear(root);
  root.append(
    h('header', {}, h('h1', {}, 'Runs'), info, saveViewControl()),
    savedViewsList(),
    h('div', { class: 'filters' }, search, project, tag, state, compare, chartsOf, explore),
    h('div', { class: 'filters manage' }, tagBtn, renameBtn, noteBtn, deleteBtn, managed),
    h('div', { class: 'filters' }, expr, addCol, keyList, addBtn),
    problem, table, h('div', { class: 'pager' }, prev, next),
  );

  /** The API query of this view: daemon/ui/server.ts builds the same one for the embedded first page. */
  const query = () => ({
    text: search.value, project: project.value, state: state.value, tag: tag.value, filter: expr.value.trim(),
    sort: f.sort, desc: f.sort && f.desc ? '1' : '', offset: f.offset, limit: PAGE,
  });
  const reload = async () => {
    const q = query();
    const u = new URLSearchParams();
    for (const [k, v] of Object.entries(q)) if (v && k !== 'limit') u.set(k, String(v));
    if (!f.autoCols) u.set('cols', f.cols.join(','));
    history.replaceState(null, '', '/' + (u.toString() ? `?${u}` : ''));
    try {
      const page = await api.runs(q);
      runs = page.runs;
      total = page.total;
      if (f.autoCols) f.cols = mainMetrics(runs);
      problem.textContent = '';
      render();
    } catch (e) {
      problem.textContent = (e as Error).message;
    }
  };
  const later = debounce(250, () => ((f.offset = 0), void reload()));
  for (const el of [search, project, tag]) el.addEventListener('input', later);
  // The expression runs when it is complete: on Enter, or when the box is left or cleared.
  expr.addEventListener('change', () => ((f.offset = 0), void reload()));
  expr.addEventListener('search', () => ((f.offset = 0), void reload()));
  state.addEventListener('change', () => ((f.offset = 0), void reload()));
  prev.addEventListener('click', () => ((f.offset = Math.max(0, f.offset - PAGE)), void reload()));
  next.addEventListener('click', () => ((f.offset += PAGE), void reload()));
  compare.addEventListener('click', () => {
    const u = new URLSearchParams();
    if (selected.size) u.set('runs', [...selected].join(','));
    if (selectedGroups.size) u.set('groups', [...selectedGroups].join(','));
    location.href = `/compare?${u}`;
  });
  // The runs shown as charts: the compare page of the first 20 (selected ones when two or more are ticked).
  chartsOf.addEventListener('click', () => {
    const ids = selected.size >= 2 ? [...selected] : runs.map((r) => r.id);
    location.href = `/compare?runs=${ids.slice(0, 20).join(',')}`;
  });
  // The parameter views of the selected runs (two or more), else of every run the filters match.
  explore.addEventListener('click', () => {
    const u = new URLSearchParams();
    if (selected.size >= 2) u.set('runs', [...selected].join(','));
    else for (const [k, v] of Object.entries(query())) if (v && ['text', 'project', 'state', 'tag', 'filter'].includes(k)) u.set(k, String(v));
    location.href = `/explore${u.toString() ? `?${u}` : ''}`;
  });
  const chosen = () => runs.filter((r) => selected.has(r.id));
  const change = async (action: 'edit' | 'delete', body: Record<string, unknown>, done: (a: { runs?: Array<{ id: string }>; removed?: string[] }) => string) => {
    try {
      const a = await send<{ runs?: Array<{ id: string }>; removed?: string[] }>('POST', `/api/manage/${action}`, body);
      managed.textContent = done(a);
      managed.className = 'muted';
      if (action === 'delete') for (const id of a.removed ?? []) selected.delete(id);
      selectionChanged();
      await reload();
    } catch (e) {
      managed.textContent = (e as Error).message;
      managed.className = 'error';
    }
  };
  tagBtn.addEventListener('click', () => {
    const ids = [...selected];
    const said = prompt(`Tags for ${ids.length} run(s), comma-separated: a name adds it, -name removes it`, '');
    if (said === null || said.trim() === '') return;
    const words = said.split(',').map((w) => w.trim()).filter(Boolean);
    const addTags = words.filter((w) => !w.startsWith('-')), removeTags = words.filter((w) => w.startsWith('-')).map((w) => w.slice(1));
    void change('edit', { ids, addTags, removeTags }, (a) => `tagged ${a.runs?.length ?? 0} run(s)`);
  });
  renameBtn.addEventListener('click', () => {
    const [r] = chosen();
    if (!r) return;
    const name = prompt(`New name of run ${r.id}`, r.name);
    if (name === null || name === r.name) return;
    void change('edit', { ids: [r.id], name }, () => `renamed ${r.id}`);
  });
  noteBtn.addEventListener('click', () => {
    const [r] = chosen();
    if (!r) return;
    const notes = prompt(`Notes of run ${r.id} (empty: none)`, String((r as { notes?: string }).notes ?? ''));
    if (notes === null) return;
    void change('edit', { ids: [r.id], notes }, () => `notes of ${r.id} saved`);
  });
  deleteBtn.addEventListener('click', () => {
    const rs = chosen();
    if (!rs.length) return;
    const list = rs.slice(0, 10).map((r) => `${r.name || r.id} (${r.id}, ${r.state})`).join('\n') + (rs.length > 10 ? `\n… and ${rs.length - 10} more` : '');
    if (!confirm(`Remove ${rs.length} run(s) for good? Their rows, console output and media go with them.\n\n${list}`)) return;
    void change('delete', { ids: rs.map((r) => r.id) }, (a) => `removed ${a.removed?.length ?? 0} run(s)`);
  });
  const selectionChanged = () => {
    const picked = chosen().length;
    tagBtn.disabled = deleteBtn.disabled = picked === 0;
    renameBtn.disabled = noteBtn.disabled = picked !== 1;
    const n = selected.size + selectedGroups.size;
    compare.disabled = n < 2;
    compare.textContent = `Compare selected (${n})`;
    explore.textContent = selected.size >= 2 ? `Parameters of ${selected.size} runs` : 'Parameters';
  };

  let keysAsked = false;
  addCol.addEventListener('focus', () => {
    if (keysAsked) return;
    keysAsked = true;
    void api.runs({ ...query(), offset: 0, limit: 0, fields: 1 }).then((a) => {
      const fields = (a as unknown as { fields?: { config: string[]; summary: string[] } }).fields ?? { config: [], summary: [] };
      keyList.append(...fields.config.map((k) => h('option', { value: `config.${k}` })), ...fields.summary.map((k) => h('option', { value: `summary.${k}` })),
        // The range of every value logged, and the best (lowest for a loss or an error): summary.loss.min / .max / .best.
        ...fields.summary.slice(0, 50).flatMap((k) => ['min', 'max', 'best'].map((x) => h('option', { value: `summary.${k}.${x}` }))));
    }, () => (keysAsked = false));
  });
  const addColumn = () => {
    const c = addCol.value.trim();
    addCol.value = '';
    if (!c || f.cols.includes(c)) return;
    f.autoCols = false;
    f.cols.push(c);
    void reload();
  };
  addBtn.addEventListener('click', addColumn);
  addCol.addEventListener('keydown', (e) => {
    if (e.key === 'Enter') addColumn();
  });

  function header(label: string, field: string, extra = false): HTMLElement {
    const current = f.sort === field || (f.sort === '' && field === 'created');
    const down = f.sort === '' ? true : f.desc;
    const th = h('th', { class: `sortable${extra ? ' extra' : ''}`, 'data-sort': field, title: `sort by ${field}` }, label, current ? (down ? ' ▾' : ' ▴') : '');
    th.addEventListener('click', (e) => {
      if ((e.target as HTMLElement).closest('button')) return;
      if (current && f.sort !== '') f.desc = !f.desc;
      else f.desc = current ? false : DESC_FIRST.has(field);
      f.sort = field;
      f.offset = 0;
      void reload();
    });
    if (extra) {
      const rm = h('button', { class: 'remove-column', title: `remove the column ${field}`, 'aria-label': `remove ${field}` }, '×');
      rm.addEventListener('click', () => {
        f.autoCols = false;
        f.cols = f.cols.filter((c) => c !== field);
        if (f.sort === field) f.sort = '';
        void reload();
      });
      th.append(rm);
    }
    return th;
  }

  const extraCells = (r: Run) => f.cols.map((c) => {
    const v = fieldValue(r, c);
    return h('td', { class: typeof v === 'number' ? 'num extra' : 'extra', 'data-column': c }, v === undefined || v === null ? '' : fmt(v));
  });

  /** A group row's cell of a chosen column: the value its runs share, or the range they span. */
  const groupCell = (members: Run[], c: string) => {
    const vs = members.map((m) => fieldValue(m, c)).filter((v) => v !== undefined && v !== null);
    let text = '';
    if (vs.length > 0 && vs.every((v) => JSON.stringify(v) === JSON.stringify(vs[0]))) text = fmt(vs[0]);
    else if (vs.length > 0 && vs.every((v) => typeof v === 'number')) text = `${fmt(Math.min(...(vs as number[])))} – ${fmt(Math.max(...(vs as number[])))}`;
    else if (vs.length > 0) text = '…';
    return h('td', { class: 'extra muted', 'data-column': c, title: vs.length < members.length ? `${vs.length} of ${members.length} runs have ${c}` : c }, text);
  };

  function runRow(r: Run, inGroup: boolean): HTMLTableRowElement {
    const box = h('input', { type: 'checkbox', checked: selected.has(r.id), 'aria-label': `select ${r.id}` });
    box.addEventListener('change', () => {
      if (box.checked) selected.add(r.id);
      else selected.delete(r.id);
      selectionChanged();
    });
    return h('tr', { class: inGroup ? 'run in-group' : 'run', 'data-run-id': r.id },
      h('td', {}, box),
      h('td', { class: 'name' }, link(['runs', r.id], r.name || r.id), r.rank !== null ? h('span', { class: 'muted' }, ` rank ${r.rank}`) : null),
      h('td', {}, r.project),
      h('td', { class: 'group-cell' }, r.group ? link(['groups', r.group], r.group) : ''),
      h('td', { class: 'state-cell' }, stateBadge(r.state)),
      h('td', { class: 'num rows-cell' }, r.historyRows),
      h('td', { title: r.createdAt }, ago(r.createdAt)),
      ...extraCells(r),
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
    for (const r of runs) {
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
      const toggle = h('button', { class: 'toggle', 'aria-expanded': String(isOpen), 'aria-label': `show the runs of group ${r.group}` }, isOpen ? '▾' : '▸');
      toggle.addEventListener('click', () => {
        if (open.has(r.group)) open.delete(r.group);
        else open.add(r.group);
        render();
      });
      const groupBox = h('input', { type: 'checkbox', class: 'group-select', checked: selectedGroups.has(r.group), 'aria-label': `select group ${r.group}`, title: 'compare this group as one: the mean of its ranks' });
      groupBox.addEventListener('change', () => {
        if (groupBox.checked) selectedGroups.add(r.group);
        else selectedGroups.delete(r.group);
        selectionChanged();
      });
      body.append(h('tr', { class: 'group-row', 'data-group': r.group },
        h('td', { class: 'group-controls' }, toggle, groupBox),
        h('td', { class: 'name' }, link(['groups', r.group], r.group), h('span', { class: 'muted' }, ` ${members.length} runs`)),
        h('td', {}, r.project),
        h('td', { class: 'group-cell' }, link(['groups', r.group], r.group)),
        h('td', { class: 'state-cell' }, ...[...counts].map(([s, n]) => h('span', {}, stateBadge(s), n > 1 ? ` ×${n} ` : ' ')), ...firstFailure(members)),
        h('td', { class: 'num' }, members.reduce((n, m) => n + m.historyRows, 0)),
        h('td', {}, ago(r.createdAt)),
        ...f.cols.map((c) => groupCell(members, c)),
        h('td', { class: 'muted mono group-ids', title: members.map((m) => m.id).join(' ') }, `${members.length} runs`)));
      if (isOpen) for (const m of members) body.append(runRow(m, true));
    }
    clear(table);
    table.append(h('thead', {}, h('tr', {}, h('th', {}), ...BASE_COLUMNS.map(([label, field]) => header(label, field)),
      ...f.cols.map((c) => header(c, c, true)), h('th', {}, 'id'))), body);
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

/** The summary keys most of the runs shown have (numbers, not `_`-prefixed), up to 3, as columns. */
export function mainMetrics(runs: Run[]): string[] {
  const count = new Map<string, number>();
  for (const r of runs) {
    for (const [k, v] of Object.entries(r.summary ?? {})) if (!k.startsWith('_') && typeof v === 'number') count.set(k, (count.get(k) ?? 0) + 1);
  }
  return [...count].filter(([, n]) => n * 4 >= runs.length).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, 3).map(([k]) => `summary.${k}`);
}

/** A failed group's first failure, for its row (the latest job's story, src/story): "first: rank 2, killed". */
function firstFailure(members: Run[]): HTMLElement[] {
  if (!members.some((m) => m.state === 'crashed')) return [];
  const asInfo = (m: Run): RunInfo => ({
    id: m.id, project: m.project, name: m.name, group: m.group, jobType: m.jobType, tags: m.tags, state: m.state, stateReason: m.stateReason,
    createdAt: Date.parse(m.createdAt) / 1000, finishedAt: m.finishedAt ? Date.parse(m.finishedAt) / 1000 : 0, exitCode: m.exitCode,
    configJson: JSON.stringify(m.config), summaryJson: JSON.stringify(m.summary), metadataJson: JSON.stringify(m.metadata), historyRows: m.historyRows,
    writers: m.writersAttached, runToken: '', mode: m.mode, notes: m.notes, ownerWriterId: '',
  });
  const jobs = splitJobs(members.map(asInfo));
  const story = storyOfRuns(jobs[jobs.length - 1].runs);
  if (!story || story.verdict !== 'failed') return [];
  const who = story.first.length ? story.first.map((f) => `${f.rank === null ? f.runId : `rank ${f.rank}`}, ${f.cause}`).join('; ') : 'outside these runs';
  return [h('span', { class: 'group-story muted', title: story.line }, `first: ${who}`)];
}
