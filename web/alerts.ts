// The alerts of a run or a group (GET /api/alerts): what this node's daemon sent, still tries to send, or gave
// up on, newest first, under the run's Info tab and the group's health strip. Nothing when alerts are off and
// none were ever queued; "none so far" when they are on.
import { h, ago } from './dom.js';
import { get } from './api.js';

interface AlertRow {
  kind: string; title: string; text: string; sink: string; state: 'pending' | 'sent' | 'failed';
  attempts: number; createdAt: number; sentAt: number | null; last: string | null;
}

const STATE_WORDS: Record<AlertRow['state'], string> = { sent: 'sent', pending: 'sending', failed: 'given up' };

export function alertsSection(of: { run: string } | { group: string }): HTMLElement {
  const el = h('section', { id: 'alerts', class: 'alerts', hidden: true });
  void get<{ configured: boolean; total: number; alerts: AlertRow[] }>('/api/alerts', of).then((a) => {
    if (!a.configured && a.alerts.length === 0) return;
    el.hidden = false;
    el.append(h('h2', {}, `Alerts${a.total ? ` (${a.total})` : ''}`));
    if (a.alerts.length === 0) return void el.append(h('p', { class: 'muted' }, 'none so far'));
    const iso = (s: number) => new Date(s * 1000).toISOString();
    el.append(h('table', { class: 'alerts-table' },
      h('thead', {}, h('tr', {}, ...['when', 'kind', 'alert', 'to', 'state'].map((c) => h('th', {}, c)))),
      h('tbody', {}, ...a.alerts.map((r) => h('tr', { class: `alert-${r.state}`, 'data-kind': r.kind },
        h('td', { title: iso(r.createdAt) }, ago(iso(r.createdAt))),
        h('td', {}, r.kind),
        h('td', {}, h('strong', {}, r.title), r.text ? h('div', { class: 'muted' }, r.text) : ''),
        h('td', {}, r.sink),
        h('td', { title: r.last ?? '' }, `${STATE_WORDS[r.state]}${r.attempts > 1 ? ` after ${r.attempts} tries` : ''}${r.state !== 'sent' && r.last ? `: ${r.last}` : ''}`))))));
  }).catch(() => {
    /* an older server without /api/alerts: no section */
  });
  return el;
}
