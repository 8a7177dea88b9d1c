// Where alerts go (docs/alerts.md): LOGD_ALERT_WEBHOOK=URL (every event, as
// generic JSON) and/or LOGD_ALERTS=FILE (sinks with filters). A webhook URL is
// a secret (Slack's holds its token): it comes from the environment or the
// file only, never argv, and is shown masked (maskUrl) everywhere.
import fs from 'node:fs';

export const EVENT_KINDS = ['job failed', 'run crashed', 'job stalled', 'stalled', 'straggler', 'recovered', 'run alert', 'metric', 'run finished'] as const;
export type AlertKind = (typeof EVENT_KINDS)[number];
/** Sent unless a sink lists its own: every failure and health event, not `run finished`. */
export const DEFAULT_KINDS: AlertKind[] = ['job failed', 'run crashed', 'job stalled', 'stalled', 'straggler', 'recovered', 'run alert', 'metric'];

/**
 * A rule on a metric's latest value, checked every 2 s on the open runs' summaries (never on the ingest path):
 * `non-finite` (NaN or ±inf), or a comparison (`> 10`, `<= 0.5`); `afterStep` holds it back until the run is past
 * that step. It fires once per run.
 */
export interface MetricRule {
  /** '' for `no new row`: any metric. */
  metric: string;
  when: string;
  /** `silent`: `no new row for 10 min` (value: the seconds). */
  op: 'non-finite' | '>' | '>=' | '<' | '<=' | 'silent';
  value: number;
  afterStep: number;
}

/** Without a rules list: a metric named `loss` that turns NaN or ±inf. */
export const DEFAULT_RULES: MetricRule[] = [{ metric: 'loss', when: 'non-finite', op: 'non-finite', value: 0, afterStep: -1 }];

export function parseRule(r: unknown, where: string): MetricRule {
  if (!r || typeof r !== 'object' || Array.isArray(r)) throw new AlertsConfigError(`${where}: a rule is {"metric": NAME, "when": "non-finite" | "> 10" | "< 0.5", "after_step": N}`);
  const o = r as Record<string, unknown>;
  const unknown = Object.keys(o).filter((k) => !['metric', 'when', 'after_step'].includes(k));
  if (unknown.length) throw new AlertsConfigError(`${where}: unknown key(s) ${unknown.join(', ')}; known: metric, when, after_step`);
  const when = typeof o.when === 'string' ? o.when.trim() : '';
  const afterStep = o.after_step === undefined ? -1 : Number(o.after_step);
  if (!Number.isInteger(afterStep) || afterStep < -1) throw new AlertsConfigError(`${where}: after_step must be a whole step`);
  const silent = /^no new rows? for\s+(\d+(?:\.\d+)?)\s*(s|sec|secs|seconds?|m|min|mins|minutes?|h|hours?)$/i.exec(when);
  if (silent) {
    if (o.metric !== undefined) throw new AlertsConfigError(`${where}: "no new row for …" watches every metric of a run: leave metric out`);
    const unit = silent[2][0].toLowerCase();
    const seconds = Number(silent[1]) * (unit === 'h' ? 3600 : unit === 'm' ? 60 : 1);
    if (!(seconds >= 10)) throw new AlertsConfigError(`${where}: "no new row for …" needs 10 s or more (the rules are checked every 2 s)`);
    return { metric: '', when, op: 'silent', value: seconds, afterStep };
  }
  if (typeof o.metric !== 'string' || !o.metric) throw new AlertsConfigError(`${where}: metric must name a metric (or "when": "no new row for 10 min" without one)`);
  if (when === 'non-finite') return { metric: o.metric, when, op: 'non-finite', value: 0, afterStep };
  const m = /^(>=|<=|>|<)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?)$/i.exec(when);
  if (!m) throw new AlertsConfigError(`${where}: when must be "non-finite", a comparison such as "> 10" or "< 0.5", or "no new row for 10 min", not ${JSON.stringify(when)}`);
  return { metric: o.metric, when, op: m[1] as MetricRule['op'], value: Number(m[2]), afterStep };
}

export interface Sink {
  /** A short name for lists and `logd alerts test NAME`. */
  name: string;
  /** The webhook's URL; '' for a command sink. */
  url: string;
  /**
   * A command sink: a shell command (`/bin/sh -c`, as `--on-stall`) run once per alert with the alert's JSON on
   * stdin and LOGD_ALERT_* variables; exit 0 is delivered, anything else is retried like a failed POST. null for
   * a webhook.
   */
  command: string | null;
  /** `json`: the event as logd gives it; `slack`: {"text": …}, which Slack, Mattermost and Teams' incoming webhooks take. */
  format: 'json' | 'slack';
  kinds: AlertKind[];
  /** Only these projects / groups, when given. */
  projects: string[] | null;
  groups: string[] | null;
  /** How long one POST may take (default 10 s). */
  timeoutMs: number;
}

