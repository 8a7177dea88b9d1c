// Issue 23: the runs table's filter and sort, in `logd runs` (--filter,
// --sort, --columns) and as the expression language itself (src/run-filter.ts,
// which the dashboard's /api/runs reads too).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeEnv, cli, cliJson, script, runScript, type TestEnv } from './helpers.js';
import { parseFilter, matches, selectRuns, fieldValue, FilterError } from '../src/run-filter.js';

describe('filter expressions', () => {
  const run = { id: 'a1', name: 'bert', project: 'p', group: 'g', state: 'crashed', tags: ['x', 'y'], historyRows: 10, createdAt: '2026-11-25T10:00:00.000Z',
    config: { lr: 0.003, 'opt/name': 'adam', model: { layers: 12, 'd.k': 64 }, amp: true }, summary: { loss: 0.2, 'eval/acc': 0.9 }, metadata: { rank: { rank: 3 }, host: 'vm', node: 'node-b' } };
  it('parses terms joined by ;, commas and "and", with quoted values', () => {
    expect(parseFilter('lr < 0.01; state = crashed, name ~ "be" and tags = x').map((t) => [t.field, t.op, t.value])).toEqual([
      ['lr', '<', '0.01'], ['state', '=', 'crashed'], ['name', '~', 'be'], ['tags', '=', 'x']]);
    expect(parseFilter("notes = 'a; b'")[0].value).toBe('a; b');
    expect(parseFilter('')).toEqual([]);
    expect(() => parseFilter('lr <')).toThrow(/no value after "<"/);
    expect(() => parseFilter('lr')).toThrow(FilterError);
    expect(() => parseFilter('lr =< 1')).toThrow(/unknown operator|=</);
  });
  it('reads run fields, config and summary keys (bare names: config first), nested config by dotted paths', () => {
    expect(fieldValue(run, 'lr')).toBe(0.003);
    expect(fieldValue(run, 'config.model.layers')).toBe(12);
    expect(fieldValue(run, 'model.d.k')).toBe(64);
    expect(fieldValue(run, 'opt/name')).toBe('adam');
    expect(fieldValue(run, 'summary.eval/acc')).toBe(0.9);
    expect(fieldValue(run, 'loss')).toBe(0.2);
    expect(fieldValue(run, 'rank')).toBe(3);
    expect(fieldValue(run, 'node')).toBe('node-b');
    expect(fieldValue(run, 'nothing')).toBeUndefined();
  });
  it('compares numbers as numbers, text as text; a missing field fails all but !=', () => {
    const m = (e: string) => matches(run, parseFilter(e));
    expect(m('lr < 0.01')).toBe(true);
    expect(m('lr < 1e-3')).toBe(false);
    expect(m('lr >= 0.003 and state = crashed')).toBe(true);
    expect(m('state != crashed')).toBe(false);
    expect(m('amp = true')).toBe(true);
    expect(m('tags = y')).toBe(true);
    expect(m('tags != y')).toBe(false);
    expect(m('name ~ ER')).toBe(true);
    expect(m('created > 2026-11-01')).toBe(true);
    expect(m('rows <= 10')).toBe(true);
    expect(m('missing = 1')).toBe(false);
    expect(m('missing != 1')).toBe(true);
  });
  it('sorts by a field, runs without it last either way, ties newest first', () => {
    const rs = [
      { id: 'a', createdAt: '1', config: { lr: 0.1 } }, { id: 'b', createdAt: '2', config: {} },
      { id: 'c', createdAt: '3', config: { lr: 0.001 } }, { id: 'd', createdAt: '4', config: { lr: 0.1 } },
    ];
    expect(selectRuns(rs, [], 'lr', false).map((r) => r.id)).toEqual(['c', 'd', 'a', 'b']);
    expect(selectRuns(rs, [], 'lr', true).map((r) => r.id)).toEqual(['d', 'a', 'c', 'b']);
    expect(selectRuns(rs, parseFilter('lr > 0.01'), 'lr', true).map((r) => r.id)).toEqual(['d', 'a']);
  });
});

describe('keys named like Object.prototype', () => {
  it('__proto__ and constructor are config keys like any other, never the filter\'s own fields', () => {
    const withKeys = { name: 'a', config: JSON.parse('{"__proto__": "x", "constructor": 1}') as Record<string, unknown> };
    const plain = { name: 'b', config: { lr: 0.1 } };
    expect(selectRuns([withKeys, plain], parseFilter('__proto__ = x')).map((r) => r.name)).toEqual(['a']);
    expect(selectRuns([withKeys, plain], parseFilter('constructor = 1')).map((r) => r.name)).toEqual(['a']);
    expect(fieldValue(plain, '__proto__')).toBeUndefined();
    expect(fieldValue(plain, 'constructor')).toBeUndefined();
  });
});

