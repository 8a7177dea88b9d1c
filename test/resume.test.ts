// Issue 19, first slice: init({ id, resume }) continues a run of this node's
// store as a new attempt: running again, its config merged, its steps going
// on from the last stored step, its attempts recorded (and kept across a
// daemon restart). Refusals name what to do. Real processes, a real daemon.
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, cli, cliJson, exportJsonl, script, runScript, spawnScript, startDaemon, killDaemon, waitUntil, type TestEnv } from './helpers.js';

let t: TestEnv;
afterEach(async () => {
  if (!t) return;
  await killDaemon(t.dir);
  await t.cleanup();
});

/** A process that opens run `id` with `resume`, logs `n` rows (auto steps), and finishes (or dies with `how`). */
function worker(env: TestEnv): string {
  return script(env, 'w.mjs', `
    const [id, resume, n, how, cfg] = process.argv.slice(2);
    let run;
    try {
      run = await logd.init({ project: 'resume', name: 'r', id, ...(resume === '-' ? {} : { resume }), config: JSON.parse(cfg ?? '{}'), onError: 'raise' });
    } catch (e) {
      console.log('error ' + e.message);
      process.exit(3);
    }
    for (let i = 0; i < Number(n); i++) run.log({ loss: i });
    if (how === 'hang') { await run.flush(10000); console.log('holding'); await new Promise((r) => setTimeout(r, 60000)); }
    if (how === 'kill') { await run.flush(10000); process.kill(process.pid, 'SIGKILL'); }
    const res = await run.finish();
    console.log('done ' + res.state);
  `);
}

describe('init({ resume }) continues a run as a new attempt', () => {
  it("'allow' and 'must': one run, steps go on, config merged, both attempts recorded; a daemon restart keeps them", async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    await startDaemon(t);
    const w = worker(t);
    expect((await runScript(t, w, ['job1', 'allow', '10', '', '{"a":1}'])).stdout).toContain('done finished'); // created
    expect((await runScript(t, w, ['job1', 'allow', '5', '', '{"b":2}'])).stdout).toContain('done finished'); // continued
    let info = await cliJson(t, ['show', 'job1']);
    expect(info).toMatchObject({ state: 'finished', historyRows: 15, config: { a: 1, b: 2 } });
    expect(info.metadata.attempts.map((a: any) => [a.n, a.state, a.fromStep])).toEqual([[1, 'finished', 0], [2, 'finished', 10]]);
    expect((await exportJsonl(t, 'job1')).map((r) => r._step)).toEqual(Array.from({ length: 15 }, (_, i) => i));
    // The attempts live in the run's log: a fresh daemon reads them back, and a third attempt follows.
    await killDaemon(t.dir);
    await startDaemon(t);
    expect((await runScript(t, w, ['job1', 'must', '3'])).stdout).toContain('done finished');
    info = await cliJson(t, ['show', 'job1']);
    expect(info.historyRows).toBe(18);
    expect(info.metadata.attempts.map((a: any) => [a.n, a.state, a.fromStep])).toEqual([[1, 'finished', 0], [2, 'finished', 10], [3, 'finished', 15]]);
    expect((await exportJsonl(t, 'job1')).map((r) => r._step)).toEqual(Array.from({ length: 18 }, (_, i) => i));
    const human = (await cli(t, ['show', 'job1'])).stdout;
    expect(human).toMatch(/attempts: 3\n  1: from step 0, .*; finished .*\n  2: from step 10, .*\n  3: from step 15, /);
  });

  it('a run whose owner was killed is continued; the killed attempt reads crashed', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    await startDaemon(t);
    const w = worker(t);
    const first = await runScript(t, w, ['job2', 'allow', '7', 'kill']);
    expect(first.signal).toBe('SIGKILL');
    const second = await runScript(t, w, ['job2', 'must', '4']); // at once: the daemon may not have seen the death yet
    expect(second.stdout, second.stderr).toContain('done finished');
    const info = await cliJson(t, ['show', 'job2']);
    expect(info.metadata.attempts.map((a: any) => a.state)).toEqual(['crashed', 'finished']);
    expect((await exportJsonl(t, 'job2')).map((r) => r._step)).toEqual(Array.from({ length: 11 }, (_, i) => i));
  });

  it("refusals: 'must' of an unknown id, an existing id without resume or with 'never', a run held by a live owner, a bad value", async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    await startDaemon(t);
    const w = worker(t);
    const unknown = await runScript(t, w, ['nosuch', 'must', '1']);
    expect(unknown.stdout).toMatch(/error .*run nosuch does not exist in .*resume='allow' creates it/);
    expect((await runScript(t, w, ['job3', '-', '2'])).stdout).toContain('done finished');
    for (const r of ['-', 'never']) expect((await runScript(t, w, ['job3', r, '1'])).stdout).toMatch(/error .*run job3 already exists; continue it with resume='allow'/);
    const holder = spawnScript(t, w, ['job4', 'allow', '2', 'hang']);
    try {
      await waitUntil(() => holder.lines.includes('holding'), 20_000, 'the owner to hold its run');
      const held = await runScript(t, w, ['job4', 'allow', '1']);
      expect(held.stdout).toMatch(new RegExp(`error .*run job4 is still running, held by pid ${holder.pid} on \\S+`));
    } finally {
      holder.kill('SIGKILL');
    }
    const bad = await runScript(t, w, ['job3', 'sometimes', '1']);
    expect(bad.stdout).toMatch(/error logd: resume "sometimes" must be 'allow', 'must' or 'never'/);
    expect((await cliJson(t, ['show', 'job3'])).historyRows).toBe(2); // nothing of the refused attempts
  });
});
