// Issue 21: a rank's step rate over time (daemon/health/history.ts), as the
// monitor samples it once a tick, and its stored form read back
// (src/health.ts stepRatePoints). The daemon keeping it for real ranks is in
// rate.test.ts.
import { describe, expect, it } from 'vitest';
import { RateHistory, RATE_EVERY_S, RATE_MAX } from '../../daemon/health/history.js';
import { stepRatePoints, type StepRateSeries } from '../../src/health.js';

describe('step rate history', () => {
  it('one sample per 5 s of ticks; the rate between samples is the steps over the seconds (a stall reads 0)', () => {
    const h = new RateHistory();
    expect(h.sample(1000, -1)).toBe(false); // no step yet
    let step = 0;
    for (let t = 1000; t <= 1060; t++) {
      if (t < 1030) step += 10; // 10 steps/s, then nothing
      h.sample(t, step);
    }
    expect(h.length).toBe(13); // 1000, 1005, …, 1060
    const pts = stepRatePoints(h.series());
    expect(pts.map((p) => p.at)).toEqual([1005, 1010, 1015, 1020, 1025, 1030, 1035, 1040, 1045, 1050, 1055, 1060]);
    expect(pts.slice(0, 5).map((p) => p.stepsPerS)).toEqual([10, 10, 10, 10, 10]);
    expect(pts[5].stepsPerS).toBe(8); // 1025..1030: four ticks of 10 steps, then the stall
    expect(pts.slice(6).every((p) => p.stepsPerS === 0)).toBe(true);
    expect(pts.at(-1)!.step).toBe(step);
    expect(pts[0].from).toBe(1000);
    for (let i = 1; i < pts.length; i++) expect(pts[i].from).toBe(pts[i - 1].at);
  });

  it('bounded: a day of samples keeps at most 240: the first one, the last 10 min as taken, older ones evenly spaced; the rates stay exact', () => {
    const h = new RateHistory();
    let step = 0;
    const t0 = 50_000;
    const day = 24 * 3600;
    for (let t = t0; t <= t0 + day; t += RATE_EVERY_S) {
      // 4 steps/s, except an hour at 1 step/s in the middle of the day.
      step += t > t0 + 12 * 3600 && t <= t0 + 13 * 3600 ? RATE_EVERY_S : 4 * RATE_EVERY_S;
      h.sample(t, step);
      expect(h.length).toBeLessThanOrEqual(RATE_MAX);
    }
    const s = h.series()!;
    expect(s.t0).toBe(t0); // the whole run stays covered
    const pts = stepRatePoints(s);
    expect(pts.at(-1)!.at).toBe(t0 + day);
    expect(pts.at(-1)!.step).toBe(step);
    // The newest 10 min: one point per 5 s.
    const recent = pts.filter((p) => p.at > t0 + day - 600);
    expect(recent.length).toBeGreaterThanOrEqual(119);
    expect(recent.every((p) => p.stepsPerS === 4)).toBe(true);
    // Further back, coarser, and the slow hour is still seen.
    const slow = pts.filter((p) => p.at > t0 + 12 * 3600 + 600 && p.at <= t0 + 13 * 3600);
    expect(slow.length).toBeGreaterThanOrEqual(2); // the older samples are spaced evenly (here 1280 s): an hour is seen wherever it lies
    for (const p of slow) expect(p.stepsPerS).toBeLessThan(4);
    // Stored small: delta-encoded, tenths of a second.
    expect(JSON.stringify(s).length).toBeLessThan(3000);
  });

  it('a stored series that is missing or malformed reads as no points', () => {
    expect(stepRatePoints(undefined)).toEqual([]);
    expect(stepRatePoints({ everyS: 5 } as unknown as StepRateSeries)).toEqual([]);
    expect(stepRatePoints({ everyS: 5, t0: 1, s0: 0, dt: [5, -1, 5], ds: [1, 1, 1] })).toEqual([{ from: 1, at: 6, step: 1, stepsPerS: 0.2 }]);
  });
});