describe('logd runs --filter / --sort / --columns', () => {
  let t: TestEnv;
  const ids: Record<string, string> = {};
  beforeAll(async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    const file = script(t, 'r.mjs', `
      const s = JSON.parse(process.argv[2]);
      const run = await logd.init({ project: 'sweep', name: s.name, config: s.config });
      run.log({ loss: s.loss }, { step: 0 });
      run.summary.update({ acc: s.acc });
      await run.finish({ exitCode: s.crash ? 1 : 0 });
      console.log(run.id);
    `);
    for (const s of [
      { name: 'a', config: { lr: 0.1, batch: 32 }, loss: 1, acc: 0.5 },
      { name: 'b', config: { lr: 0.003, batch: 64 }, loss: 0.2, acc: 0.9 },
      { name: 'c', config: { lr: 0.03, batch: 64 }, loss: 0.5, acc: 0.7, crash: true },
      { name: 'd', config: { lr: 0.0003, batch: 128 }, loss: 0.4, acc: 0.8 },
    ]) {
      const r = await runScript(t, file, [JSON.stringify(s)]);
      expect(r.exitCode, r.stderr).toBe(0);
      ids[s.name] = r.stdout.trim().split('\n').pop()!;
    }
  }, 60_000);
  afterAll(async () => t && (await t.cleanup()));
  const names = async (...args: string[]) => (await cliJson<Array<{ name: string }>>(t, ['runs', ...args])).map((r) => r.name);

  it('filters by config, summary and state; sorts by a config or summary key, either way; pages after filtering', async () => {
    expect(await names('--filter', 'lr < 0.01', '--sort', 'config.lr')).toEqual(['d', 'b']);
    expect(await names('--filter', 'state = crashed')).toEqual(['c']);
    expect(await names('--filter', 'batch = 64', '--filter', 'acc > 0.8')).toEqual(['b']);
    expect(await names('--sort', '-summary.acc')).toEqual(['b', 'd', 'c', 'a']);
    expect(await names('--sort=-summary.acc', '--limit', '2', '--offset', '1')).toEqual(['d', 'c']);
    expect(await names('--sort', 'summary.loss', '--filter', 'state != crashed')).toEqual(['b', 'd', 'a']);
  });

  it('prints the chosen columns; says when the list was cut; a bad expression exits 2 saying why', async () => {
    const table = (await cli(t, ['runs', '--sort', 'config.lr', '--columns', 'config.lr,summary.acc,config.missing'])).stdout.split('\n');
    expect(table[0]).toMatch(/^ID +PROJECT +GROUP +NAME +STATE +ROWS +RANK +CONFIG\.LR +SUMMARY\.ACC +CONFIG\.MISSING +CREATED$/);
    expect(table[1]).toMatch(new RegExp(`^${ids.d} +sweep +- +d +finished +1 +- +0\\.0003 +0\\.8 +- +\\d{4}-`));
    const cut = await cli(t, ['runs', '--sort', 'config.lr', '--limit', '1']);
    expect(cut.stderr).toContain('logd: showing 1 of 4 runs, by config.lr; see more with --limit 4');
    const bad = await cli(t, ['runs', '--filter', 'lr <'], { reject: false });
    expect(bad.exitCode).toBe(2);
    expect(bad.stderr).toContain('logd: --filter: "lr <": no value after "<"');
  });
});

describe('a summary key\'s range: KEY.min, KEY.max, KEY.best (issue 38, item 10)', () => {
  let t: TestEnv;
  const ids: Record<string, string> = {};
  beforeAll(async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    // loss falls then spikes at the end; acc rises then falls: their last values are not their best.
    const file = script(t, 'r.mjs', `
      const s = JSON.parse(process.argv[2]);
      const run = await logd.init({ project: 'range', name: s.name });
      s.loss.forEach((loss, step) => run.log({ loss, acc: s.acc[step] }, { step }));
      await run.finish();
      console.log(run.id);
    `);
    for (const s of [
      { name: 'spiky', loss: [1, 0.3, 0.1, 0.9], acc: [0.2, 0.7, 0.95, 0.5] },
      { name: 'steady', loss: [1, 0.6, 0.4, 0.35], acc: [0.2, 0.5, 0.6, 0.65] },
    ]) {
      const r = await runScript(t, file, [JSON.stringify(s)]);
      expect(r.exitCode, r.stderr).toBe(0);
      ids[s.name] = r.stdout.trim().split('\n').pop()!;
    }
  }, 60_000);
  afterAll(async () => t && (await t.cleanup()));

  it('columns, sorts and filters by the range of every value logged; logd show prints it beside the last value', async () => {
    const table = (await cli(t, ['runs', '--sort', 'summary.loss.min', '--columns', 'summary.loss,summary.loss.min,summary.loss.max,summary.loss.best,summary.acc.best'])).stdout.split('\n');
    expect(table[1]).toMatch(new RegExp(`^${ids.spiky} .* 0\\.9 +0\\.1 +1 +0\\.1 +0\\.95 +\\d{4}-`));
    expect(table[2]).toMatch(new RegExp(`^${ids.steady} .* 0\\.35 +0\\.35 +1 +0\\.35 +0\\.65 +\\d{4}-`));
    // By the last loss the steady run is better; by the best one the spiky run is.
    const byLast = (await cliJson<Array<{ name: string }>>(t, ['runs', '--sort', 'summary.loss'])).map((r) => r.name);
    const byBest = (await cliJson<Array<{ name: string }>>(t, ['runs', '--sort', 'summary.loss.best'])).map((r) => r.name);
    expect(byLast).toEqual(['steady', 'spiky']);
    expect(byBest).toEqual(['spiky', 'steady']);
    expect((await cliJson<Array<{ name: string }>>(t, ['runs', '--filter', 'summary.acc.max > 0.9'])).map((r) => r.name)).toEqual(['spiky']);
    const shown = (await cli(t, ['show', ids.spiky])).stdout;
    expect(shown).toContain('range:   ');
    expect(shown).toMatch(/loss 0\.1 … 1 \(best 0\.1, 4 values\)/);
    expect(shown).toMatch(/acc 0\.2 … 0\.95 \(best 0\.95, 4 values\)/);
  });
});
