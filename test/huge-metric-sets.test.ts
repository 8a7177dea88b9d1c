// Issue 9 case 12: a run with a huge number of metric names. Every command
// works on it and it never breaks listing the others. The daemon's message
// limit is lowered to 4 MB here so that 100 000 names stand for the
// 1 000 000 names that overflow the default 64 MB (docs/reliability.md).
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, script, runScript, cli, cliJson, startDaemon, type TestEnv } from './helpers.js';

let t: TestEnv;
afterEach(async () => t && (await t.cleanup()));

const NAMES = 100_000;
const huge = `
  const run = await logd.init({ project: 'wide', name: 'huge' });
  for (let part = 0; part < 4; part++) {
    const row = {};
    for (let i = part * ${NAMES / 4}; i < (part + 1) * ${NAMES / 4}; i++) row['layer' + i + '/grad_norm'] = i;
    run.log(row, { step: part });
    await run.flush();
  }
  run.summary.update({ best: 1 });
  const res = await run.finish({ timeoutMs: 60_000 });
  console.log(JSON.stringify({ id: run.id, state: res.state, message: res.message }));
`;
const small = `
  const run = await logd.init({ project: 'narrow', name: 'small' });
  run.log({ loss: 0.5 });
  console.log(JSON.stringify({ id: run.id, state: (await run.finish()).state }));
`;

describe('issue 9 case 12: huge metric sets', () => {
  it(`a run with ${NAMES} metric names finishes, shows whole, exports, and never breaks listing the others`, async () => {
    t = makeEnv({ LOGD_MAX_MESSAGE_MB: '4' });
    await startDaemon(t);
    const s = await runScript(t, script(t, 'small.mjs', small));
    expect(s.exitCode, s.stderr).toBe(0);
    const h = await runScript(t, script(t, 'huge.mjs', huge), [], {}, 120_000);
    expect(h.exitCode, h.stderr).toBe(0);
    const hugeRun = JSON.parse(h.stdout.trim().split('\n').at(-1)!);
    expect(hugeRun.state).toBe('finished');
    const smallRun = JSON.parse(s.stdout.trim().split('\n').at(-1)!);

    const listed = await cliJson(t, ['runs']);
    expect(listed.map((r: { id: string }) => r.id).sort()).toEqual([hugeRun.id, smallRun.id].sort());
    const inList = listed.find((r: { id: string }) => r.id === hugeRun.id);
    expect(Object.keys(inList.summary).length).toBeLessThanOrEqual(1000);
    expect(inList.metadata.summaryCapped).toEqual({ shown: Object.keys(inList.summary).length, total: NAMES + 1 });
    expect(inList.summary.best).toBe(1); // summary.update() keys are never capped away first
    expect(listed.find((r: { id: string }) => r.id === smallRun.id).summary).toEqual({ loss: 0.5 });

    const shown = await cliJson(t, ['show', hugeRun.id, '--rows', '1']);
    expect(Object.keys(shown.summary)).toHaveLength(NAMES + 1);
    expect(shown.summary['layer99999/grad_norm']).toBe(NAMES - 1);
    expect(Object.keys(shown.metadata.stats)).toHaveLength(NAMES);
    expect(shown.metadata.summaryCapped).toBeUndefined();
    expect(shown.historyRows).toBe(4);

    const ex = await cli(t, ['export', hugeRun.id, '--format', 'jsonl']);
    const rows = ex.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(rows).toHaveLength(4);
    expect(rows.reduce((n, r) => n + Object.keys(r).length - 2, 0)).toBe(NAMES);
    const csv = await cli(t, ['export', hugeRun.id, '--format', 'csv']);
    expect(csv.stdout.split('\n')[0].split(',')).toHaveLength(NAMES + 2);
    expect((await cli(t, ['runs'])).stdout).toMatch(/huge/);
    expect((await cli(t, ['show', hugeRun.id])).stdout).toMatch(/layer99999\/grad_norm/);
  });
});
