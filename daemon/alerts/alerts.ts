// What becomes an alert (docs/alerts.md). Fed by the composition root
// (daemon/daemon.ts): each run as it is finalised and each health event as it
// is recorded. A failed job is told once, with its story, when its ranks have
// ended (or 20 s after the first crash, whichever is first): one alert per
// job, not one per rank. A run of no group that crashed is its own alert.
import os from 'node:os';
import type { RunInfo } from '../../src/wire.js';
import type { HealthEvent } from '../../src/health.js';
import { rankLabel } from '../../src/health.js';
import { storyOfRuns } from '../../src/story/story.js';
import { splitJobs } from '../../src/story/jobs.js';
import { describeEnd, endOf } from '../../src/story/end.js';
import type { AlertsConfig, MetricRule } from './config.js';
import type { Alert } from './alert.js';
import { Outbox } from './outbox.js';
import type { SharedJobs } from './shared-jobs.js';

/** An open run as the metric rules read it: its names, its last step, a metric's last value. */
export interface RuleRun {
  id: string; name: string; project: string; group: string;
  lastStep: number;
  /** When it was created, and when its last step came (0: none yet), in seconds. */
  createdAt: number;
  lastRowAt: number;
  latest(metric: string): number | undefined;
}

/** How long a failed job's story waits for ranks still running before it is told with what is known. */
const STORY_WAIT_MS = 20_000;
/** How often the metric rules look at the open runs' latest values. */
const RULES_EVERY_MS = 2000;
/** run.alert(): at most this many per run in any minute; more are refused, saying so. */
export const USER_ALERTS_PER_MINUTE = 10;

export class Alerts {
  private readonly waiting = new Map<string, NodeJS.Timeout>();
  /** run.alert() times per run over the last minute (the rate limit). */
  private readonly userTimes = new Map<string, number[]>();
  readonly node = process.env.LOGD_NODE || os.hostname();

  private ruleTimer: NodeJS.Timeout | null = null;
  /** Rules already fired, per run (`runId|rule index`): once per run. */
  private readonly fired = new Set<string>();

  constructor(private readonly cfg: AlertsConfig, readonly outbox: Outbox, private readonly o: {
    groupRuns: (project: string, group: string) => RunInfo[]; openRuns?: () => RuleRun[]; log: (m: string) => void;
    /** With a shared store: a failed job is told once for all its nodes (shared-jobs.ts). */
    shared?: SharedJobs | null;
  }) {
    if (cfg.rules.length && o.openRuns) {
      this.ruleTimer = setInterval(() => this.checkRules(), RULES_EVERY_MS);
      this.ruleTimer.unref();
    }
  }

  /** The metric rules on every open run's latest values, off the ingest path. */
  checkRules(): void {
    let runs: RuleRun[];
    try {
      runs = this.o.openRuns!();
    } catch (e) {
      this.o.log(`alerts: rules: ${(e as Error).message}`);
      return;
    }
    for (const run of runs) {
      this.cfg.rules.forEach((rule, i) => {
        const key = `${run.id}|${i}`;
        if (this.fired.has(key) || run.lastStep <= rule.afterStep) return;
        if (rule.op === 'silent') return this.checkSilent(run, rule, key);
        const v = run.latest(rule.metric);
        if (v === undefined) return;
        const hit = rule.op === 'non-finite' ? !Number.isFinite(v)
          : rule.op === '>' ? v > rule.value : rule.op === '>=' ? v >= rule.value : rule.op === '<' ? v < rule.value : v <= rule.value;
        if (!hit) return;
        this.fired.add(key);
        const shown = Number.isNaN(v) ? 'NaN' : String(v);
        this.outbox.enqueue({ key: `metric|${run.id}|${rule.metric}|${rule.when}`, kind: 'metric', at: Date.now() / 1000, project: run.project, group: run.group, runId: run.id, node: this.node,
          title: `${rule.metric} ${rule.op === 'non-finite' ? 'is non-finite' : rule.when} in run ${run.name || run.id}`,
          text: `${rule.metric} = ${shown} at step ${run.lastStep} (rule: ${rule.metric} ${rule.when}${rule.afterStep >= 0 ? ` after step ${rule.afterStep}` : ''})`,
          link: this.link(run.group, run.id), detail: { metric: rule.metric, value: shown, step: run.lastStep, rule: { when: rule.when, afterStep: rule.afterStep } } });
      });
    }
    if (this.fired.size > 100_000) this.fired.clear();
  }

