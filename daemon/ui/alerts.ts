// GET /api/alerts?run=ID | ?group=NAME: the alerts this node's daemon queued for a run or a group (sent, pending
// or given up), newest first, as `logd alerts` lists them (daemon/alerts/outbox.ts). They live in the node's data
// dir, so a dashboard of the shared store shows this node's only. Never the sink's URL or command: its name.
import { Outbox } from '../alerts/outbox.js';
import { readAlertsStatus, alertsDir } from '../alerts/start.js';
import { HttpError } from './params.js';

const MAX = 200;

export function alertsOf(dataDir: string | null, q: URLSearchParams): unknown {
  const run = q.get('run');
  const group = q.get('group');
  if (!run && !group) throw new HttpError(400, 'alerts: give ?run=ID or ?group=NAME');
  if (!dataDir) return { configured: false, alerts: [] };
  const status = readAlertsStatus(dataDir);
  const all = Outbox.list(alertsDir(dataDir)).filter((i) => (run ? i.alert.runId === run : i.alert.group === group));
  return {
    configured: status?.state === 'on', problem: status?.problem ?? null, total: all.length,
    alerts: all.slice(0, MAX).map((i) => ({
      kind: i.alert.kind, title: i.alert.title, text: i.alert.text, runId: i.alert.runId, group: i.alert.group, sink: i.sink,
      state: i.state, attempts: i.attempts, createdAt: i.createdAt, sentAt: i.sentAt ?? null, last: i.last ?? null,
    })),
  };
}
