// Alerts as the daemon starts them (daemon/daemon.ts): the configuration of
// its environment, or, when that is wrong, alerts off and why (the daemon
// runs on: training never waits on alerts). What it decided is written to
// $LOGD_DIR/alerts/status.json for `logd status`, URLs masked.
import fs from 'node:fs';
import path from 'node:path';
import type { RunInfo } from '../../src/wire.js';
import { alertsConfig, describeTarget, AlertsConfigError } from './config.js';
import os from 'node:os';
import { Outbox } from './outbox.js';
import type { SharedJobs } from './shared-jobs.js';
import { parseStoreUrl } from '../upload/url.js';
import { Alerts, type RuleRun } from './alerts.js';

export interface AlertsStatus {
  state: 'on' | 'off';
  problem: string | null;
  sinks: Array<{ name: string; target: string; format: string; events: string[] }>;
}

export function alertsDir(dataDir: string): string {
  return path.join(dataDir, 'alerts');
}

export function readAlertsStatus(dataDir: string): AlertsStatus | null {
  try {
    return JSON.parse(fs.readFileSync(path.join(alertsDir(dataDir), 'status.json'), 'utf8')) as AlertsStatus;
  } catch {
    return null;
  }
}

function writeStatus(dataDir: string, s: AlertsStatus): void {
  try {
    fs.mkdirSync(alertsDir(dataDir), { recursive: true, mode: 0o700 });
    fs.writeFileSync(path.join(alertsDir(dataDir), 'status.json'), JSON.stringify(s), { mode: 0o600 });
  } catch {
    /* a full disk: status shows nothing */
  }
}

export function startAlerts(dataDir: string, env: NodeJS.ProcessEnv, o: { groupRuns: (project: string, group: string) => RunInfo[]; openRuns?: () => RuleRun[]; log: (m: string) => void; sharedUrl?: string | null; node?: string }): Alerts | null {
  let cfg;
  try {
    cfg = alertsConfig(env);
  } catch (e) {
    const why = e instanceof AlertsConfigError ? e.message : `alerts: ${(e as Error).message}`;
    o.log(`alerts: off: ${why}`);
    writeStatus(dataDir, { state: 'off', problem: why, sinks: [] });
    return null;
  }
  if (cfg.sinks.length === 0) {
    fs.rmSync(path.join(alertsDir(dataDir), 'status.json'), { force: true });
    return null;
  }
  const giveUp = Number(env.LOGD_ALERT_GIVEUP_MS);
  const outbox = new Outbox(alertsDir(dataDir), cfg.sinks, { giveUpMs: Number.isFinite(giveUp) && giveUp > 0 ? giveUp : 15 * 60_000, log: o.log });
  outbox.start();
  writeStatus(dataDir, { state: 'on', problem: null, sinks: cfg.sinks.map((s) => ({ name: s.name, target: describeTarget(s), format: s.format, events: s.kinds })) });
  o.log(`alerts: on: ${cfg.sinks.map((s) => `${s.name} (${describeTarget(s)}, ${s.format})`).join(', ')}; rules: ${cfg.rules.map((r) => [r.metric, r.when].filter(Boolean).join(" ")).join(', ') || 'none'}`);
  // With a shared store, a job over several nodes is told once (shared-jobs.ts).
  const shared = o.sharedUrl ? new LazySharedJobs(o.sharedUrl, o.node ?? (env.LOGD_NODE || os.hostname())) : null;
  return new Alerts(cfg, outbox, { ...o, shared });
}

/**
 * The shared store's jobs (shared-jobs.ts), its module and PostgreSQL's client loaded at the first event that asks:
 * a daemon's start does not pay for them (pg's module graph is some 45 ms). The URL is checked at once, as before.
 */
class LazySharedJobs implements SharedJobs {
  private got: Promise<SharedJobs> | null = null;

  constructor(private readonly url: string, private readonly node: string) {
    parseStoreUrl(url);
  }

  private jobs(): Promise<SharedJobs> {
    return (this.got ??= import('./shared-jobs.js').then((m) => new m.PgSharedJobs(this.url, this.node)));
  }

  async groupRuns(project: string, group: string): Promise<RunInfo[]> {
    return (await this.jobs()).groupRuns(project, group);
  }

  async claim(key: string): Promise<{ won: boolean; by: string }> {
    return (await this.jobs()).claim(key);
  }

  async close(): Promise<void> {
    if (this.got) await (await this.got).close();
  }
}
