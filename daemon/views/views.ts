// Saved dashboard views: a name and the page's URL (its path and query, which
// hold every choice the page made: filters, columns, axes, brushes, the
// compared runs). Kept beside the store the dashboard reads: a file in the
// node's data dir, or a table in the shared store. This file: what a view is
// and what may be one.

export interface SavedView { name: string; url: string; savedAt: string }

/** Where views are kept: the local file or the shared store's table. */
export interface ViewStore {
  /** For people: `views.json in /home/me/.local/share/logd`. */
  readonly where: string;
  list(): Promise<SavedView[]>;
  /** Saves `view` under its name, replacing one of the same name. */
  save(view: { name: string; url: string }): Promise<SavedView>;
  /** Whether a view of that name was there. */
  remove(name: string): Promise<boolean>;
  close?(): Promise<void>;
}

export class BadView extends Error {
  override name = 'BadView';
}

export const MAX_VIEWS = 500;
const MAX_NAME = 100;
const MAX_URL = 8000;
/** The dashboard's pages a view may name (web/main.ts routes). */
const PAGE = /^\/(?:|explore|compare|runs\/[^/?#]+|groups\/[^/?#]+)(?:\?[^#]*)?$/;

/** A view as asked to be saved, checked: a name of 1 to 100 characters without control characters, a URL of one of the dashboard's own pages. */
export function checkView(body: unknown): { name: string; url: string } {
  if (!body || typeof body !== 'object' || Array.isArray(body)) throw new BadView('a view is a JSON object {"name": "…", "url": "/…"}');
  const { name, url } = body as { name?: unknown; url?: unknown };
  if (typeof name !== 'string' || name.trim() === '') throw new BadView('a view needs a name');
  const n = name.trim();
  if (n.length > MAX_NAME) throw new BadView(`a view's name is at most ${MAX_NAME} characters (this one has ${n.length})`);
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(n)) throw new BadView("a view's name may not hold control characters");
  if (typeof url !== 'string' || url.length > MAX_URL) throw new BadView(`a view's url is a path of the dashboard of at most ${MAX_URL} characters`);
  // Only this dashboard's own pages: never another site (`//host`, `https:`), so a saved link cannot lead elsewhere.
  if (!PAGE.test(url) || url.startsWith('//') || url.includes('\\')) throw new BadView(`a view's url must be a page of this dashboard (/, /explore, /compare, /runs/ID, /groups/NAME with its query), not ${JSON.stringify(url.slice(0, 80))}`);
  const u = new URL(url, 'http://ui.invalid');
  u.searchParams.delete('token');
  return { name: n, url: u.pathname + (u.search || '') };
}
