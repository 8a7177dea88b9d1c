// The health monitor: once a tick (1 s) it groups the node's open runs by
// (project, group), judges each group (judge.ts), asks stalled processes for
// their stacks (stacks.ts), names the likely cause, and hands each run its
// progress and events (stored in the run's metadata, so the index, the shared
// store, the CLI and the dashboard see them). On a stall it can run the
// user's --on-stall command with the event as JSON on stdin.
//
// It reads /proc/<pid>/stat of each local rank once a tick and loops over
// nothing else: the step progress is kept by the live run as batches commit.
import { spawn } from 'node:child_process';
import { GroupJudge, type RankInput } from './judge.js';
import { RateHistory } from './history.js';
import type { StepProgress } from './progress.js';
import { requestStack, sweepStacks } from './stacks.js';
import { readPidStat, TICKS_PER_SECOND } from '../sampler/proc.js';
import { thresholdsFrom, rankLabel, HEALTH_DEFAULTS, type HealthEvent, type HealthThresholds, type RankStack, type RunHealth } from '../../src/health.js';

/** One open run, as the monitor sees it (built by the composition root from the registry). */
export interface HealthRun {
  id: string;
  project: string;
  group: string;
  rank: number | null;
  host: string;
  pid: number;
  /** The owner process's start time in ticks when it runs on this node, else null. */
  startTicks: number | null;
  /** Open and, when local, its process alive. */
  alive: boolean;
  ended: { state: string; at: number; reason: string } | null;
  progress: StepProgress;
  config: Record<string, unknown>;
  /** Stores the run's health (metadata.health); `changed`: events were added (worth persisting now). */
  setHealth(h: RunHealth, changed: boolean): void;
}

export interface HealthView {
  /** The open runs. */
  runs(): HealthRun[];
  /** How a run that is no longer open ended (the index), or null when unknown. */
  finalOf(id: string): { state: string; at: number; reason: string } | null;
  /** Where clients register their stack dumps (`<data dir>/stacks`). */
  stacksDir: string;
  /** Why the daemon cannot store right now (a full disk), or null: then ranks wait on logd, not the reverse. */
  storageProblem?(): string | null;
}

export interface HealthOptions {
  tickMs: number;
  defaults: HealthThresholds;
  /** A shell command run on `stalled` and `job stalled`, the event as JSON on stdin; null: none. */
  onStall: string | null;
  onStallTimeoutMs: number;
  /** Each event as it is recorded, with its group's project (the composition root hands it to alerts). */
  onEvent?: (e: HealthEvent, project: string) => void;
  log: (line: string) => void;
}

/** How long an ended rank stays in its group's picture (a dead rank stalls the others). */
const REMEMBER_ENDED_S = 600;
const MAX_EVENTS = 20;
const EVENTS_WITH_STACKS = 3;

export class HealthMonitor {
  private judges = new Map<string, GroupJudge>();
  private remembered = new Map<string, { run: HealthRun; until: number }>();
  /** The runs seen open at the last tick: one that is gone since has ended. */
  private lastOpen = new Map<string, HealthRun>();
  private events = new Map<string, HealthEvent[]>();
  private progress = new Map<string, RunHealth['progress']>();
  /** Each judged rank's step rate over time (history.ts): a sample every 5 s, at most 240 per rank. */
  private rates = new Map<string, RateHistory>();
  private stacking = new Set<string>();
  private onStallRunning = new Set<string>();
  private timer: NodeJS.Timeout | null = null;
  private ticks = 0;
  /** Milliseconds of CPU this monitor spent (bench/health). */
  busyMs = 0;

  constructor(private readonly view: HealthView, private readonly o: HealthOptions) {}

