// Issue 21: the judgements on synthetic progress (daemon/health/judge.ts is
// pure: it judges what it is given at the time it is given). The real
// torchrun jobs are in test/python/health.test.ts.
import { describe, expect, it } from 'vitest';
import { GroupJudge, type RankInput } from '../../daemon/health/judge.js';
import { StepProgress } from '../../daemon/health/progress.js';
import { HEALTH_DEFAULTS, thresholdsFrom } from '../../src/health.js';

const T = HEALTH_DEFAULTS;

function rank(r: number, progress = new StepProgress()): RankInput {
  return { runId: `run${r}`, rank: r, host: 'h', pid: 1000 + r, alive: true, ended: null, progress, cpuS: 0 };
}

/** Each rank logs `steps` steps of `stepS` seconds from `t0` (with a deterministic ±jitter), one batch per step. */
function advance(ranks: RankInput[], from: number, steps: number, t0: number, stepS: number, jitter = 0, cpuPerStep?: (r: RankInput) => number): number {
  let t = t0;
  for (let s = from; s < from + steps; s++) {
    t += stepS * (1 + jitter * Math.sin(s * 12.9898));
    for (const r of ranks) {
      r.progress.observe(Float64Array.of(s), Float64Array.of(t), 1, t);
      if (cpuPerStep) r.cpuS = (r.cpuS ?? 0) + cpuPerStep(r);
    }
  }
  return t;
}

/** Four ranks, 120 steps judged every 2; rank 3 uses 30 % more CPU per step from step 40 on. */
function stragglerJob() {
  const ranks = [0, 1, 2, 3].map((r) => rank(r));
  const j = new GroupJudge('g');
  let t = 1000;
  const events = [];
  for (let s = 0; s < 120; s += 2) {
    t = advance(ranks, s, 2, t, 0.25, 0.1, (r) => (r.rank === 3 && s >= 40 ? 0.13 : 0.1));
    events.push(...j.tick(t + 0.05, ranks, T).events);
  }
  return { ranks, j, t, events };
}