export interface AlertsConfig {
  sinks: Sink[];
  rules: MetricRule[];
  /** A dashboard's address (LOGD_ALERT_LINK_BASE, `https://host:port`): alerts link to the run's or group's page under it. */
  linkBase: string | null;
}

export class AlertsConfigError extends Error {
  override name = 'AlertsConfigError';
}

/** What a sink is, for logs, `logd status` and errors: a webhook's masked URL, or "a command" (never the command, which may hold a token too). */
export function describeTarget(s: Pick<Sink, 'url' | 'command'>): string {
  return s.command !== null ? 'a command' : maskUrl(s.url);
}

/** `https://hooks.slack.com/…`: scheme and host only. */
export function maskUrl(u: string): string {
  try {
    const p = new URL(u);
    return `${p.protocol}//${p.host}/…`;
  } catch {
    return '(a URL that does not parse)';
  }
}

function checkUrl(u: unknown, where: string): string {
  if (typeof u !== 'string' || u === '') throw new AlertsConfigError(`${where}: url must be a non-empty string (or url_env naming a variable that holds it)`);
  let p: URL;
  try {
    p = new URL(u);
  } catch {
    throw new AlertsConfigError(`${where}: the url does not parse as a URL (${maskUrl(u)})`);
  }
  if (p.protocol !== 'http:' && p.protocol !== 'https:') throw new AlertsConfigError(`${where}: the url must be http:// or https://, not ${p.protocol}`);
  return u;
}

/**
 * Where JSON text first goes wrong (a character offset): a small recursive-descent pass, since JSON.parse's
 * message does not always say (Node 20: "Unexpected token ',', ... is not valid JSON").
 */
export function badJsonAt(text: string): number {
  let i = 0;
  const ws = () => {
    while (i < text.length && ' \t\n\r'.includes(text[i])) i++;
  };
  const fail = (): never => {
    throw i;
  };
  const lit = (w: string) => (text.startsWith(w, i) ? (i += w.length) : fail());
  const str = () => {
    if (text[i] !== '"') fail();
    i++;
    while (i < text.length && text[i] !== '"') {
      if (text[i] === '\\') i++;
      else if (text.charCodeAt(i) < 0x20) fail();
      i++;
    }
    if (text[i] !== '"') fail();
    i++;
  };
  const num = () => {
    const m = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i, i + 400));
    if (!m) fail();
    i += m![0].length;
  };
  const value = (): void => {
    ws();
    const c = text[i];
    if (c === '{') {
      i++;
      ws();
      if (text[i] === '}') return void i++;
      for (;;) {
        ws();
        str();
        ws();
        lit(':');
        value();
        ws();
        if (text[i] === ',') i++;
        else if (text[i] === '}') return void i++;
        else fail();
      }
    }
    if (c === '[') {
      i++;
      ws();
      if (text[i] === ']') return void i++;
      for (;;) {
        value();
        ws();
        if (text[i] === ',') i++;
        else if (text[i] === ']') return void i++;
        else fail();
      }
    }
    if (c === '"') return str();
    if (c === 't') return void lit('true');
    if (c === 'f') return void lit('false');
    if (c === 'n') return void lit('null');
    return num();
  };
  try {
    value();
    ws();
    return i < text.length ? i : text.length;
  } catch (at) {
    return typeof at === 'number' ? at : 0;
  }
}

/** The line and column of a character offset, for an error a person can find. */
function lineOf(text: string, pos: number): string {
  const before = text.slice(0, pos);
  const line = before.split('\n').length;
  return `line ${line}, column ${pos - before.lastIndexOf('\n')}`;
}

function strings(v: unknown, where: string): string[] | null {
  if (v === undefined || v === null) return null;
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string')) throw new AlertsConfigError(`${where} must be a list of strings`);
  return v as string[];
}

