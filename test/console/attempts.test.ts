// A continued run (init(resume='allow'), a restarted job): `logd logs` and
// `logd media` say which attempt printed each line and logged each item, by
// real processes through a real daemon; a run of one attempt is marked nowhere.
import { describe, it, expect, beforeEach, afterEach } from 'vitest';
import { makeEnv, startDaemon, script, runScript, cli, type TestEnv } from '../helpers.js';

let t: TestEnv;
beforeEach(() => {
  t = makeEnv();
});
afterEach(async () => {
  await t.cleanup();
});

// One attempt of run "att": prints a line per step, logs a text per step, finishes.
const ATTEMPT = `
const first = Number(process.env.FIRST);
const run = await logd.init({ project: 'attempts', id: process.env.RUN_ID, resume: 'allow', console: true });
for (let step = first; step < first + 3; step++) {
  run.log({ loss: 1 / (step + 1), note: new logd.Text('attempt ' + process.env.N + ' step ' + step) }, { step });
  console.log('attempt', process.env.N, 'step', step);
}
const res = await run.finish();
process.stderr.write('STATE=' + res.state + '\\n');
`;

describe('attempts in logd logs and logd media', () => {
  it('a run continued twice: every line and item carries its attempt, and the text output opens each attempt with a heading', async () => {
    await startDaemon(t);
    const file = script(t, 'attempt.mjs', ATTEMPT);
    for (const [n, first] of [[1, 0], [2, 3], [3, 6]]) {
      const r = await runScript(t, file, [], { RUN_ID: 'att', FIRST: String(first), N: String(n) });
      expect(r.exitCode, r.stderr).toBe(0);
      expect(r.stderr).toContain('STATE=finished');
      await new Promise((res) => setTimeout(res, 20)); // attempts are told apart by time
    }

    const json = (await cli(t, ['logs', 'att', '--json'])).stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(json.map((l) => [l.attempt, l.line])).toEqual([
      [1, 'attempt 1 step 0'], [1, 'attempt 1 step 1'], [1, 'attempt 1 step 2'],
      [2, 'attempt 2 step 3'], [2, 'attempt 2 step 4'], [2, 'attempt 2 step 5'],
      [3, 'attempt 3 step 6'], [3, 'attempt 3 step 7'], [3, 'attempt 3 step 8'],
    ]);

    const text = (await cli(t, ['logs', 'att'])).stdout.trim().split('\n');
    expect(text).toHaveLength(12);
    expect(text[0]).toMatch(/^--- attempt 1 of 3: started \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC on .+ \(pid \d+\), from step 0 ---$/);
    expect(text.slice(1, 4)).toEqual(['attempt 1 step 0', 'attempt 1 step 1', 'attempt 1 step 2']);
    expect(text[4]).toMatch(/^--- attempt 2 of 3: .*, from step 3 ---$/);
    expect(text[8]).toMatch(/^--- attempt 3 of 3: .*, from step 6 ---$/);
    expect(text[11]).toBe('attempt 3 step 8');
    // --tail starts with the heading of the attempt its first line belongs to.
    expect((await cli(t, ['logs', 'att', '--tail', '2'])).stdout.trim().split('\n')).toEqual([
      expect.stringMatching(/^--- attempt 3 of 3: /), 'attempt 3 step 7', 'attempt 3 step 8',
    ]);

    const media = (await cli(t, ['media', 'att', '--json'])).stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(media.map((m) => [m.attempt, m.step, m.text])).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8].map((s) => [Math.floor(s / 3) + 1, s, `attempt ${Math.floor(s / 3) + 1} step ${s}`]));
    const mediaText = (await cli(t, ['media', 'att'])).stdout.trim().split('\n');
    expect(mediaText.filter((l) => l.startsWith('--- attempt '))).toHaveLength(3);
    expect(mediaText.findIndex((l) => l.startsWith('--- attempt 2 of 3'))).toBe(mediaText.findIndex((l) => l.includes('"attempt 2 step 3"')) - 1);

    // A run of one attempt: no attempt anywhere.
    const one = await runScript(t, file, [], { RUN_ID: 'single', FIRST: '0', N: '1' });
    expect(one.exitCode, one.stderr).toBe(0);
    const oneJson = (await cli(t, ['logs', 'single', '--json'])).stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(oneJson).toHaveLength(3);
    expect(oneJson.every((l) => !('attempt' in l))).toBe(true);
    expect((await cli(t, ['logs', 'single'])).stdout).not.toContain('--- attempt');
    expect((await cli(t, ['media', 'single', '--json'])).stdout).not.toContain('"attempt"');
  });

  it("a rewound run: logd media marks the earlier attempt's items above the step resumed from as superseded", async () => {
    await startDaemon(t);
    const file = script(t, 'rewind.mjs', `
      const [first, last, from] = process.argv.slice(2).map(Number);
      const run = await logd.init({ project: 'attempts', id: 'rw', ...(from >= 0 ? { resumeFrom: { runId: 'rw', step: from } } : {}) });
      for (let step = first; step <= last; step++) run.log({ loss: step, note: new logd.Text('s' + step + (from >= 0 ? ' again' : '')) }, { step });
      console.log((await run.finish()).state);
    `);
    const r1 = await runScript(t, file, ['0', '5', '-1']);
    expect(r1.stdout.trim(), r1.stderr).toBe('finished');
    await new Promise((res) => setTimeout(res, 20)); // attempts are told apart by time
    const r2 = await runScript(t, file, ['3', '6', '2']);
    expect(r2.stdout.trim(), r2.stderr).toBe('finished');
    const json = (await cli(t, ['media', 'rw', '--json'])).stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(json.map((m) => [m.attempt, m.step, m.superseded ?? false])).toEqual([
      [1, 0, false], [1, 1, false], [1, 2, false], [1, 3, true], [1, 4, true], [1, 5, true],
      [2, 3, false], [2, 4, false], [2, 5, false], [2, 6, false],
    ]);
    const text = (await cli(t, ['media', 'rw'])).stdout.split('\n');
    expect(text.filter((l) => l.endsWith('(superseded: a later attempt resumed from an earlier step)'))).toHaveLength(3);
    expect(text.find((l) => l.includes('"s3"'))).toMatch(/\(superseded: /);
    expect(text.find((l) => l.includes('"s3 again"'))).not.toMatch(/superseded/);
  });
});
