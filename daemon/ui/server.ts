// The dashboard's HTTP server: the page (bundled at build time into
// dist/web, served from the package), the JSON API and the live feed, all
// behind one random token. docs/dashboard.md (Dashboard API) lists the API.
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { createHash, randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { sameSecret } from '../../src/token.js';
import { RunNotFound, type QuerySource } from '../query/index.js';
import { Api, HttpError, runJson } from './api.js';
import type { RunJson } from './run-index.js';
import { serveLive } from './live.js';
import { explore } from './explore.js';
import { checkView, BadView, type ViewStore } from '../views/views.js';
import { alertsOf } from './alerts.js';
import { shellPage, unauthorizedPage, notFoundPage, embeddedAnswer } from './pages.js';

export interface UiOptions {
  source: QuerySource;
  port: number;
  host: string;
  /** Given by a test or a config; a random one otherwise. */
  token?: string;
  log?: (line: string) => void;
  /** Where saved views are kept (daemon/views); none: the page offers no saving. */
  views?: ViewStore;
  /** The node's data dir, whose alerts the run and group pages list (daemon/ui/alerts.ts); none: no list. */
  alertsDataDir?: string | null;
}

export interface UiServer {
  url: string;
  token: string;
  port: number;
  close(): Promise<void>;
}

/** Where the bundle lands: dist/web, two folders up from dist/daemon/ui. */
export const WEB_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'web');

const ASSET_TYPES: Record<string, string> = { '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8', '.map': 'application/json' };

