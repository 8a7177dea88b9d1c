// Saved views (daemon/views through `/api/views`): a name for the page's URL,
// which holds every choice the page made. "Save view" on the runs table, the
// parameter views and the compare page; the list on the runs page.
import { h, clear, append } from './dom.js';
import { get, send, ApiError } from './api.js';

interface SavedView { name: string; url: string; savedAt: string }

/** A name field and a button that save this page's URL as a view. */
export function saveViewControl(): HTMLElement {
  const name = h('input', { type: 'text', id: 'view-name', placeholder: 'name this view', maxlength: '100' });
  const button = h('button', { id: 'save-view' }, 'Save view');
  const said = h('span', { class: 'muted', id: 'save-view-said' });
  const save = async () => {
    said.className = 'muted';
    if (!name.value.trim()) return void (said.textContent = 'give the view a name first');
    try {
      const a = await send<{ saved: SavedView }>('POST', '/api/views', { name: name.value, url: location.pathname + location.search });
      said.textContent = `saved as "${a.saved.name}"`;
      name.value = '';
    } catch (e) {
      said.className = 'error';
      said.textContent = (e as Error).message;
    }
  };
  button.addEventListener('click', () => void save());
  name.addEventListener('keydown', (e) => e.key === 'Enter' && void save());
  return h('span', { class: 'save-view' }, name, button, said);
}

/** The saved views as links, each with × to delete it; nothing when none is saved or the server keeps none. */
export function savedViewsList(): HTMLElement {
  const el = h('div', { id: 'saved-views', class: 'filters' });
  const render = (views: SavedView[]) => {
    clear(el);
    if (views.length === 0) return;
    append(el, h('span', { class: 'muted' }, 'saved views:'), ...views.map((v) => {
      const rm = h('button', { class: 'remove-column', title: `delete the view ${v.name}`, 'aria-label': `delete view ${v.name}` }, '×');
      rm.addEventListener('click', () => void send<{ views: SavedView[] }>('DELETE', `/api/views/${encodeURIComponent(v.name)}`).then((a) => render(a.views), (e: Error) => el.append(h('span', { class: 'error' }, e.message))));
      return h('span', { class: 'chip saved-view', 'data-view': v.name }, h('a', { href: v.url, title: `saved ${v.savedAt}` }, v.name), rm);
    }));
  };
  void get<{ views: SavedView[] }>('/api/views').then((a) => render(a.views), (e: Error) => {
    if (!(e instanceof ApiError && e.status === 404)) el.append(h('span', { class: 'error' }, `saved views: ${e.message}`));
  });
  return el;
}
