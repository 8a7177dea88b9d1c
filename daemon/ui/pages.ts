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

export function unauthorizedPage(): string {
  return frame('logd: access token needed', `<main class="error-page" id="unauthorized">
<h1>This dashboard needs its access token</h1>
<p>The link you opened has no access token, or not the right one.</p>
<p>Run <code>logd ui</code> on the machine that serves the dashboard and open the URL it prints: it ends in <code>?token=…</code>.
The page keeps the token afterwards, so links without it work in that browser.</p>
</main>`);
}

export function notFoundPage(what: string, detail: string): string {
  return frame(`logd: ${what} not found`, `<main class="error-page" id="not-found">
<h1>${escapeHtml(what)} not found</h1>
<p>${escapeHtml(detail)}</p>
<p><a href="/">All runs</a></p>
</main>`);
}
