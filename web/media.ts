// The run page's Media tab: what the run logged beside numbers, one panel per
// key (the keys come from the run's metadata.media): a distribution chart per
// histogram key (distribution.ts), an image per image key at the step a slider
// picks, and a scrolling list per text key. A panel reads its key's entries
// when it first scrolls into view; while the run runs, the keys whose count
// grew are read again. Captions and text are text nodes, never HTML.
//
// A continued run's entries say which attempt logged them. After a rewind
// (init(resume_from=...)) an earlier attempt's entries above the step a later
// one resumed from are superseded: the distribution charts leave them out (as
// the metric charts show the latest timeline), images and text keep them,
// marked "superseded", beside the later attempt's at the same step.
import { h, clear } from './dom.js';
import { api, type Run, type MediaItem, type MediaIndex, type MediaAnswer } from './api.js';
import { DistributionChart } from './distribution.js';
import { rewindCutoffs } from '../src/attempts.js';
import { MAX_SHOWN_PIXELS } from '../src/media.js';

const POLL_MS = 3000;
const KINDS = [
  { kind: 'histogram', title: 'Distributions' },
  { kind: 'image', title: 'Images' },
  { kind: 'text', title: 'Text' },
] as const;

interface Panel {
  el: HTMLElement;
  /** Reads the key's entries anew and shows them. */
  load(): Promise<void>;
  destroy(): void;
}

const rankName = (r: number | null) => (r === null ? '' : `rank ${r}`);

/** The entries of a key split by rank, ranks in order: a shared run's ranks each log their own. */
function byRank(entries: MediaItem[]): Array<[number | null, MediaItem[]]> {
  const m = new Map<number | null, MediaItem[]>();
  for (const e of entries) {
    const list = m.get(e.rank);
    if (list) list.push(e);
    else m.set(e.rank, [e]);
  }
  return [...m].sort((a, b) => (a[0] ?? -1) - (b[0] ?? -1));
}

/** Per entry of a continued run, what to say of its attempt (`attempt 1, superseded`); null for a run of one. */
function attemptOf(a: MediaAnswer): (e: MediaItem) => { label: string; superseded: boolean } | null {
  const cut = rewindCutoffs(a.attempts ?? []);
  return (e) => {
    if (e.attempt === undefined) return null;
    const superseded = e.step > (cut[e.attempt] ?? Infinity);
    return { label: `attempt ${e.attempt}${superseded ? ', superseded' : ''}`, superseded };
  };
}

/** What the answer leaves out, as a line under the panel (or nothing). */
function answerNote(a: MediaAnswer): string {
  if (!a.kept) return a.why ?? 'not kept by this store';
  if (a.truncated) return `every ${a.stride}th of ${a.total ?? '?'} entries shown (too many for one answer)`;
  return '';
}

function histogramPanel(run: Run, key: string): Panel {
  const charts = new Map<number | null, DistributionChart>();
  const note = h('p', { class: 'muted media-note' });
  const el = h('div', { class: 'media-panel dist-panel', 'data-key': key, 'data-kind': 'histogram' }, note);
  return {
    el,
    async load() {
      const a = await api.media(run.id, 'histogram', key);
      const att = attemptOf(a);
      const current = a.entries.filter((e) => e.counts && e.edges && !att(e)?.superseded);
      const superseded = a.entries.filter((e) => e.counts && e.edges).length - current.length;
      note.textContent = [answerNote(a), superseded ? `${superseded} histogram(s) of earlier attempts above the step a later attempt resumed from are superseded, left out` : ''].filter(Boolean).join('; ');
      el.dataset.superseded = String(superseded);
      const parts = byRank(current);
      for (const [rank, list] of parts) {
        let c = charts.get(rank);
        if (!c) {
          c = new DistributionChart(parts.length > 1 ? `${key} (${rankName(rank) || 'no rank'})` : key, { 'data-key': key, 'data-rank': String(rank ?? '') });
          charts.set(rank, c);
          el.insertBefore(c.el, note);
        }
        c.set(list.map((e) => ({ step: e.step, counts: e.counts!, edges: e.edges! })));
      }
      if (parts.length === 0 && a.kept) note.textContent = 'no histograms stored under this key';
    },
    destroy: () => charts.forEach((c) => c.destroy()),
  };
}

