// The parameter views' axes and the compare page's differences, alone (no DOM):
// web/explore/axes.ts and web/compare/diff.ts.
import { describe, expect, it } from 'vitest';
import { makeAxis, linearTicks, logTicks, short, brushToParam, brushFromParam, inBrush } from '../../web/explore/axes.js';
import { labels, groupConfig, groupSummary, diffRows, flatten } from '../../web/compare/diff.js';

describe('an axis of the parameter views', () => {
  it('numbers: linear, or log when all positive and spanning 100x; missing and non-finite have no position', () => {
    const lin = makeAxis('batch', [32, 64, null, 128]);
    expect(lin.kind).toBe('linear');
    expect([lin.pos(32), lin.pos(80), lin.pos(128), lin.pos(null)]).toEqual([0, 0.5, 1, null]);
    expect(lin.missing).toBe(1);
    const log = makeAxis('lr', [1e-5, 1e-3, 1e-1, NaN as unknown as number]);
    expect(log.kind).toBe('log');
    expect(log.pos(1e-3)).toBeCloseTo(0.5, 12);
    expect(log.missing).toBe(1);
    expect(log.ticks().map((t) => t.label)).toEqual(['1e-5', '1e-4', '0.001', '0.01', '0.1']);
    // One value: the middle.
    expect(makeAxis('k', [3, 3]).pos(3)).toBe(0.5);
    expect(makeAxis('none', [null, null]).pos(1)).toBe(null);
  });

  it('numbers in some runs and text in others: one categorical axis in natural order, marked mixed', () => {
    const a = makeAxis('warmup', [100, 'linear', 20, 'cosine', null]);
    expect(a.kind).toBe('category');
    expect(a.mixed).toBe(true);
    expect(a.categories).toEqual(['20', '100', 'cosine', 'linear']);
    expect(a.pos(100)).toBeCloseTo(1 / 3, 12);
    expect(a.pos('100')).toBeCloseTo(1 / 3, 12);
    expect(a.pos(null)).toBe(null);
  });

  it('10 000 categories: every one has a place, at most 24 are labelled', () => {
    const vs = Array.from({ length: 10_000 }, (_, i) => `run-${i}`);
    const a = makeAxis('name', vs);
    expect(a.categories).toHaveLength(10_000);
    expect(a.ticks().length).toBeLessThanOrEqual(24);
    expect(a.pos('run-9999')).toBe(1);
  });

  it('ticks are round numbers; short() keeps about 4 digits', () => {
    expect(linearTicks(0, 1)).toEqual([0, 0.2, 0.4, 0.6, 0.8, 1]);
    expect(linearTicks(-3, 7)).toEqual([-2, 0, 2, 4, 6]);
    expect(logTicks(2e-4, 0.3)).toEqual([1e-3, 1e-2, 1e-1]);
    expect([short(0.000123), short(1234567), short(12.3456), short(0)]).toEqual(['1.23e-4', '1.23e6', '12.35', '0']);
  });

  it('a brush goes to the URL as values and back; a categorical one as its first and last category', () => {
    const lr = makeAxis('config.lr', [1e-5, 1e-3, 1e-1]);
    const b = { key: 'config.lr', lo: 0.25, hi: 0.75 };
    const back = brushFromParam(lr, brushToParam(lr, b))!;
    expect(back.lo).toBeCloseTo(0.25, 9);
    expect(back.hi).toBeCloseTo(0.75, 9);
    expect([inBrush(lr, back, 1e-3), inBrush(lr, back, 1e-5), inBrush(lr, back, null)]).toEqual([true, false, false]);
    const opt = makeAxis('config.opt', ['adam', 'sgd', 'lamb']);
    const cb = brushFromParam(opt, brushToParam(opt, { key: 'config.opt', lo: 0.4, hi: 1 }))!;
    expect([inBrush(opt, cb, 'adam'), inBrush(opt, cb, 'lamb'), inBrush(opt, cb, 'sgd')]).toEqual([false, true, true]);
    // Garbage in the URL is no brush.
    expect(brushFromParam(lr, 'not json')).toBe(null);
    expect(brushFromParam(lr, JSON.stringify(['config.lr', 'c', 'a', 'b']))).toBe(null);
  });
});

describe('what the compare page tells apart', () => {
  it('labels: names; where they repeat, the group; where that repeats too, a short id', () => {
    expect(labels([
      { kind: 'run', id: 'aaaaaaaa1', name: 'rank0', group: 'job-a' },
      { kind: 'run', id: 'bbbbbbbb1', name: 'rank0', group: 'job-b' },
      { kind: 'run', id: 'cccccccc1', name: 'rank0', group: 'job-b' },
      { kind: 'run', id: 'dddddddd1', name: 'solo', group: '' },
      { kind: 'group', id: 'job-a', name: 'job-a', group: 'job-a' },
    ])).toEqual(['rank0 · job-a', 'rank0 · job-b · bbbbbbbb', 'rank0 · job-b · cccccccc', 'solo', 'group job-a']);
  });

  it('a group: the config its runs share, a range or a count where they differ; the mean of each summary number', () => {
    const config = groupConfig([{ lr: 0.1, seed: 1, opt: 'adam' }, { lr: 0.1, seed: 3, opt: 'sgd' }, { lr: 0.1, seed: 2 }]);
    expect(config.lr).toBe(0.1);
    expect(config.seed).toEqual({ mixed: true, text: '1 – 3' });
    expect(config.opt).toEqual({ mixed: true, text: '2 values in 2 of 3 runs' });
    const summary = groupSummary([{ loss: 1, tag: 'x' }, { loss: 2, tag: 'x' }, { loss: 3 }]);
    expect(summary).toEqual({ loss: 2, tag: 'x' });
  });

  it('differences: keys that differ first (a key one item lacks differs), then the same ones', () => {
    const rows = diffRows([
      { kind: 'run', id: 'a', name: 'a', group: '', config: flatten({ lr: 0.1, model: { depth: 50 } }), summary: { loss: 1 } },
      { kind: 'run', id: 'b', name: 'b', group: '', config: flatten({ lr: 0.01, model: { depth: 50 }, dropout: 0.2 }), summary: { loss: 1 } },
    ]);
    expect(rows.map((r) => [r.key, r.same])).toEqual([['config.dropout', false], ['config.lr', false], ['config.model.depth', true], ['summary.loss', true]]);
    expect(rows[0].values).toEqual([undefined, 0.2]);
  });
});

describe('keys an attacker would try', () => {
  it('a config key named __proto__ is compared like any other, not taken as a prototype', () => {
    const a = flatten(JSON.parse('{"__proto__": {"polluted": 1}, "lr": 0.1}'));
    const b = flatten(JSON.parse('{"__proto__": {"polluted": 2}, "lr": 0.1}'));
    const rows = diffRows([
      { kind: 'run', id: 'a', name: 'a', group: '', config: a, summary: {} },
      { kind: 'run', id: 'b', name: 'b', group: '', config: b, summary: {} },
    ]);
    expect(rows.map((r) => [r.key, r.same])).toEqual([['config.__proto__.polluted', false], ['config.lr', true]]);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(groupConfig([JSON.parse('{"__proto__": 1}'), JSON.parse('{"__proto__": 1}')]).__proto__).toBe(1);
  });
});