  /** `no new row for N`: the run is open and its last row (or its start, before any) is older than that. */
  private checkSilent(run: RuleRun, rule: MetricRule, key: string): void {
    const since = run.lastRowAt > 0 ? run.lastRowAt : run.createdAt;
    const now = Date.now() / 1000;
    if (!(since > 0) || now - since < rule.value) return;
    this.fired.add(key);
    const ago = formatSeconds(now - since);
    this.outbox.enqueue({ key: `silent|${run.id}|${rule.value}`, kind: 'metric', at: now, project: run.project, group: run.group, runId: run.id, node: this.node,
      title: `no new row for ${ago} in run ${run.name || run.id}`,
      text: run.lastRowAt > 0 ? `its last row was step ${run.lastStep}, ${ago} ago; the run is still open (rule: ${rule.when})` : `it has logged no row in the ${ago} since it started (rule: ${rule.when})`,
      link: this.link(run.group, run.id), detail: { step: run.lastStep, lastRowAt: run.lastRowAt || null, silentS: Math.round(now - since), rule: { when: rule.when } } });
  }

  private link(group: string, runId: string | null): string | null {
    if (!this.cfg.linkBase) return null;
    return `${this.cfg.linkBase}/${group ? `groups/${encodeURIComponent(group)}` : `runs/${encodeURIComponent(runId ?? '')}`}`;
  }

  /** A run reached its final state. */
  runEnded(info: RunInfo): void {
    try {
      if (info.state === 'finished') {
        this.outbox.enqueue({ key: `run finished|${info.id}`, kind: 'run finished', at: info.finishedAt, project: info.project, group: info.group, runId: info.id,
          node: this.node, title: `run ${info.name || info.id} finished`, text: `${info.historyRows} rows`, link: this.link('', info.id), detail: { state: info.state } });
        return;
      }
      if (info.state !== 'crashed' && !(info.state === 'killed' && endOf(info.metadataJson))) return; // a daemon stop is not a failure
      if (!info.group) {
        const end = endOf(info.metadataJson);
        this.outbox.enqueue({ key: `run crashed|${info.id}`, kind: 'run crashed', at: end?.at ?? info.finishedAt, project: info.project, group: '', runId: info.id, node: this.node,
          title: `run ${info.name || info.id} crashed`, text: end ? `its process ${describeEnd(end)}` : info.stateReason, link: this.link('', info.id), detail: { stateReason: info.stateReason, end } });
        return;
      }
      this.jobCheck(info.project, info.group, info.id, Date.now());
    } catch (e) {
      this.o.log(`alerts: run ${info.id}: ${(e as Error).message}`);
    }
  }

