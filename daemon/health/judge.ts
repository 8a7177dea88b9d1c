// The judgements on one group's ranks, once per tick: `stalled`, `job
// stalled`, `straggler`, `recovered`. Pure: the monitor (monitor.ts) gives it
// what it sees (progress, liveness, CPU time) and stores what it returns.
//
// In synchronous data-parallel training every rank steps at the same rate:
// the all-reduce waits for the slowest one. So step counts alone never name
// the rank at fault. A straggler shows in where its time goes (CPU seconds
// per step above the others': the others sleep in the collective, waiting
// for it); a stall's culprit shows in a dead process, in a stack outside the
// collective (stacks.ts), in a last step behind the rest, or in a process
// busy while the others sleep.
import { median, type StepProgress } from './progress.js';
import { rankLabel, type HealthEvent, type HealthThresholds, type RankProgress, type RankStack } from '../../src/health.js';

export interface RankInput {
  runId: string;
  rank: number | null;
  host: string;
  pid: number;
  /** The run is open and its process (when local) alive. */
  alive: boolean;
  /** The run ended: its final state and when. */
  ended: { state: string; at: number; reason: string } | null;
  progress: StepProgress;
  /** The process's CPU seconds so far (utime + stime), null when it cannot be read (another host). */
  cpuS: number | null;
}

interface RankMemory {
  stalledSince: number; // 0: not stalled
  straggler: boolean;
  streak: number; // ticks in a row above the straggler threshold
  calm: number; // ticks in a row clearly below it, while a straggler
  cpu: Array<{ step: number; cpuS: number; at: number }>; // samples at step changes, oldest first
  lastCpu: { cpuS: number; at: number } | null;
  cpuPercent: number | null;
}

export interface TickResult {
  events: HealthEvent[];
  progress: RankProgress[];
  /** A `job stalled` event waiting for stacks and its cause (see nameCause). */
  jobStalled: HealthEvent | null;
}

/** Ticks in a row a rank must stay above the threshold to be called a straggler (and clearly below it to recover). */
const STREAK = 3;

export class GroupJudge {
  private mem = new Map<string, RankMemory>();
  private jobStalledSince = 0;
  /** Ranks that ended while the group was running: a dead rank stalls the rest in the collective. */
  private deaths: Array<{ runId: string; rank: number | null; at: number; state: string; reason: string }> = [];

  constructor(readonly group: string) {}

  private memory(runId: string): RankMemory {
    let m = this.mem.get(runId);
    if (!m) {
      m = { stalledSince: 0, straggler: false, streak: 0, calm: 0, cpu: [], lastCpu: null, cpuPercent: null };
      this.mem.set(runId, m);
    }
    return m;
  }