function imagePanel(run: Run, key: string): Panel {
  const slider = h('input', { type: 'range', class: 'step-slider', min: '0', max: '0', value: '0', 'aria-label': `step of ${key}` });
  const stepLabel = h('span', { class: 'step-label mono' });
  const figures = h('div', { class: 'figures' });
  const note = h('p', { class: 'muted media-note' });
  const el = h('div', { class: 'chart media-panel image-panel', 'data-key': key, 'data-kind': 'image' },
    h('div', { class: 'chart-title' }, key), h('div', { class: 'slider-row' }, slider, stepLabel), figures, note);
  let steps: number[] = [];
  let atStep = new Map<number, MediaItem[]>();
  let att: ReturnType<typeof attemptOf> = () => null;
  const show = () => {
    const i = Number(slider.value);
    const step = steps[i];
    stepLabel.textContent = steps.length ? `step ${step} (${i + 1} of ${steps.length})` : '';
    el.dataset.step = String(step ?? '');
    clear(figures);
    for (const m of atStep.get(step) ?? []) {
      const mark = m.attempt === undefined ? {} : { 'data-attempt': String(m.attempt) };
      const facts = [rankName(m.rank), att(m)?.label ?? '', m.width && m.height ? `${m.width}×${m.height}` : '', m.format ?? ''].filter(Boolean).join(' · ');
      if (m.lost || !m.sha256) {
        figures.append(h('figure', { class: 'media-figure lost', ...mark }, h('p', { class: 'error' }, `image not kept: ${m.lost ?? 'no bytes'}`), h('figcaption', { class: 'caption' }, m.caption ?? '')));
        continue;
      }
      if (m.width && m.height && m.width * m.height > MAX_SHOWN_PIXELS) {
        // Never decoded here: a small file can hold gigabytes of pixels.
        const link = h('a', { class: 'image-download', href: `${api.imageUrl(run.id, m.sha256)}?download=1`, download: '' }, 'download it');
        figures.append(h('figure', { class: 'media-figure too-large', ...mark },
          h('p', { class: 'muted image-placeholder' }, `${m.width}×${m.height} image: too large to show here (${(m.width * m.height * 4 / 2 ** 30).toFixed(1)} GiB decoded); `, link),
          h('figcaption', { class: 'caption' }, m.caption ?? ''), h('div', { class: 'muted image-facts' }, facts)));
        continue;
      }
      const img = h('img', { class: 'media-image', src: api.imageUrl(run.id, m.sha256), alt: m.caption || `${key} at step ${m.step}`, decoding: 'async' });
      // Small images are scaled up by a whole factor, their pixels kept sharp.
      if (m.width && m.width < 256) img.style.width = `${m.width * Math.min(8, Math.floor(256 / m.width))}px`;
      figures.append(h('figure', { class: `media-figure${att(m)?.superseded ? ' superseded' : ''}`, ...mark }, img, h('figcaption', { class: 'caption' }, m.caption ?? ''), h('div', { class: 'muted image-facts' }, facts)));
    }
  };
  slider.addEventListener('input', show);
  return {
    el,
    async load() {
      const a = await api.media(run.id, 'image', key);
      note.textContent = answerNote(a);
      att = attemptOf(a);
      const atEnd = steps.length === 0 || Number(slider.value) === steps.length - 1;
      atStep = new Map();
      for (const e of a.entries) {
        const list = atStep.get(e.step);
        if (list) list.push(e);
        else atStep.set(e.step, [e]);
      }
      for (const list of atStep.values()) list.sort((x, y) => (x.rank ?? -1) - (y.rank ?? -1) || (x.attempt ?? 0) - (y.attempt ?? 0));
      const was = steps[Number(slider.value)];
      steps = [...atStep.keys()].sort((x, y) => x - y);
      slider.max = String(Math.max(0, steps.length - 1));
      slider.disabled = steps.length < 2;
      // The newest image while following the end; else the step being looked at.
      slider.value = String(atEnd ? steps.length - 1 : Math.max(0, steps.indexOf(was)));
      show();
      if (steps.length === 0 && a.kept) note.textContent = 'no images stored under this key';
    },
    destroy() {},
  };
}