/** Parses an alerts file (JSON; docs/alerts.md): its sinks, and its rules (null: none given). Errors name the file and where. */
export function parseAlertsDoc(text: string, file: string, env: NodeJS.ProcessEnv): { sinks: Sink[]; rules: MetricRule[] | null } {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    const at = badJsonAt(text);
    const what = (e as Error).message.split('\n')[0].replace(/, ".*$/s, '').slice(0, 120);
    throw new AlertsConfigError(`${file}: not valid JSON at ${lineOf(text, at)} (${what})`);
  }
  const sinks = (doc as { sinks?: unknown })?.sinks;
  if (!Array.isArray(sinks)) throw new AlertsConfigError(`${file}: expected {"sinks": [ … ], "rules": [ … ]}`);
  const top = Object.keys(doc as object).filter((k) => k !== 'sinks' && k !== 'rules');
  if (top.length) throw new AlertsConfigError(`${file}: unknown key(s) ${top.join(', ')}; known: sinks, rules`);
  const rawRules = (doc as { rules?: unknown }).rules;
  if (rawRules !== undefined && !Array.isArray(rawRules)) throw new AlertsConfigError(`${file}: rules must be a list`);
  const rules = rawRules === undefined ? null : (rawRules as unknown[]).map((r, i) => parseRule(r, `${file}: rules[${i}]`));
  return { rules, sinks: sinks.map((s: Record<string, unknown>, i) => {
    const where = `${file}: sinks[${i}]${typeof s?.name === 'string' ? ` (${s.name})` : ''}`;
    if (!s || typeof s !== 'object' || Array.isArray(s)) throw new AlertsConfigError(`${where}: must be an object`);
    const known = new Set(['name', 'url', 'url_env', 'command', 'format', 'events', 'projects', 'groups', 'timeout_ms']);
    const unknown = Object.keys(s).filter((k) => !known.has(k));
    if (unknown.length) throw new AlertsConfigError(`${where}: unknown key(s) ${unknown.join(', ')}; known: ${[...known].join(', ')}`);
    let url = s.url;
    const command = s.command === undefined ? null : s.command;
    if (command !== null) {
      if (typeof command !== 'string' || !command.trim()) throw new AlertsConfigError(`${where}: command must be a non-empty shell command`);
      if (url !== undefined || s.url_env !== undefined) throw new AlertsConfigError(`${where}: a sink has a url (or url_env) or a command, not both`);
    }
    if (command === null && s.url_env !== undefined) {
      if (typeof s.url_env !== 'string') throw new AlertsConfigError(`${where}: url_env must name an environment variable`);
      url = env[s.url_env];
      if (!url) throw new AlertsConfigError(`${where}: the environment variable ${s.url_env} (url_env) is not set`);
    }
    const format = s.format ?? 'json';
    if (format !== 'json' && format !== 'slack') throw new AlertsConfigError(`${where}: format must be "json" or "slack", not ${JSON.stringify(format)}`);
    const kinds = strings(s.events, `${where}: events`) ?? DEFAULT_KINDS;
    const bad = kinds.filter((k) => !(EVENT_KINDS as readonly string[]).includes(k));
    if (bad.length) throw new AlertsConfigError(`${where}: unknown event kind(s) ${bad.map((b) => JSON.stringify(b)).join(', ')}; known: ${EVENT_KINDS.join(', ')}`);
    const timeoutMs = s.timeout_ms === undefined ? 10_000 : Number(s.timeout_ms);
    if (!Number.isInteger(timeoutMs) || timeoutMs < 100 || timeoutMs > 300_000) throw new AlertsConfigError(`${where}: timeout_ms must be a whole number of milliseconds from 100 to 300000`);
    return { name: typeof s.name === 'string' && s.name ? s.name : `sink${i + 1}`, url: command === null ? checkUrl(url, where) : '', command, format, kinds: kinds as AlertKind[],
      projects: strings(s.projects, `${where}: projects`), groups: strings(s.groups, `${where}: groups`), timeoutMs };
  }) };
}

/** The alerts configuration of this environment; throws AlertsConfigError (the daemon then runs with alerts off and says why). */
export function alertsConfig(env: NodeJS.ProcessEnv = process.env): AlertsConfig {
  const sinks: Sink[] = [];
  let rules: MetricRule[] | null = null;
  if (env.LOGD_ALERT_WEBHOOK) {
    sinks.push({ name: 'webhook', url: checkUrl(env.LOGD_ALERT_WEBHOOK, 'LOGD_ALERT_WEBHOOK'), command: null, format: 'json', kinds: DEFAULT_KINDS, projects: null, groups: null, timeoutMs: 10_000 });
  }
  if (env.LOGD_ALERTS) {
    let text: string;
    try {
      text = fs.readFileSync(env.LOGD_ALERTS, 'utf8');
    } catch (e) {
      throw new AlertsConfigError(`LOGD_ALERTS=${env.LOGD_ALERTS}: cannot read it (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    }
    const doc = parseAlertsDoc(text, env.LOGD_ALERTS, env);
    sinks.push(...doc.sinks);
    rules = doc.rules;
  }
  const names = new Set<string>();
  for (const s of sinks) {
    if (names.has(s.name)) throw new AlertsConfigError(`two sinks are named ${JSON.stringify(s.name)}; give each its own name`);
    names.add(s.name);
  }
  return { sinks, rules: rules ?? DEFAULT_RULES, linkBase: env.LOGD_ALERT_LINK_BASE ? env.LOGD_ALERT_LINK_BASE.replace(/\/+$/, '') : null };
}