  tick(nowS: number, ranks: readonly RankInput[], t: HealthThresholds): TickResult {
    const events: HealthEvent[] = [];
    const progress: RankProgress[] = [];
    if (!t.enabled) return { events, progress, jobStalled: null };
    const steps = ranks.filter((r) => r.progress.lastStep >= 0).map((r) => r.progress.lastStep);
    const medianStep = median(steps) ?? 0;
    const cpuPerStep = new Map<string, number>();
    const recovered: RankInput[] = [];
    const newlyStalled: RankInput[] = [];

    for (const r of ranks) {
      const m = this.memory(r.runId);
      const p = r.progress;
      // CPU time: per-step over the window, and % of a core since the last tick.
      if (r.cpuS !== null) {
        if (m.lastCpu && nowS > m.lastCpu.at) m.cpuPercent = ((r.cpuS - m.lastCpu.cpuS) / (nowS - m.lastCpu.at)) * 100;
        m.lastCpu = { cpuS: r.cpuS, at: nowS };
        const lastSample = m.cpu[m.cpu.length - 1];
        // The warm-up (imports, first batches, JIT) is no rank's pace: the window starts after minSteps.
        if (p.advances >= t.minSteps && (!lastSample || p.lastStep > lastSample.step)) m.cpu.push({ step: p.lastStep, cpuS: r.cpuS, at: nowS });
        while (m.cpu.length > 2 && m.cpu[1].step <= p.lastStep - t.windowSteps) m.cpu.shift();
        // Between the samples taken at step changes: CPU spent since the last step (finishing, exiting, waiting
        // for a rank that ended) belongs to no step, and counted against the last one it would skew the figure.
        const first = m.cpu[0];
        const last = m.cpu[m.cpu.length - 1];
        if (first && last.step - first.step >= t.windowSteps) cpuPerStep.set(r.runId, (last.cpuS - first.cpuS) / (last.step - first.step));
      }
      if (r.ended) {
        if (m.stalledSince === 0 && !this.deaths.some((d) => d.runId === r.runId) && r.ended.state !== 'finished') {
          this.deaths.push({ runId: r.runId, rank: r.rank, at: r.ended.at, state: r.ended.state, reason: r.ended.reason });
        }
        continue;
      }
      const stepS = p.medianStepS();
      const judged = r.alive && p.advances >= t.minSteps && stepS !== null && p.regular();
      const limit = stepS === null ? Infinity : Math.max(t.stallK * stepS, t.stallFloorS);
      const stalled = judged && nowS - p.lastStepAt > limit;
      if (stalled && m.stalledSince === 0) {
        m.stalledSince = p.lastStepAt;
        newlyStalled.push(r);
      } else if (!stalled && m.stalledSince !== 0 && p.lastStepAt > m.stalledSince) {
        m.stalledSince = 0;
        recovered.push(r);
      }
    }

    // Stragglers: CPU seconds per step against the other ranks' median, over the window.
    const live = ranks.filter((r) => !r.ended && r.alive);
    for (const r of live) {
      const m = this.memory(r.runId);
      const mine = cpuPerStep.get(r.runId);
      const others = live.filter((o) => o !== r && cpuPerStep.has(o.runId)).map((o) => cpuPerStep.get(o.runId)!);
      const ref = median(others);
      if (mine === undefined || ref === null || ref <= 0 || m.stalledSince !== 0) continue;
      // Above the others by the threshold, and by enough to matter: at least 5 ms of CPU and 3 % of the step's
      // wall time (a rank that mostly waits on I/O or a GPU has tiny, noisy CPU figures).
      const stepS = r.progress.medianStepS() ?? 0;
      const above = mine >= ref * (1 + t.stragglerPct / 100) && mine - ref >= Math.max(0.005, 0.03 * stepS);
      const clearly = mine < ref * (1 + t.stragglerPct / 200);
      m.streak = above ? m.streak + 1 : 0;
      m.calm = m.straggler && clearly ? m.calm + 1 : 0;
      if (!m.straggler && m.streak >= STREAK) {
        m.straggler = true;
        m.calm = 0;
        events.push(this.event(nowS, 'straggler', [r], `${rankLabel(r.rank, r.runId)} uses ${fmtS(mine)} CPU per step over the last ${t.windowSteps} steps, ${pct(mine / ref - 1)} above the other ranks' median ${fmtS(ref)} (threshold ${t.stragglerPct} %): the others wait for it in the collective`));
      } else if (m.straggler && m.calm >= STREAK) {
        // As many ticks in a row clearly back as it took to be named: one noisy tick neither names nor clears.
        m.straggler = false;
        events.push(this.event(nowS, 'recovered', [r], `${rankLabel(r.rank, r.runId)} no longer lags: ${fmtS(mine)} CPU per step against the others' ${fmtS(ref)}`));
      }
    }

    // Stalls. A stall of every live rank is one `job stalled` event; otherwise each rank's own.
    const judgedLive = live.filter((r) => r.progress.advances >= t.minSteps && r.progress.regular());
    const allStalled = judgedLive.length > 0 && judgedLive.every((r) => this.memory(r.runId).stalledSince !== 0);
    const someoneDied = this.deaths.length > 0;
    let jobStalled: HealthEvent | null = null;
    if (allStalled && (judgedLive.length > 1 || someoneDied) && this.jobStalledSince === 0) {
      this.jobStalledSince = nowS;
      const since = Math.min(...judgedLive.map((r) => this.memory(r.runId).stalledSince));
      jobStalled = this.event(nowS, 'job stalled', judgedLive,
        `no rank has stepped for ${fmtS(nowS - since)}: ${judgedLive.map((r) => `${rankLabel(r.rank, r.runId)} at step ${r.progress.lastStep} (${fmtS(nowS - r.progress.lastStepAt)} ago, median step ${fmtS(r.progress.medianStepS() ?? 0)})`).join('; ')}`);
    } else if (!allStalled || judgedLive.length === 0) {
      for (const r of newlyStalled) {
        const p = r.progress;
        events.push(this.event(nowS, 'stalled', [r], `${rankLabel(r.rank, r.runId)} has not stepped for ${fmtS(nowS - p.lastStepAt)} (last step ${p.lastStep}; median step ${fmtS(p.medianStepS() ?? 0)}; threshold max(${t.stallK} × median, ${t.stallFloorS} s)) while its process is alive`));
      }
    }
    if (recovered.length > 0) {
      events.push(this.event(nowS, 'recovered', recovered, `${recovered.map((r) => rankLabel(r.rank, r.runId)).join(', ')} stepped again (now at step ${recovered.map((r) => r.progress.lastStep).join(', ')})`));
    }
    if (this.jobStalledSince !== 0 && !allStalled) {
      this.jobStalledSince = 0;
      this.deaths = [];
    }
    // A death the others stepped on past did not stall them: it names no later stall.
    if (this.jobStalledSince === 0) this.deaths = this.deaths.filter((d) => !live.some((r) => r.progress.lastStepAt > d.at + t.stallFloorS));

    for (const r of ranks) {
      const m = this.memory(r.runId);
      const p = r.progress;
      const stepS = p.medianStepS();
      progress.push({
        runId: r.runId, rank: r.rank, host: r.host, pid: r.pid, step: p.lastStep, stepAt: p.lastStepAt,
        stepS, stepsPerS: stepS ? 1 / stepS : null, lag: p.lastStep >= 0 ? medianStep - p.lastStep : 0,
        cpuPerStepS: cpuPerStep.get(r.runId) ?? null,
        state: r.ended ? 'ended' : m.stalledSince !== 0 ? 'stalled' : m.straggler ? 'straggler' : 'ok', at: nowS,
      });
    }
    for (const id of this.mem.keys()) if (!ranks.some((r) => r.runId === id)) this.mem.delete(id);
    return { events, progress, jobStalled };
  }