  /** The job the run belongs to, told once its ranks have ended (or STORY_WAIT_MS after the first crash). */
  private jobCheck(project: string, group: string, runId: string, since: number): void {
    const k = `${project}\u0000${group}`;
    const t = this.waiting.get(k);
    if (t) clearTimeout(t);
    const check = async () => {
      this.waiting.delete(k);
      const local = this.o.groupRuns(project, group);
      // With a shared store the job is every node's runs (this node's as it knows them now, the others' as they
      // were uploaded); without one, or when the store cannot be read, this node's.
      let runs = local;
      let shared = false;
      if (this.o.shared) {
        try {
          const mine = new Map(local.map((r) => [r.id, r]));
          runs = [...local, ...(await this.o.shared.groupRuns(project, group)).filter((r) => !mine.has(r.id))];
          shared = true;
        } catch (e) {
          this.o.log(`alerts: job ${group}: the shared store cannot be read (${(e as Error).message}); told from this node's runs`);
        }
      }
      const jobs = splitJobs(runs);
      const job = jobs.find((j) => j.runs.some((r) => r.id === runId));
      if (!job) return;
      const open = job.runs.some((r) => r.state === 'running' || r.state === 'finishing');
      if (open && Date.now() - since < STORY_WAIT_MS) {
        this.waiting.set(k, setTimeout(() => void check(), shared ? 1000 : 500).unref());
        return;
      }
      const story = storyOfRuns(job.runs);
      if (!story || story.verdict !== 'failed') return;
      const first = [...job.runs].sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id))[0];
      const key = shared ? `job failed|${project}|${group}|${first.id}` : `job failed|${project}|${group}|${job.startedAt}`;
      if (shared) {
        try {
          const c = await this.o.shared!.claim(key);
          if (!c.won) {
            this.o.log(`alerts: job ${group} failed; node ${c.by} tells it (one alert per job)`);
            return;
          }
        } catch (e) {
          this.o.log(`alerts: job ${group}: cannot claim its alert in the shared store (${(e as Error).message}); this node tells it`);
        }
      }
      const who = story.first.length ? story.first.map((f) => `${rankLabel(f.rank, f.runId)} ${f.how}`).join('; ') : 'a peer outside this node';
      this.outbox.enqueue({ key, kind: 'job failed', at: story.at, project, group, runId: story.first[0]?.runId ?? null, node: this.node,
        title: `job ${group} failed: ${who}`, text: story.line, link: this.link(group, null), detail: { story, job: { n: job.n, of: jobs.length, startedAt: job.startedAt } } });
    };
    this.waiting.set(k, setTimeout(() => void check().catch((e) => this.o.log(`alerts: job ${group}: ${(e as Error).message}`)), 300).unref());
  }

  /** run.alert(title, text, level) from training code; at most USER_ALERTS_PER_MINUTE per run. */
  userAlert(info: RunInfo, a: { title: string; text: string; level: string; id: string }): { queued: boolean; message: string } {
    const now = Date.now();
    const times = (this.userTimes.get(info.id) ?? []).filter((t) => now - t < 60_000);
    if (times.length >= USER_ALERTS_PER_MINUTE) {
      this.userTimes.set(info.id, times);
      return { queued: false, message: `run ${info.id} sent ${USER_ALERTS_PER_MINUTE} alerts in the last minute, the most run.alert() sends; this one is dropped` };
    }
    times.push(now);
    this.userTimes.set(info.id, times);
    if (this.userTimes.size > 10_000) this.userTimes.delete(this.userTimes.keys().next().value!);
    const n = this.outbox.enqueue({ key: `run alert|${info.id}|${a.id || now}`, kind: 'run alert', at: now / 1000, project: info.project, group: info.group, runId: info.id, node: this.node,
      title: `${a.level === 'info' ? '' : `${a.level.toUpperCase()}: `}${a.title}`, text: `${a.text}${a.text ? '\n' : ''}(run ${info.name || info.id}, project ${info.project}${info.group ? `, group ${info.group}` : ''})`,
      link: this.link(info.group, info.id), detail: { level: a.level, title: a.title, text: a.text } });
    return { queued: n > 0, message: n > 0 ? `queued for ${n} sink(s)` : 'no sink takes run alerts for this run (its filters)' };
  }

  /** A health event (stalled, job stalled, straggler, recovered) as the monitor recorded it. */
  healthEvent(e: HealthEvent, project: string): void {
    const who = e.ranks.map((r, i) => [r, rankLabel(r, e.runIds[i])] as const).sort((a, b) => (a[0] ?? 1e9) - (b[0] ?? 1e9)).map((x) => x[1]).join(', ');
    const cause = e.cause ? `; likely cause: ${e.cause.ranks.map((r, i) => rankLabel(r, e.cause!.runIds[i])).join(', ')} (${e.cause.why})` : '';
    const { stacks: _stacks, ...event } = e;
    this.outbox.enqueue({ key: `health|${e.at}|${e.kind}|${e.runIds.join(',')}`, kind: e.kind, at: e.at, project, group: e.group, runId: e.runIds[0] ?? null, node: this.node,
      title: `${e.kind} in group ${e.group}: ${who}`, text: `${e.kind}: ${who}${cause}. ${e.evidence}`, link: this.link(e.group, e.runIds[0] ?? null), detail: event });
  }

  stop(): void {
    if (this.ruleTimer) clearInterval(this.ruleTimer);
    for (const t of this.waiting.values()) clearTimeout(t);
    this.outbox.stop();
    void this.o.shared?.close();
  }
}

/** 612 → "10 min", 45 → "45 s", 7300 → "2 h 1 min". */
function formatSeconds(s: number): string {
  if (s < 120) return `${Math.round(s)} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
}