export async function startUi(o: UiOptions): Promise<UiServer> {
  if (!fs.existsSync(path.join(WEB_DIR, 'app.js'))) {
    throw new Error(`the dashboard's page is not built (${path.join(WEB_DIR, 'app.js')} is missing); run \`make build\` (or \`npm run build\`) first`);
  }
  const token = o.token ?? randomBytes(24).toString('base64url');
  const version = createHash('sha256').update(fs.readFileSync(path.join(WEB_DIR, 'app.js'))).update(fs.readFileSync(path.join(WEB_DIR, 'app.css'))).digest('hex').slice(0, 12);
  const shell = shellPage(version);
  const log = o.log ?? (() => {});
  const api = new Api(o.source);
  const server = http.createServer((req, res) => {
    handle(req, res).catch((e: Error) => {
      // No daemon to read through (stopped with `logd stop`, or not coming up): 503, said once per cause, no stack.
      const noDaemon = e.name === 'DaemonStartError';
      const status = e instanceof HttpError ? e.status : noDaemon ? 503 : 500;
      if (noDaemon && e.message !== lastNoDaemon) log(`ui: ${(lastNoDaemon = e.message)}`);
      if (status === 500) log(`ui: ${req.method} ${req.url?.slice(0, 200)} failed: ${e.stack ?? e.message}`);
      if (!res.headersSent) sendJson(res, status, { error: status >= 500 ? `the dashboard could not answer: ${e.message}` : e.message });
      else res.end();
    });
  });
  let cookieName = 'logd_ui';
  let lastNoDaemon = '';

  function authorised(req: http.IncomingMessage, url: URL): boolean {
    const given = bearer(req) ?? url.searchParams.get('token') ?? cookie(req, cookieName);
    return given !== null && sameSecret(given, token);
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://ui.invalid');
    const parts = url.pathname.split('/').slice(1).map(decodeSegment);
    const write = req.method === 'POST' || req.method === 'DELETE';
    // Writes: saved views, and runs edited or removed (POST /api/manage/edit|delete), only from this dashboard's own
    // page (or a script with the token header): a page of another site is refused by its Origin, and cannot send
    // JSON here without a preflight this server never answers.
    const writable = parts[0] === 'api' && (parts[1] === 'views' || (parts[1] === 'manage' && req.method === 'POST'));
    const only = 'the dashboard only answers GET, except POST and DELETE of /api/views and POST of /api/manage/edit and /api/manage/delete';
    if (write && !writable) return sendJson(res, 405, { error: only });
    if (!write && req.method !== 'GET' && req.method !== 'HEAD') return sendJson(res, 405, { error: only });
    if (write && req.headers.origin !== undefined && req.headers.origin !== `http://${req.headers.host}`) return sendJson(res, 403, { error: 'a change is made from the dashboard\'s own page, not from another site' });
    if (parts[0] === 'assets') return sendAsset(res, parts.slice(1).join('/'), url.searchParams.get('v') === version);
    if (parts[0] === 'favicon.ico') return void res.writeHead(204).end();
    const isApi = parts[0] === 'api';
    if (!authorised(req, url)) {
      if (isApi) return sendJson(res, 401, { error: 'no access token, or a wrong one: run `logd ui` and open the URL it prints (it carries ?token=…), or send Authorization: Bearer <token>' });
      // A field to paste the token, then on to the page asked for (a deep link opened in another browser).
      return sendHtml(res, 401, unauthorizedPage(url.pathname, url.searchParams, url.searchParams.has('token')));
    }
    if (!isApi) {
      if (url.searchParams.has('token')) {
        // The page keeps the token (a cookie for this host and port) and the address bar drops it.
        url.searchParams.delete('token');
        res.writeHead(303, {
          'set-cookie': `${cookieName}=${token}; Path=/; HttpOnly; SameSite=Strict; Max-Age=31536000`,
          location: url.pathname + (url.search || ''),
        });
        return void res.end();
      }
      return page(parts, url.searchParams, res);
    }
    const q = url.searchParams;
    const [, what, id, sub] = parts;
    if (what === 'runs' && id === undefined) return sendJson(res, 200, await api.runs(q));
    if (what === 'runs' && id && sub === undefined) return sendJson(res, 200, await api.run(id));
    if (what === 'runs' && id && sub === 'history') return sendJson(res, 200, await api.history(id, q));
    if (what === 'runs' && id && sub === 'keys') return sendJson(res, 200, await api.keys(id, q));
    if (what === 'runs' && id && sub === 'system') return sendJson(res, 200, await api.systemOf(id, q));
    if (what === 'runs' && id && sub === 'media' && parts.length === 4) return sendJson(res, 200, await api.media(id, q));
    if (what === 'runs' && id && sub === 'images' && parts.length === 5) return sendImage(res, await api.image(id, parts[4], q.get('download') === '1'));
    if (what === 'runs' && id && sub === 'console' && parts.length === 4) return sendJson(res, 200, await api.console(id, q));
    if (what === 'groups' && id !== undefined && sub === undefined) return sendJson(res, 200, await api.group(id, q));
    if (what === 'groups' && id !== undefined && sub === 'console' && parts.length === 4) return sendJson(res, 200, await api.groupConsole(id, q));
    if (what === 'groups' && id !== undefined && sub === 'health') return sendJson(res, 200, await api.groupHealth(id, q));
    if (what === 'views') return views(req, res, id);
    if (what === 'manage' && (id === 'edit' || id === 'delete') && sub === undefined) return manage(req, res, id);
    if (what === 'aggregate' && id === undefined) return sendJson(res, 200, await api.aggregate(q));
    if (what === 'alerts' && id === undefined) return sendJson(res, 200, alertsOf(o.alertsDataDir ?? null, q));
    if (what === 'explore' && id === undefined) return sendJson(res, 200, await explore(api.index, async (id) => runJson(await o.source.getRun(id)) as RunJson, q));
    if (what === 'live' && id === undefined) return serveLive(api, q, req, res);
    throw new HttpError(404, `no such API path: ${url.pathname.slice(0, 200)}; docs/dashboard.md (Dashboard API) lists them`);
  }

  /**
   * POST /api/manage/edit {ids, name?, addTags?, removeTags?, notes?} and POST /api/manage/delete {ids}: the
   * selection's runs changed as `logd rename`/`tag`/`note`/`rm` change them, in the store this dashboard reads.
   * A removal checks every run first: one that is running refuses the whole request, and nothing is removed.
   */
  async function manage(req: http.IncomingMessage, res: http.ServerResponse, action: 'edit' | 'delete'): Promise<void> {
    const src = o.source;
    if (!src.editRun || !src.removeRun) throw new HttpError(405, `${src.where} cannot change runs from here`);
    if (!/^application\/json\b/i.test(req.headers['content-type'] ?? '')) throw new HttpError(415, 'send the change as JSON (content-type: application/json)');
    let ask: { ids?: unknown; name?: unknown; addTags?: unknown; removeTags?: unknown; notes?: unknown };
    try {
      ask = JSON.parse(await readBody(req, 256 * 1024)) as typeof ask;
    } catch (e) {
      if (e instanceof SyntaxError) throw new HttpError(400, `the change is not JSON: ${e.message}`);
      throw e;
    }
    const strings = (v: unknown, what: string): string[] => {
      if (v === undefined) return [];
      if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) throw new HttpError(400, `${what} must be a list of strings`);
      return v as string[];
    };
    const ids = strings(ask.ids, 'ids');
    if (ids.length === 0) throw new HttpError(400, 'ids: name at least one run');
    if (ids.length > 1000) throw new HttpError(400, `ids: at most 1000 runs at once (${ids.length} given)`);
    for (const k of ['name', 'notes'] as const) if (ask[k] !== undefined && typeof ask[k] !== 'string') throw new HttpError(400, `${k} must be a string`);
    if (ask.name !== undefined && ids.length > 1) throw new HttpError(400, 'name: rename one run at a time');
    const known = await Promise.all(ids.map((id) => src.getRun(id).catch((e: Error) => {
      throw e instanceof RunNotFound ? new HttpError(404, e.message) : e;
    })));
    try {
      if (action === 'delete') {
        const running = known.find((r) => r.state === 'running' || r.state === 'finishing');
        if (running) throw new HttpError(409, `run ${running.id} (${running.name}) is ${running.state}: a run can be removed once it has ended; nothing was removed`);
        for (const id of ids) await src.removeRun(id);
        return sendJson(res, 200, { removed: ids, where: src.where });
      }
      const edit = { name: ask.name as string | undefined, notes: ask.notes as string | undefined, addTags: strings(ask.addTags, 'addTags'), removeTags: strings(ask.removeTags, 'removeTags') };
      const runs: Array<{ id: string; name: string; tags: string[]; notes: string }> = [];
      for (const id of ids) runs.push({ id, ...(await src.editRun(id, edit)) });
      return sendJson(res, 200, { runs, where: src.where });
    } catch (e) {
      if (e instanceof HttpError) throw e;
      const m = (e as Error).message.replace(/^(editRun|deleteRun): /, '');
      // What the store refused (a bad name, tag or notes: INVALID_ARGUMENT; a running run: FAILED_PRECONDITION) is
      // the asker's to fix; anything else is the server's.
      const code = (e as { code?: number }).code;
      if (e instanceof RunNotFound) throw new HttpError(404, m);
      throw new HttpError(code === 3 || code === 9 || /cannot be empty/.test(m) ? 400 : 500, m);
    } finally {
      api.index.forget();
    }
  }

  /** GET /api/views, POST /api/views {name, url}, DELETE /api/views/{name}. */
  async function views(req: http.IncomingMessage, res: http.ServerResponse, name: string | undefined): Promise<void> {
    const store = o.views;
    if (!store) throw new HttpError(404, 'this dashboard keeps no saved views');
    if (req.method === 'GET' && name === undefined) return sendJson(res, 200, { where: store.where, views: await store.list() });
    if (req.method === 'POST' && name === undefined) {
      if (!/^application\/json\b/i.test(req.headers['content-type'] ?? '')) throw new HttpError(415, 'send the view as JSON (content-type: application/json)');
      const body = await readBody(req, 16 * 1024);
      let view;
      try {
        view = checkView(JSON.parse(body));
      } catch (e) {
        if (e instanceof BadView) throw new HttpError(400, e.message);
        if (e instanceof SyntaxError) throw new HttpError(400, `the view is not JSON: ${e.message}`);
        throw e;
      }
      const saved = await store.save(view).catch((e: Error) => {
        throw e instanceof BadView ? new HttpError(409, e.message) : e;
      });
      return sendJson(res, 200, { saved, views: await store.list() });
    }
    if (req.method === 'DELETE' && name !== undefined) {
      if (!(await store.remove(name))) throw new HttpError(404, `no saved view is named ${JSON.stringify(name.slice(0, 100))}`);
      return sendJson(res, 200, { views: await store.list() });
    }
    throw new HttpError(405, 'views: GET /api/views, POST /api/views {name, url}, DELETE /api/views/{name}');
  }

  async function page(parts: string[], params: URLSearchParams, res: http.ServerResponse): Promise<void> {
    const [what, id] = parts;
    if (what === '' && parts.length === 1) return runsList(params, res);
    if ((what === 'compare' || what === 'explore') && parts.length === 1) return sendHtml(res, 200, shell);
    if (what === 'runs' && id && parts.length === 2) {
      try {
        const r = await api.getRun(id);
        // The page will ask for the metric names as soon as its script runs: start reading them now.
        void api.firstLoads.keyNames(id, Number(r.historyRows)).catch(() => {});
      } catch (e) {
        if (e instanceof HttpError && e.status === 404) return sendHtml(res, 404, notFoundPage('Run', e.message));
        throw e;
      }
      return sendHtml(res, 200, shell);
    }
    if (what === 'groups' && id !== undefined && parts.length === 2) {
      const g = await o.source.listRuns({ group: id, limit: 1 });
      if (g.total === 0 || id === '') return sendHtml(res, 404, notFoundPage('Group', `no run belongs to the group ${JSON.stringify(id)} in ${o.source.where}.`));
      return sendHtml(res, 200, shell);
    }
    return sendHtml(res, 404, notFoundPage('Page', `there is no page at /${parts.join('/')}.`));
  }

  /**
   * The runs list with its first page inside: the shell goes out at once (the
   * browser fetches the bundle meanwhile), the page's first /api/runs answer
   * follows in the same response, so the bundle finds its data when it runs
   * rather than asking only then. The query is the one web/runs-page.ts makes
   * of the same URL.
   */
  async function runsList(params: URLSearchParams, res: http.ServerResponse): Promise<void> {
    const end = shell.lastIndexOf('</body>');
    res.writeHead(200, HTML_HEADERS);
    res.write(shell.slice(0, end));
    const q = new URLSearchParams();
    for (const k of ['text', 'project', 'state', 'tag', 'filter', 'sort']) if (params.get(k)) q.set(k, params.get(k)!);
    if (params.get('sort') && params.get('desc') === '1') q.set('desc', '1');
    const offset = Number(params.get('offset') ?? 0) || 0;
    if (offset) q.set('offset', String(offset));
    q.set('limit', String(RUNS_PAGE));
    let answer = '';
    try {
      answer = embeddedAnswer(`/api/runs?${q}`, await api.runs(q));
    } catch (e) {
      // The page asks /api/runs itself and shows what went wrong.
      if (!(e instanceof HttpError)) log(`ui: the runs list's first page failed: ${(e as Error).message}`);
    }
    res.end(answer + shell.slice(end));
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port, o.host, () => resolve());
  });
  const port = (server.address() as { port: number }).port;
  cookieName = `logd_ui_${port}`;
  const shownHost = o.host.includes(':') ? `[${o.host}]` : o.host === '0.0.0.0' ? '127.0.0.1' : o.host;
  return {
    url: `http://${shownHost}:${port}/?token=${token}`, token, port,
    close: () => new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
  };
}

