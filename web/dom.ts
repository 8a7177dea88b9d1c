// Building elements from data: every string becomes a text node, every
// attribute goes through setAttribute; nothing here parses HTML.
type Child = Node | string | number | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string | boolean | undefined> = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) continue;
    el.setAttribute(k, v === true ? '' : v);
  }
  append(el, ...children);
  return el;
}

export function append(el: Element, ...children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    el.append(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
}

export function clear(el: Element): void {
  el.replaceChildren();
}

/** A link to a page of the app; path segments are encoded. */
export function link(path: string[], text: Child, attrs: Record<string, string> = {}): HTMLAnchorElement {
  return h('a', { href: '/' + path.map(encodeURIComponent).join('/'), ...attrs }, text);
}

export function stateBadge(state: string): HTMLSpanElement {
  return h('span', { class: `state state-${state.replace(/[^a-z]/g, '')}`, 'data-state': state }, state);
}

export function ago(iso: string | null): string {
  if (!iso) return '';
  const s = (Date.now() - Date.parse(iso)) / 1000;
  if (s < 60) return `${Math.max(0, Math.round(s))} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return new Date(iso).toISOString().slice(0, 16).replace('T', ' ');
}

export function fmt(v: unknown): string {
  if (typeof v === 'number') return Number.isInteger(v) ? String(v) : Math.abs(v) >= 1e5 || (Math.abs(v) < 1e-3 && v !== 0) ? v.toExponential(3) : String(Math.round(v * 1e4) / 1e4);
  if (typeof v === 'string') return v;
  return JSON.stringify(v);
}

/** A key/value table of a JSON object (config, summary, metadata). */
export function objectTable(o: Record<string, unknown>, cls = 'kv'): HTMLElement {
  const keys = Object.keys(o);
  if (keys.length === 0) return h('p', { class: 'muted' }, 'none');
  return h('table', { class: cls }, h('tbody', {}, ...keys.sort().map((k) => h('tr', {}, h('th', {}, k), h('td', {}, fmt(o[k]))))));
}

export function debounce(ms: number, f: () => void): () => void {
  let t: ReturnType<typeof setTimeout> | null = null;
  return () => {
    if (t) return;
    t = setTimeout(() => ((t = null), f()), ms);
  };
}
