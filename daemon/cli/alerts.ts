// `logd alerts`: what was sent, is pending or was given up (read from the
// data dir's alerts/, no daemon needed); `logd alerts test [SINK]`: a sample
// event to each sink of this environment (LOGD_ALERT_WEBHOOK, LOGD_ALERTS),
// and what each receiver answered. docs/alerts.md.
import type { Command } from 'commander';
import { resolvePaths } from '../../src/config.js';
import { alertsConfig, describeTarget } from '../alerts/config.js';
import { Outbox, post } from '../alerts/outbox.js';
import { alertBody } from '../alerts/alert.js';
import { alertsDir, readAlertsStatus, type AlertsStatus } from '../alerts/start.js';

export function alertsStatusLines(s: AlertsStatus | null): string[] {
  if (!s) return ['alerts:    off (set LOGD_ALERT_WEBHOOK or LOGD_ALERTS; docs/alerts.md)'];
  if (s.state === 'off') return [`alerts:    OFF: ${s.problem}`];
  return [`alerts:    on: ${s.sinks.map((k) => `${k.name} (${k.target}, ${k.format})`).join(', ')}`];
}

export function registerAlertsCommands(program: Command, fail: (msg: string, code?: number) => never): void {
  const cmd = program.command('alerts').description('alerts sent, pending and given up (newest first); `logd alerts test` tries the sinks')
    .option('--limit <n>', 'how many to list', '50')
    .option('--json', 'machine-readable output')
    .action((o: { limit: string; json?: boolean }) => {
      const dir = alertsDir(resolvePaths().dataDir);
      const items = Outbox.list(dir).slice(0, Math.max(1, Number(o.limit) || 50));
      if (o.json) {
        console.log(JSON.stringify(items.map((i) => ({ state: i.state, sink: i.sink, attempts: i.attempts, last: i.last ?? null, createdAt: i.createdAt, sentAt: i.sentAt ?? null, ...i.alert })), null, 2));
        return;
      }
      for (const l of alertsStatusLines(readAlertsStatus(resolvePaths().dataDir))) console.log(l);
      if (items.length === 0) {
        console.log('no alerts yet');
        return;
      }
      for (const i of items) {
        const when = new Date(i.createdAt * 1000).toISOString().replace('T', ' ').slice(0, 19);
        console.log(`${when}  ${i.state.padEnd(7)}  ${i.sink}  ${i.alert.title}  (${i.attempts} attempt${i.attempts === 1 ? '' : 's'}${i.last ? `; last: ${i.last}` : ''})`);
      }
    });
  cmd.command('test').description('send a sample event to each sink of this environment (or the one named) and say what each answered')
    .argument('[sink]', 'a sink name (LOGD_ALERTS file), or webhook for LOGD_ALERT_WEBHOOK')
    .action(async (name: string | undefined) => {
      let cfg;
      try {
        cfg = alertsConfig(process.env);
      } catch (e) {
        fail((e as Error).message, 2);
      }
      const sinks = cfg.sinks.filter((s) => !name || s.name === name);
      if (cfg.sinks.length === 0) fail('no alert sink is configured: set LOGD_ALERT_WEBHOOK=URL or LOGD_ALERTS=FILE (docs/alerts.md)', 2);
      if (sinks.length === 0) fail(`no sink named ${JSON.stringify(name)}; the sinks: ${cfg.sinks.map((s) => s.name).join(', ')}`, 2);
      let bad = 0;
      for (const s of sinks) {
        const body = alertBody({ key: `test|${Date.now()}`, kind: 'job failed', at: Date.now() / 1000, project: 'logd-test', group: 'logd-test', runId: null, node: 'this node',
          title: 'a test alert from logd alerts test', text: 'failed: rank 2 (pid 12345, this node) was killed by SIGKILL at step 277 (a sample)', link: null, detail: { test: true } }, s.format);
        const answer = await post(s, body);
        if (!answer.ok) bad++;
        console.log(`${s.name} (${describeTarget(s)}, ${s.format}): ${answer.ok ? 'delivered' : 'NOT delivered'}: ${answer.say}`);
      }
      if (bad) process.exit(1);
    });
}