function decodeSegment(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    throw new HttpError(400, `the path segment ${JSON.stringify(s.slice(0, 80))} is not valid percent-encoding`);
  }
}

function bearer(req: http.IncomingMessage): string | null {
  const h = req.headers.authorization;
  return h && /^Bearer /i.test(h) ? h.slice(7).trim() : null;
}

/** A request's body as text, at most `max` bytes (413 past it). */
function readBody(req: http.IncomingMessage, max: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let size = 0;
    req.on('data', (d: Buffer) => {
      size += d.length;
      // Past the limit: answered at once; the rest is read and dropped, so the answer reaches the client.
      if (size > max) reject(new HttpError(413, `a view is at most ${max} bytes`));
      else parts.push(d);
    });
    req.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    req.on('error', reject);
  });
}

function cookie(req: http.IncomingMessage, name: string): string | null {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const i = part.indexOf('=');
    if (i > 0 && part.slice(0, i).trim() === name) return part.slice(i + 1).trim();
  }
  return null;
}

const SECURITY_HEADERS = {
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  // Everything the page loads comes from this server; no inline script runs.
  'content-security-policy': "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; object-src 'none'; frame-ancestors 'none'",
};

function sendJson(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', 'content-length': Buffer.byteLength(text), ...SECURITY_HEADERS });
  res.end(text);
}

