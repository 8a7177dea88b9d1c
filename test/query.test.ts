// The local query source behind `logd runs`: filters by tag and text, paging,
// and a list that says when it was cut.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeEnv, script, runScript, cli, cliJson, type TestEnv } from './helpers.js';

let t: TestEnv;
beforeAll(async () => {
  t = makeEnv();
  const w = script(t, 'make-runs.mjs', `
    const specs = [
      { project: 'vision', name: 'resnet-a', tags: ['hot'], notes: 'first try' },
      { project: 'vision', name: 'resnet-b', tags: ['cold'] },
      { project: 'text', name: 'gpt_small', tags: ['hot', 'big'], group: 'sweep-1' },
      { project: 'text', name: 'gpt%50', tags: [], group: 'sweep-1', notes: 'percent in the name' },
    ];
    for (const s of specs) {
      const run = await logd.init(s);
      run.log({ loss: 1 });
      await run.finish();
    }
  `);
  const r = await runScript(t, w);
  expect(r.exitCode, r.stderr).toBe(0);
});
afterAll(async () => t && (await t.cleanup()));

const names = (runs: Array<{ name: string }>) => runs.map((r) => r.name).sort();

describe('logd runs (local source)', () => {
  it('filters by tag, by text (case-insensitive, % and _ taken literally) and by group', async () => {
    expect(names(await cliJson(t, ['runs', '--tag', 'hot']))).toEqual(['gpt_small', 'resnet-a']);
    expect(names(await cliJson(t, ['runs', '--search', 'RESNET']))).toEqual(['resnet-a', 'resnet-b']);
    expect(names(await cliJson(t, ['runs', '--search', '%']))).toEqual(['gpt%50']);
    expect(names(await cliJson(t, ['runs', '--search', '_small']))).toEqual(['gpt_small']);
    expect(names(await cliJson(t, ['runs', '--search', 'first try']))).toEqual(['resnet-a']);
    expect(names(await cliJson(t, ['runs', '--group', 'sweep-1', '--tag', 'big']))).toEqual(['gpt_small']);
    expect(await cliJson(t, ['runs', '--tag', 'nope'])).toEqual([]);
  });

  it('pages with --limit and --offset, and says on stderr when the list was cut', async () => {
    const all = (await cliJson<Array<{ id: string }>>(t, ['runs'])).map((r) => r.id);
    expect(all).toHaveLength(4);
    const first = await cli(t, ['runs', '--limit', '3', '--json']);
    expect(JSON.parse(first.stdout).map((r: { id: string }) => r.id)).toEqual(all.slice(0, 3));
    expect(first.stderr).toContain('showing 3 of 4 runs, newest first; see more with --limit 4');
    const second = await cli(t, ['runs', '--limit', '3', '--offset', '3', '--json']);
    expect(JSON.parse(second.stdout).map((r: { id: string }) => r.id)).toEqual(all.slice(3));
    expect(second.stderr).toContain('showing runs 4-4 of 4');
    const whole = await cli(t, ['runs']);
    expect(whole.stderr).not.toContain('showing');
  });

  it('an unknown run is a clear error naming the store, for show and export', async () => {
    for (const cmd of ['show', 'export']) {
      const r = await cli(t, [cmd, 'no-such-run'], { reject: false });
      expect(r.exitCode).toBe(1);
      expect(r.stderr).toMatch(/run "no-such-run" does not exist in the local store/);
    }
  });
});
