// The HTML the server writes itself: the page shell (the bundled app fills
// it) and the two error pages. Every interpolated value is escaped.
export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

/** `version` (a hash of the bundle) makes the asset URLs change with every build, so browsers may cache them for good. */
function frame(title: string, body: string, version = ''): string {
  const v = version ? `?v=${version}` : '';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<link rel="stylesheet" href="/assets/app.css${v}">
${version ? `<script type="module" src="/assets/app.js${v}"></script>` : ''}
</head><body>${body}</body></html>
`;
}

/** The app's shell: the same for every page URL; the bundle reads location. */
export function shellPage(version: string): string {
  return frame('logd', '<div id="app"><p class="muted">Loading…</p></div>', version);
}

/**
 * An API answer the page will ask for first, carried in the HTML as a data
 * block (never run as script, so the CSP's "no inline script" holds): the
 * page reads it instead of fetching `apiUrl`. `<` is escaped so no text in the
 * answer can close the element.
 */
export function embeddedAnswer(apiUrl: string, body: unknown): string {
  return `<script type="application/json" class="logd-answer" data-url="${escapeHtml(apiUrl)}">${JSON.stringify(body).replace(/</g, '\\u003c')}</script>`;
}

/**
 * The page for a visit without the token: a field to paste it, which goes on
 * to the page asked for (`path` with its query) carrying ?token=, which the
 * server keeps as a cookie and drops from the address. A plain form (GET, no
 * script), so it works under the CSP. `wrong`: a token was given, not this one.
 */
export function unauthorizedPage(path = '/', query: URLSearchParams = new URLSearchParams(), wrong = false): string {
  const hidden = [...query].filter(([k]) => k !== 'token')
    .map(([k, v]) => `<input type="hidden" name="${escapeHtml(k)}" value="${escapeHtml(v)}">`).join('');
  return frame('logd: access token needed', `<main class="error-page" id="unauthorized">
<h1>This dashboard needs its access token</h1>
<p>${wrong ? 'That token is not this dashboard&#39;s (a restarted <code>logd ui</code> has a new one).' : 'The link you opened has no access token, or not the right one.'}</p>
<form id="token-form" method="get" action="${escapeHtml(path)}">
<label for="token">Access token</label>
<input type="password" id="token" name="token" autocomplete="off" required size="36" autofocus>${hidden}
<button type="submit" id="token-submit">Open ${escapeHtml(path.length > 60 ? path.slice(0, 57) + '…' : path)}</button>
</form>
<p>Run <code>logd ui</code> on the machine that serves the dashboard and open the URL it prints, or paste the token
from that URL (the part after <code>?token=</code>) above. This browser keeps the token afterwards, so links without it work here.</p>
</main>`);
}

export function notFoundPage(what: string, detail: string): string {
  return frame(`logd: ${what} not found`, `<main class="error-page" id="not-found">
<h1>${escapeHtml(what)} not found</h1>
<p>${escapeHtml(detail)}</p>
<p><a href="/">All runs</a></p>
</main>`);
}