  /** CPU % of one core of a rank over the last tick. */
  cpuPercent(runId: string): number | null {
    return this.mem.get(runId)?.cpuPercent ?? null;
  }

  /**
   * Names the likely cause of a `job stalled` event, strongest evidence first:
   * a rank whose process died; ranks whose stack is outside the collective
   * while the others' are inside; ranks whose last step is behind the rest;
   * a rank busy on the CPU while the others sleep.
   */
  nameCause(e: HealthEvent, ranks: readonly RankInput[], stacks: readonly RankStack[]): void {
    const stalled = ranks.filter((r) => e.runIds.includes(r.runId));
    const pick = (rs: Array<{ runId: string; rank: number | null }>, why: string) => {
      e.cause = { ranks: rs.map((r) => r.rank), runIds: rs.map((r) => r.runId), why };
    };
    if (this.deaths.length > 0) {
      // A dead rank never reaches the collective the others wait in (NCCL; gloo when its connections stay open).
      const d = this.deaths;
      const inside = stacks.filter((s) => s.inCollective).sort((a, b) => (a.rank ?? 1e9) - (b.rank ?? 1e9));
      const waiting = inside.length > 0
        ? `${inside.map((s) => rankLabel(s.rank, s.runId)).join(', ')} wait inside the collective (their stacks)`
        : 'the others wait for it in the collective';
      pick(d, `${d.map((x) => `${rankLabel(x.rank, x.runId)} ended ${x.state}${x.reason ? ` (${x.reason})` : ''}`).join('; ')} while the others ran on: ${waiting}`);
      return;
    }
    const outside = stacks.filter((s) => !s.inCollective);
    if (stacks.length >= 2 && outside.length > 0 && outside.length < stacks.length) {
      pick(outside, `${outside.map((s) => `${rankLabel(s.rank, s.runId)} is outside the collective (at ${s.top || 'an unknown frame'})`).join('; ')}, while ${stacks.length - outside.length} other rank(s) wait inside it`);
      return;
    }
    const maxStep = Math.max(...stalled.map((r) => r.progress.lastStep));
    const behind = stalled.filter((r) => r.progress.lastStep < maxStep);
    if (behind.length > 0 && behind.length < stalled.length) {
      pick(behind, `${behind.map((r) => `${rankLabel(r.rank, r.runId)} stopped at step ${r.progress.lastStep}`).join('; ')}, behind the others at step ${maxStep}`);
      return;
    }
    const cpu = stalled.map((r) => ({ r, c: this.cpuPercent(r.runId) })).filter((x) => x.c !== null) as Array<{ r: RankInput; c: number }>;
    const busy = cpu.filter((x) => x.c >= 50);
    if (cpu.length >= 2 && busy.length > 0 && busy.length < cpu.length && cpu.filter((x) => x.c < 10).length === cpu.length - busy.length) {
      pick(busy.map((x) => x.r), `${busy.map((x) => `${rankLabel(x.r.rank, x.r.runId)} is busy (${Math.round(x.c)} % CPU)`).join('; ')} while the others sleep`);
    }
  }

  private event(nowS: number, kind: HealthEvent['kind'], rs: readonly RankInput[], evidence: string): HealthEvent {
    return { at: nowS, kind, group: this.group, ranks: rs.map((r) => r.rank), runIds: rs.map((r) => r.runId), evidence };
  }
}

function fmtS(s: number): string {
  return s >= 10 ? `${s.toFixed(0)} s` : s >= 1 ? `${s.toFixed(1)} s` : `${(s * 1000).toFixed(0)} ms`;
}

function pct(f: number): string {
  return `${Math.round(f * 100)} %`;
}
