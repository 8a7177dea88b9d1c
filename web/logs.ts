// The Logs tab of a run or a group: the console output its processes printed
// (a group's runs merged by time), filtered by rank, stream and a search
// (substring, any case, or a regular expression), read on the server. It opens
// on the last lines and, while a run is running, asks every second for what
// came after its cursor. ANSI colours (ansi.ts) become spans; every line is
// text (textContent), so a printed `<script>` shows as written.
//
// A continued run's output opens each attempt's part with a heading (attempt
// N of M, when and where it started, the step it went on from), as `logd
// logs` does; in a group, where lines of several runs interleave, a line's
// label says its attempt beside its rank instead.
import { h, clear, debounce } from './dom.js';
import { api, ApiError, type ConsoleAnswer, type ConsoleQuery, type LogLine } from './api.js';
import { sgrSegments } from './ansi.js';
import { attemptTitle, type AttemptLike } from '../src/attempts.js';

const TAIL_LINES = 5000;
/** Lines kept on the page; the oldest go first. */
const MAX_DOM_LINES = 20_000;
const POLL_MS = 1000;

export type LogsOf = { run: string } | { group: string; names?: Map<string, string> };

const pad = (n: number, w = 2) => String(n).padStart(w, '0');
function clock(t: number): string {
  const d = new Date(t * 1000);
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

/** A line as elements: time, who printed it (when several did), then its text in coloured spans. */
function lineEl(l: LogLine, who: string | null): HTMLElement {
  const text = h('span', { class: 'log-text' });
  for (const s of sgrSegments(l.line)) {
    if (s.fg === null && !s.bold) text.append(s.text);
    else text.append(h('span', { class: [s.fg !== null ? `ansi-fg-${s.fg}` : '', s.bold ? 'ansi-bold' : ''].filter(Boolean).join(' ') }, s.text));
  }
  return h('div', { class: `log-line stream-${l.stream}`, 'data-stream': l.stream, 'data-rank': l.rank === null ? '' : String(l.rank), 'data-attempt': l.attempt === undefined ? '' : String(l.attempt) },
    h('time', { class: 'log-time', datetime: new Date(l.t * 1000).toISOString(), title: new Date(l.t * 1000).toISOString() }, clock(l.t)),
    who === null ? null : h('span', { class: 'log-who' }, who),
    text);
}

/** Fills `container` with the Logs view; returns its stopper. */
export function logsView(container: HTMLElement, of: LogsOf): () => void {
  const url = new URLSearchParams(location.search);
  const rankSel = h('select', { id: 'log-rank', 'aria-label': 'rank' }, h('option', { value: '' }, 'all ranks'));
  const streamSel = h('select', { id: 'log-stream', 'aria-label': 'stream' },
    h('option', { value: '' }, 'stdout and stderr'), h('option', { value: 'out' }, 'stdout'), h('option', { value: 'err' }, 'stderr'));
  const search = h('input', { type: 'search', id: 'log-search', placeholder: 'search the lines', value: url.get('grep') ?? '' });
  const regex = h('input', { type: 'checkbox', id: 'log-regex' });
  const follow = h('input', { type: 'checkbox', id: 'log-follow', checked: true });
  const status = h('span', { class: 'muted', id: 'log-status' });
  const list = h('div', { class: 'log-lines mono', id: 'log-lines', role: 'log' });
  container.append(h('div', { class: 'filters', id: 'log-filters' }, rankSel, streamSel, search,
    h('label', { title: 'the search is a JavaScript regular expression' }, regex, ' regex'),
    h('label', { title: 'keep the newest line in view' }, follow, ' follow'), status), list);
  streamSel.value = url.get('stream') ?? '';
  regex.checked = url.get('regex') === '1';
  const ranks = new Set<number>();
  const wantedRank = url.get('rank') ?? '';
  const showRanks = (more: number[]) => {
    const before = ranks.size;
    for (const r of more) ranks.add(r);
    if (ranks.size === before && rankSel.options.length > 1) return;
    const keep = rankSel.value || wantedRank;
    for (const r of [...ranks].sort((a, b) => a - b)) {
      if (![...rankSel.options].some((o) => o.value === String(r))) rankSel.append(h('option', { value: String(r) }, `rank ${r}`));
    }
    if (keep && [...rankSel.options].some((o) => o.value === keep)) rankSel.value = keep;
  };
  if (wantedRank) showRanks([Number(wantedRank)]);

  let generation = 0, cursor = '', shown = 0, dropped = 0, skipped = 0, timer: ReturnType<typeof setTimeout> | null = null, stopped = false;
  const isGroup = 'group' in of;
  const query = (): ConsoleQuery => ({ rank: rankSel.value === '' ? null : Number(rankSel.value), stream: streamSel.value, grep: search.value, regex: regex.checked });
  const ask = (q: ConsoleQuery) => ('group' in of ? api.groupConsole(of.group, q) : api.console(of.run, q));
  const who = (l: LogLine): string | null => {
    const attempt = l.attempt !== undefined ? ` · attempt ${l.attempt}` : '';
    if (isGroup) return (l.rank !== null ? `rank ${l.rank}` : (of as { names?: Map<string, string> }).names?.get(l.run ?? '') ?? l.run ?? '') + attempt;
    return ranks.size > 1 ? (l.rank !== null ? `rank ${l.rank}` : `writer ${l.writer}`) : null;
  };
  /** A run's attempts (from its latest answer: one continued while shown is seen), and the attempt of the last line shown. */
  let attempts: AttemptLike[] = [];
  let shownAttempt: number | null = null;
  const heading = (n: number) => h('div', { class: 'log-attempt', 'data-attempt': String(n), role: 'separator' }, attemptTitle(attempts, n));
  const live = (a: ConsoleAnswer) => (a.runs ? Object.values(a.runs).some((s) => s === 'running') : a.state === 'running');
  const showStatus = (a: ConsoleAnswer | null, error = '') => {
    status.className = error ? 'error' : 'muted';
    if (error) return void (status.textContent = error);
    const earlier = skipped + dropped;
    status.textContent = [`${shown} line${shown === 1 ? '' : 's'}`, earlier ? `${earlier} earlier not shown` : '', a && live(a) ? 'live' : ''].filter(Boolean).join(' · ');
    list.dataset.lines = String(shown);
  };

  const render = (a: ConsoleAnswer) => {
    showRanks(a.ranks);
    if (!isGroup && Array.isArray(a.attempts)) attempts = a.attempts;
    if (a.lines.length === 0) return;
    const frag = document.createDocumentFragment();
    for (const l of a.lines) {
      // A run's output: a heading before the first line of each attempt's part (the first part shown included).
      if (!isGroup && l.attempt !== undefined && l.attempt !== shownAttempt) frag.append(heading((shownAttempt = l.attempt)));
      frag.append(lineEl(l, who(l)));
    }
    list.append(frag);
    shown += a.lines.length;
    while (shown > MAX_DOM_LINES && list.firstChild) {
      const first = list.firstChild as HTMLElement;
      first.remove();
      if (first.classList?.contains('log-attempt')) continue; // a heading is not a line
      shown--;
      dropped++;
    }
    // The oldest lines went with their attempt's heading: the first line left gets it back.
    const top = list.firstElementChild as HTMLElement | null;
    if (!isGroup && top?.classList.contains('log-line') && top.dataset.attempt) list.prepend(heading(Number(top.dataset.attempt)));
    if (follow.checked) list.scrollTop = list.scrollHeight;
  };

  const step = (gen: number, q: ConsoleQuery) => {
    void ask(q).then((a) => {
      if (gen !== generation || stopped) return;
      if (!a.kept) {
        clear(list);
        list.append(h('p', { class: 'muted', id: 'logs-not-kept' }, a.why ?? 'console output is not kept by this store'));
        return showStatus(null);
      }
      skipped += a.skipped;
      render(a);
      cursor = a.next;
      showStatus(a);
      // Nothing to show and nothing coming: say why, rather than an empty box.
      if (shown === 0 && !a.more && !live(a) && !list.querySelector('#logs-empty')) {
        const filtered = rankSel.value !== '' || streamSel.value !== '' || search.value !== '';
        list.append(h('p', { class: 'muted', id: 'logs-empty' }, filtered
          ? 'no line matches these filters: clear the rank, stream or search to see every line'
          : `${isGroup ? 'this group' : 'this run'} has no console output: it printed nothing, or its output was not captured (Python captures by default; TypeScript with init({ console: true }) or LOGD_CONSOLE=1; logd launch turns it on for every rank)`));
      } else if (shown > 0) list.querySelector('#logs-empty')?.remove();
      if (a.more) step(gen, { ...query(), after: cursor });
      else if (live(a)) timer = setTimeout(() => step(gen, { ...query(), after: cursor }), POLL_MS);
      list.dataset.loaded = 'true';
    }, (e: Error) => {
      if (gen !== generation || stopped) return;
      showStatus(null, e.message);
      // A bad search says so and waits for another; a server that went away is asked again.
      if (!(e instanceof ApiError && e.status === 400)) timer = setTimeout(() => step(gen, q), POLL_MS * 3);
    });
  };

  /** From the start: the last lines matching the filters, then live. */
  const restart = () => {
    generation++;
    if (timer) clearTimeout(timer);
    clear(list);
    delete list.dataset.loaded;
    cursor = '';
    shown = dropped = skipped = 0;
    shownAttempt = null;
    const u = new URLSearchParams(location.search);
    for (const [k, v] of [['rank', rankSel.value], ['stream', streamSel.value], ['grep', search.value], ['regex', regex.checked && search.value ? '1' : '']]) {
      if (v) u.set(k, v);
      else u.delete(k);
    }
    history.replaceState(null, '', location.pathname + (u.toString() ? `?${u}` : ''));
    step(generation, { ...query(), tail: TAIL_LINES });
  };
  rankSel.addEventListener('change', restart);
  streamSel.addEventListener('change', restart);
  regex.addEventListener('change', () => search.value && restart());
  search.addEventListener('input', debounce(300, restart));
  follow.addEventListener('change', () => follow.checked && (list.scrollTop = list.scrollHeight));
  restart();
  return () => {
    stopped = true;
    if (timer) clearTimeout(timer);
  };
}