describe('rank health judgements', () => {
  it('a healthy group with ±15 % jitter, judged every tick for 300 steps: no event', () => {
    const ranks = [0, 1, 2, 3].map((r) => rank(r));
    const j = new GroupJudge('g');
    let t = 1000;
    const events = [];
    for (let s = 0; s < 300; s += 4) {
      t = advance(ranks, s, 4, t, 0.25, 0.15, () => 0.2 * (1 + 0.15 * Math.random()));
      events.push(...j.tick(t + 0.1, ranks, T).events);
    }
    expect(events).toEqual([]);
  });

  it('every rank stops: one `job stalled` after max(K × median, floor), the rank behind is named, then `recovered`', () => {
    const ranks = [0, 1, 2, 3].map((r) => rank(r));
    const j = new GroupJudge('g');
    let t = advance(ranks, 0, 30, 1000, 0.2);
    advance([ranks[0], ranks[1], ranks[3]], 30, 1, t, 0.2); // rank 2 stops one step earlier
    expect(j.tick(t + 1, ranks, T).jobStalled).toBeNull();
    const at = t + T.stallFloorS + 0.5;
    const res = j.tick(at, ranks, T);
    expect(res.jobStalled?.kind).toBe('job stalled');
    expect(res.progress.every((p) => p.state === 'stalled')).toBe(true);
    j.nameCause(res.jobStalled!, ranks, []);
    expect(res.jobStalled!.cause!.ranks).toEqual([2]);
    expect(j.tick(at + 1, ranks, T).jobStalled).toBeNull(); // once per episode
    t = advance(ranks, 31, 2, at + 5, 0.2);
    const back = j.tick(t + 0.1, ranks, T).events.filter((e) => e.kind === 'recovered');
    expect(back).toHaveLength(1);
    expect(back[0].ranks.sort()).toEqual([0, 1, 2, 3]);
  });

  it('stacks name the rank outside the collective when every rank is at the same step', () => {
    const ranks = [0, 1, 2, 3].map((r) => rank(r));
    const j = new GroupJudge('g');
    const t = advance(ranks, 0, 30, 1000, 0.2);
    const e = j.tick(t + T.stallFloorS + 1, ranks, T).jobStalled!;
    const stack = (r: number, inCollective: boolean) => ({ rank: r, runId: `run${r}`, pid: 1, text: '', inCollective, top: inCollective ? 'backward' : 'train.py' , cpuPercent: 0 });
    j.nameCause(e, ranks, [stack(0, true), stack(1, true), stack(2, false), stack(3, true)]);
    expect(e.cause?.ranks).toEqual([2]);
    expect(e.cause?.why).toMatch(/outside the collective/);
  });

  it('a rank that died stalls the rest: the dead rank is the cause', () => {
    const ranks = [0, 1, 2].map((r) => rank(r));
    const j = new GroupJudge('g');
    const t = advance(ranks, 0, 20, 1000, 0.2);
    ranks[1] = { ...ranks[1], alive: false, ended: { state: 'crashed', at: t + 0.5, reason: 'process exited' } };
    j.tick(t + 1, ranks, T);
    const e = j.tick(t + T.stallFloorS + 1, ranks, T).jobStalled!;
    j.nameCause(e, ranks, []);
    expect(e.cause?.ranks).toEqual([1]);
    expect(e.cause?.why).toMatch(/crashed/);
    // With the survivors' stacks inside the collective, the cause says so; the dead rank comes first whatever the stacks.
    const stack = (r: number, inCollective: boolean) => ({ rank: r, runId: `run${r}`, pid: 1, text: '', inCollective, top: '', cpuPercent: 0 });
    j.nameCause(e, ranks, [stack(2, true), stack(0, true)]);
    expect(e.cause).toMatchObject({ ranks: [1], why: 'rank 1 ended crashed (process exited) while the others ran on: rank 0, rank 2 wait inside the collective (their stacks)' });
    j.nameCause(e, ranks, [stack(2, false), stack(0, true)]);
    expect(e.cause?.ranks).toEqual([1]);
  });

  it('a straggler: CPU per step 30 % above the others, over the window; nobody else is named', () => {
    const { events } = stragglerJob();
    expect(events.map((e) => `${e.kind}:${e.ranks.join(',')}`)).toEqual(['straggler:3']);
  });

  it('a straggler is not cleared by CPU the others spend after their last step (finishing, exiting), nor by one noisy tick; it is when it steps at their pace again', () => {
    const job = stragglerJob();
    const { ranks, j, events } = job;
    let t = job.t;
    expect(events.map((e) => `${e.kind}:${e.ranks.join(',')}`)).toEqual(['straggler:3']);
    // The job's last step is done; ranks 0-2 burn a second of CPU each tick on their way out, rank 3 none.
    for (let k = 0; k < 6; k++) {
      t += 0.5;
      for (const r of ranks) if (r.rank !== 3) r.cpuS = (r.cpuS ?? 0) + 1;
      events.push(...j.tick(t, ranks, T).events);
    }
    expect(events.map((e) => `${e.kind}:${e.ranks.join(',')}`)).toEqual(['straggler:3']);
    // Rank 3 steps at the others' pace again: `recovered`, after as many calm ticks as it took to be named.
    const kinds: string[][] = [];
    for (let s = 120; s < 200; s += 2) {
      t = advance(ranks, s, 2, t, 0.25, 0.1, () => 0.1);
      kinds.push(j.tick(t + 0.05, ranks, T).events.map((e) => `${e.kind}:${e.ranks.join(',')}`));
    }
    const at = kinds.findIndex((k) => k.length > 0);
    expect(kinds.flat()).toEqual(['recovered:3']);
    expect(at).toBeGreaterThan(0);
  });

  it('a rank whose step times are irregular (bursts, then pauses) is not judged on its pauses', () => {
    const ranks = [0, 1].map((r) => rank(r));
    const j = new GroupJudge('g');
    let t = 1000;
    for (let burst = 0; burst < 12; burst++) {
      for (let k = 0; k < 3; k++) for (const r of ranks) r.progress.observe(Float64Array.of(burst * 3 + k), Float64Array.of(t + k * 0.001), 1, t + 1);
      t += 2 + burst;
    }
    const res = j.tick(t + 60, ranks, T);
    expect(res.events).toEqual([]);
    expect(res.jobStalled).toBeNull();
  });

  it('ranks with too few steps, or a run that opted out, are not judged', () => {
    const ranks = [0, 1].map((r) => rank(r));
    const t = advance(ranks, 0, 4, 1000, 0.2);
    expect(new GroupJudge('g').tick(t + 100, ranks, T).jobStalled).toBeNull();
    const more = advance(ranks, 4, 20, t, 0.2);
    const off = thresholdsFrom({ 'logd.health': { enabled: false, stallK: 'x' } });
    expect(off).toMatchObject({ enabled: false, stallK: T.stallK });
    expect(new GroupJudge('g').tick(more + 100, ranks, off).jobStalled).toBeNull();
    expect(thresholdsFrom({ 'logd.health': { stallFloorS: 30 } }).stallFloorS).toBe(30);
  });
});
