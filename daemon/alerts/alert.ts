// One alert: what happened, to which run or group, in words, with the
// evidence (a job's story, a health event); and the bodies a sink gets.
import type { AlertKind } from './config.js';

export interface Alert {
  /** The event's identity: one alert per key and sink (a job's failure is one key for all its ranks and nodes). */
  key: string;
  kind: AlertKind;
  /** When the event happened (seconds since the epoch). */
  at: number;
  project: string;
  group: string;
  runId: string | null;
  /** The node whose daemon sent it (LOGD_NODE or the host name). */
  node: string;
  title: string;
  text: string;
  /** The run's or group's dashboard page, when LOGD_ALERT_LINK_BASE is set. */
  link: string | null;
  /** The event as logd gives it: the job's story (`logd health --json`'s `story`) or the health event. */
  detail: unknown;
}

function slackText(a: Alert): string {
  return `*logd: ${a.title}*\n${a.text}${a.link ? `\n${a.link}` : ''}`;
}

export function alertBody(a: Alert, format: 'json' | 'slack'): unknown {
  if (format === 'slack') return { text: slackText(a) };
  return { source: 'logd', kind: a.kind, at: a.at, project: a.project, group: a.group, runId: a.runId, node: a.node, title: a.title, text: a.text, link: a.link, event: a.detail };
}

/** Many alerts at once (1 000 runs crashing): one post that counts them and names the first ones. */
export function summaryBody(alerts: Alert[], format: 'json' | 'slack'): unknown {
  const kinds = new Map<string, number>();
  for (const a of alerts) kinds.set(a.kind, (kinds.get(a.kind) ?? 0) + 1);
  const counts = [...kinds].map(([k, n]) => `${n} × ${k}`).join(', ');
  const title = `${alerts.length} alerts at once (${counts})`;
  const first = alerts.slice(0, 20).map((a) => `- ${a.title}`).join('\n');
  if (format === 'slack') return { text: `*logd: ${title}*\n${first}${alerts.length > 20 ? `\n… and ${alerts.length - 20} more (logd alerts)` : ''}` };
  return { source: 'logd', kind: 'summary', at: Date.now() / 1000, title, count: alerts.length, alerts: alerts.slice(0, 100).map((a) => ({ kind: a.kind, key: a.key, title: a.title, project: a.project, group: a.group, runId: a.runId })) };
}