/**
 * An image, content-addressed (its sha256 is in the URL), so kept for a
 * year; private, as it came with the token. A browser that opened it on its
 * own would still only show it: typed as what its bytes were checked to be,
 * never sniffed, and under a policy that allows nothing else.
 */
function sendImage(res: http.ServerResponse, img: { data: Uint8Array; type: string; attachment: string | null }): void {
  res.writeHead(200, {
    ...(img.attachment ? { 'content-disposition': `attachment; filename="${img.attachment}"` } : {}),
    'content-type': img.type, 'content-length': img.data.byteLength, 'cache-control': 'private, max-age=31536000, immutable',
    'x-content-type-options': 'nosniff', 'referrer-policy': 'no-referrer', 'content-security-policy': "default-src 'none'",
  });
  res.end(img.data);
}

const HTML_HEADERS = { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store', ...SECURITY_HEADERS };
/** The runs list's page size: web/runs-page.ts asks for as many. */
const RUNS_PAGE = 100;

function sendHtml(res: http.ServerResponse, status: number, html: string): void {
  res.writeHead(status, HTML_HEADERS);
  res.end(html);
}

function sendAsset(res: http.ServerResponse, name: string, versioned: boolean): void {
  const file = path.join(WEB_DIR, name);
  const type = ASSET_TYPES[path.extname(name)];
  if (!type || !file.startsWith(WEB_DIR + path.sep) || !fs.existsSync(file)) {
    res.writeHead(404, { 'content-type': 'text/plain' }).end(`no asset ${name.slice(0, 100)}`);
    return;
  }
  res.writeHead(200, { 'content-type': type, 'cache-control': versioned ? 'public, max-age=31536000, immutable' : 'no-cache', ...SECURITY_HEADERS });
  fs.createReadStream(file).pipe(res);
}