function textPanel(run: Run, key: string): Panel {
  const list = h('ol', { class: 'text-list' });
  const note = h('p', { class: 'muted media-note' });
  const el = h('div', { class: 'chart media-panel text-panel', 'data-key': key, 'data-kind': 'text' }, h('div', { class: 'chart-title' }, key), list, note);
  return {
    el,
    async load() {
      const a = await api.media(run.id, 'text', key);
      note.textContent = answerNote(a);
      const att = attemptOf(a);
      const entries = [...a.entries].sort((x, y) => x.step - y.step || (x.attempt ?? 0) - (y.attempt ?? 0) || (x.rank ?? -1) - (y.rank ?? -1));
      const follow = list.scrollTop + list.clientHeight >= list.scrollHeight - 4;
      clear(list);
      list.append(...entries.map((e) => {
        const at = att(e);
        return h('li', { class: `text-entry${at?.superseded ? ' superseded' : ''}`, 'data-step': String(e.step), 'data-attempt': e.attempt === undefined ? '' : String(e.attempt) },
          h('div', { class: 'muted text-step' }, [`step ${e.step}`, rankName(e.rank), at?.label ?? ''].filter(Boolean).join(' · ')),
          h('pre', { class: 'text-value' }, e.text ?? ''));
      }));
      if (follow) list.scrollTop = list.scrollHeight;
      if (entries.length === 0 && a.kept) note.textContent = 'no text stored under this key';
    },
    destroy() {},
  };
}

const PANELS = { histogram: histogramPanel, image: imagePanel, text: textPanel } as const;

/** Fills the tab; returns its stopper. */
export function mediaTab(body: HTMLElement, run: Run): () => void {
  const panels = new Map<string, { panel: Panel; seen: string; visible: boolean; loaded: string; busy: boolean }>();
  const grids = new Map<string, HTMLElement>();
  const empty = h('p', { class: 'muted', id: 'no-media' }, 'no histograms, images or text logged yet');
  const container = h('div', { id: 'media' });
  body.append(container);
  let stopped = false;

  /** One read per panel at a time; a change seen meanwhile is read after it. */
  const load = (key: string) => {
    const p = panels.get(key)!;
    if (p.busy || p.loaded === p.seen || stopped) return;
    p.busy = true;
    p.loaded = p.seen;
    p.panel.el.querySelector(':scope > p.error')?.remove();
    void p.panel.load().catch((e: Error) => {
      p.panel.el.append(h('p', { class: 'error' }, e.message));
    }).finally(() => {
      p.busy = false;
      if (p.visible) load(key);
    });
  };
  const observer = new IntersectionObserver((entries) => {
    for (const e of entries) {
      const key = (e.target as HTMLElement).dataset.key!;
      const p = panels.get(key);
      if (!p) continue;
      p.visible = e.isIntersecting;
      if (p.visible) load(key);
    }
  }, { rootMargin: '200px' });

  /** Panels for keys not shown yet; a key whose count changed is read again when in view. */
  const showIndex = (index: MediaIndex) => {
    for (const { kind, title } of KINDS) {
      const keys = Object.keys(index).filter((k) => index[k].kind === kind).sort();
      if (keys.length === 0) continue;
      let grid = grids.get(kind);
      if (!grid) {
        grid = h('div', { class: kind === 'text' ? 'grid text-grid' : 'grid' });
        grids.set(kind, grid);
        const sec = h('details', { open: true, class: 'section', 'data-kind': kind }, h('summary', {}, title), grid);
        const after = KINDS.slice(KINDS.findIndex((x) => x.kind === kind) + 1).map((x) => grids.get(x.kind)?.parentElement).find(Boolean);
        container.insertBefore(sec, after ?? null);
      }
      for (const key of keys) {
        const seen = `${index[key].count}|${index[key].lastStep}`;
        const p = panels.get(key);
        if (p) {
          p.seen = seen;
          if (p.visible) load(key);
          continue;
        }
        const panel = PANELS[kind](run, key);
        panels.set(key, { panel, seen, visible: false, loaded: '', busy: false });
        grid.append(panel.el);
        observer.observe(panel.el);
      }
    }
    if (panels.size === 0) container.append(empty);
    else empty.remove();
  };
  showIndex((run.metadata as { media?: MediaIndex }).media ?? {});

  let timer: ReturnType<typeof setTimeout> | null = null;
  const poll = () => {
    timer = setTimeout(() => void api.run(run.id).then((now) => {
      if (stopped) return;
      showIndex((now.metadata as { media?: MediaIndex }).media ?? {});
      if (now.state === 'running') poll();
    }, () => !stopped && poll()), POLL_MS);
  };
  if (run.state === 'running') poll();

  return () => {
    stopped = true;
    if (timer) clearTimeout(timer);
    observer.disconnect();
    panels.forEach((p) => p.panel.destroy());
  };
}