  start(): void {
    this.timer = setInterval(() => this.tick(Date.now() / 1000), this.o.tickMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  tick(nowS: number): void {
    // The daemon's own timer: whatever goes wrong here is said once and never ends the daemon.
    try {
      this.tickInner(nowS);
    } catch (e) {
      this.once(`health: a tick failed (${(e as Error).message}); rank health goes on at the next one`);
    }
  }

  private said = new Set<string>();
  private storageProblemAt = -Infinity;
  private once(line: string): void {
    if (this.said.has(line)) return;
    this.said.add(line);
    this.o.log(line);
  }

  private tickInner(nowS: number): void {
    const t0 = performance.now();
    if (this.view.storageProblem?.()) this.storageProblemAt = nowS;
    if (nowS - this.storageProblemAt < 2 * this.o.defaults.stallFloorS) {
      // Batches wait on the daemon's disk (and catch up after it), so no rank steps in its eyes: judging now
      // would blame the ranks for logd's own wait.
      this.busyMs += performance.now() - t0;
      return;
    }
    this.ticks++;
    if (this.ticks % 10 === 0) sweepStacks(this.view.stacksDir);
    const groups = new Map<string, HealthRun[]>();
    const open = this.view.runs();
    const openIds = new Set(open.map((r) => r.id));
    for (const [id, r] of this.lastOpen) {
      if (openIds.has(id) || this.remembered.has(id)) continue;
      const ended = this.view.finalOf(id) ?? { state: 'ended', at: nowS, reason: '' };
      this.remembered.set(id, { run: { ...r, alive: false, ended }, until: nowS + REMEMBER_ENDED_S });
    }
    this.lastOpen = new Map(open.map((r) => [r.id, r]));
    for (const r of open) {
      const key = r.group ? `${r.project}\u0000${r.group}` : r.rank !== null ? `run\u0000${r.id}` : null;
      if (key === null) continue; // neither a group nor a rank: not part of a distributed job
      if (r.ended) this.remembered.set(r.id, { run: r, until: nowS + REMEMBER_ENDED_S });
      else this.remembered.delete(r.id);
      (groups.get(key) ?? groups.set(key, []).get(key)!).push(r);
    }
    for (const [id, m] of this.remembered) {
      if (m.until < nowS) {
        this.remembered.delete(id);
        continue;
      }
      const key = m.run.group ? `${m.run.project}\u0000${m.run.group}` : `run\u0000${id}`;
      const g = groups.get(key);
      if (g && !g.some((r) => r.id === id)) g.push(m.run);
    }
    for (const key of this.judges.keys()) if (!groups.has(key)) this.judges.delete(key);
    for (const [key, runs] of groups) this.judgeGroup(key, runs, nowS);
    const seen = new Set<string>();
    for (const runs of groups.values()) for (const r of runs) seen.add(r.id);
    for (const id of [...this.progress.keys()]) {
      if (seen.has(id)) continue;
      this.events.delete(id);
      this.progress.delete(id);
      this.rates.delete(id);
    }
    this.busyMs += performance.now() - t0;
  }

  private judgeGroup(key: string, runs: HealthRun[], nowS: number): void {
    const group = runs[0].group || runs[0].id;
    let judge = this.judges.get(key);
    if (!judge) this.judges.set(key, (judge = new GroupJudge(group)));
    const leader = runs.find((r) => r.rank === 0) ?? runs[0];
    const t = thresholdsFrom(leader.config, this.o.defaults);
    const inputs: RankInput[] = runs.map((r) => ({
      runId: r.id, rank: r.rank, host: r.host, pid: r.pid, alive: r.alive, ended: r.ended, progress: r.progress, cpuS: cpuSeconds(r),
    }));
    const res = judge.tick(nowS, inputs, t);
    for (const e of res.events) this.record(e, runs, judge, inputs);
    if (res.jobStalled) {
      const e = res.jobStalled;
      void this.withStacks(key, e, runs, judge)
        .then(() => {
          judge.nameCause(e, inputs, e.stacks ?? []);
          this.record(e, runs, judge, inputs, true);
        })
        .catch((err: Error) => this.once(`health: recording a job stall failed: ${err.message}`));
    }
    for (const p of res.progress) {
      this.progress.set(p.runId, p);
      const r = runs.find((x) => x.id === p.runId);
      if (!r || r.ended) continue;
      let rate = this.rates.get(r.id);
      if (!rate) this.rates.set(r.id, (rate = new RateHistory()));
      rate.sample(nowS, p.step);
      r.setHealth(this.healthOf(r.id, p, this.events.get(r.id) ?? []), false);
    }
  }

  private healthOf(id: string, progress: RunHealth['progress'], events: HealthEvent[]): RunHealth {
    const rate = this.rates.get(id)?.series();
    return rate ? { progress, events, rate } : { progress, events };
  }

  /** Stacks of every stalled local rank of the event, side by side; at most one collection per group at a time. */
  private async withStacks(key: string, e: HealthEvent, runs: HealthRun[], judge: GroupJudge): Promise<void> {
    if (this.stacking.has(key)) return;
    this.stacking.add(key);
    try {
      const asked = runs.filter((r) => e.runIds.includes(r.id) && r.startTicks !== null && !r.ended);
      const answers = await Promise.all(asked.map((r) => requestStack(this.view.stacksDir, r.pid, r.startTicks!).catch((err: Error) => ({ problem: err.message }))));
      const stacks: RankStack[] = [];
      const problems: string[] = [];
      asked.forEach((r, i) => {
        const a = answers[i];
        if ('problem' in a) problems.push(`${rankLabel(r.rank, r.id)}: ${a.problem}`);
        else stacks.push({ rank: r.rank, runId: r.id, pid: r.pid, text: a.text, inCollective: a.inCollective, top: a.top, cpuPercent: judge.cpuPercent(r.id) });
      });
      if (stacks.length) e.stacks = stacks;
      if (problems.length) e.evidence += `; no stack from ${problems.join('; ')}`;
    } finally {
      this.stacking.delete(key);
    }
  }

  private record(e: HealthEvent, runs: HealthRun[], judge: GroupJudge, inputs: RankInput[], ready = false): void {
    if (!ready && e.kind === 'stalled') {
      // One rank stalled: its stack too, then recorded.
      void this.withStacks(`stalled\u0000${e.runIds.join(',')}`, e, runs, judge)
        .then(() => this.record(e, runs, judge, inputs, true))
        .catch((err: Error) => this.once(`health: recording a stall failed: ${err.message}`));
      return;
    }
    const involved = e.kind === 'job stalled' ? runs.map((r) => r.id) : e.runIds;
    for (const id of involved) {
      const list = this.events.get(id) ?? [];
      list.push(e);
      if (list.length > MAX_EVENTS) list.splice(0, list.length - MAX_EVENTS);
      // Stacks are kept in the newest few events only: metadata travels with every listing.
      let withStacks = 0;
      for (let i = list.length - 1; i >= 0; i--) {
        if (!list[i].stacks) continue;
        if (++withStacks > EVENTS_WITH_STACKS) list[i] = { ...list[i], stacks: undefined };
      }
      this.events.set(id, list);
      const r = runs.find((x) => x.id === id);
      const p = inputs.find((x) => x.runId === id);
      if (r && p && !r.ended) {
        r.setHealth(this.healthOf(id, this.progress.get(id) ?? progressOf(p, e.at), list), true);
      }
    }
    const who = e.cause ? `; likely cause: ${e.cause.ranks.map((r, i) => rankLabel(r, e.cause!.runIds[i])).join(', ')} (${e.cause.why})` : '';
    this.o.log(`health: group ${e.group}: ${e.kind}: ${e.ranks.map((r, i) => rankLabel(r, e.runIds[i])).join(', ')}${who}. ${e.evidence}`);
    if ((e.kind === 'job stalled' || e.kind === 'stalled') && this.o.onStall) this.runOnStall(e);
    try {
      this.o.onEvent?.(e, runs.find((r) => e.runIds.includes(r.id))?.project ?? runs[0]?.project ?? '');
    } catch (err) {
      this.once(`health: handing an event on failed: ${(err as Error).message}`);
    }
  }

  /** The user's command, the event on stdin; never more than one per group at a time, killed at the timeout. */
  private runOnStall(e: HealthEvent): void {
    if (this.onStallRunning.has(e.group)) {
      this.o.log(`health: --on-stall for group ${e.group} is still running; not started again for this event`);
      return;
    }
    this.onStallRunning.add(e.group);
    let child;
    try {
      child = spawn('/bin/sh', ['-c', this.o.onStall!], { stdio: ['pipe', 'ignore', 'pipe'], detached: true });
    } catch (err) {
      this.onStallRunning.delete(e.group);
      this.o.log(`health: --on-stall could not start: ${(err as Error).message}`);
      return;
    }
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => {
      if (stderr.length < 2000) stderr += d.toString('utf8');
    });
    child.stdin!.on('error', () => {}); // a command that does not read its stdin
    child.stdin!.end(JSON.stringify(e) + '\n');
    const killer = setTimeout(() => {
      this.o.log(`health: --on-stall took longer than ${this.o.onStallTimeoutMs} ms; killed`);
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        /* gone */
      }
    }, this.o.onStallTimeoutMs);
    killer.unref();
    child.on('error', (err) => this.o.log(`health: --on-stall failed: ${err.message}`));
    child.on('close', (code, sig) => {
      clearTimeout(killer);
      this.onStallRunning.delete(e.group);
      if (code !== 0) this.o.log(`health: --on-stall exited ${sig ?? code}${stderr ? `: ${stderr.trim().slice(0, 500)}` : ''}`);
    });
  }
}

function progressOf(p: RankInput, at: number): RunHealth['progress'] {
  const stepS = p.progress.medianStepS();
  return {
    runId: p.runId, rank: p.rank, host: p.host, pid: p.pid, step: p.progress.lastStep, stepAt: p.progress.lastStepAt,
    stepS, stepsPerS: stepS ? 1 / stepS : null, lag: 0, cpuPerStepS: null, state: 'ok', at,
  };
}

/** The local rank's CPU seconds (its own threads), null when it is not on this node or not the same process. */
function cpuSeconds(r: HealthRun): number | null {
  if (r.startTicks === null || r.ended) return null;
  const st = readPidStat(r.pid);
  if (!st || st.startTicks !== r.startTicks) return null;
  return st.cpuTicks / TICKS_PER_SECOND;
}

export { HEALTH_DEFAULTS };
