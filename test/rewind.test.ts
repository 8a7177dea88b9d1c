// Issue 19, second slice: init({ id, resumeFrom }) rewinds a run to a
// checkpoint's step as a new attempt (rows above the step from earlier
// attempts stay stored, superseded; reads show the latest timeline, and
// every attempt's rows with --all-attempts), and init({ forkFrom }) starts a
// new run as the daemon's copy of another run's rows up to a step. Real
// processes, a real daemon, across a daemon restart.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, cli, cliJson, exportJsonl, script, runScript, startDaemon, killDaemon, type TestEnv } from './helpers.js';
import { startUi, getJson } from './ui/helpers.js';

let t: TestEnv;
afterEach(async () => {
  if (!t) return;
  await killDaemon(t.dir);
  await t.cleanup();
});

/**
 * A trainer: opens run `id` (`from` is `-`, `resume:S`, or `fork:RUN:S`), logs
 * steps `first`..`last` with loss = step + `offset`, then finishes, or
 * SIGKILLs itself with `how` = kill.
 */
function trainer(env: TestEnv): string {
  return script(env, 'trainer.mjs', `
    const [id, from, first, last, offset, how] = process.argv.slice(2);
    const opts = { project: 'rewind', name: 'r', id, config: { lr: 0.1, from }, onError: 'raise' };
    if (from.startsWith('resume:')) opts.resumeFrom = { runId: id, step: Number(from.slice(7)) };
    if (from.startsWith('fork:')) { const [, runId, step] = from.split(':'); opts.forkFrom = { runId, step: Number(step) }; }
    if (from.startsWith('other:')) opts.resumeFrom = { runId: from.slice(6), step: 1 };
    let run;
    try {
      run = await logd.init(opts);
    } catch (e) {
      console.log('error ' + e.message);
      process.exit(3);
    }
    for (let s = Number(first); s <= Number(last); s++) run.log({ loss: s + Number(offset) }, { step: s });
    if (how === 'kill') { await run.flush(10000); process.kill(process.pid, 'SIGKILL'); }
    const res = await run.finish();
    console.log('done ' + res.state);
  `);
}

const range = (a: number, b: number) => Array.from({ length: b - a + 1 }, (_, i) => a + i);

describe('resumeFrom rewinds a run; forkFrom copies one', () => {
  it('a writer killed at step 50 and resumed from 40: export shows 0..60 once (41..50 from the second attempt), --all-attempts the old rows superseded; a daemon restart and an index rebuild keep it', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    await startDaemon(t);
    const w = trainer(t);
    const first = await runScript(t, w, ['job', '-', '0', '50', '0', 'kill']);
    expect(first.signal).toBe('SIGKILL');
    const second = await runScript(t, w, ['job', 'resume:40', '41', '60', '1000']);
    expect(second.stdout, second.stderr).toContain('done finished');

    const check = async () => {
      const rows = await exportJsonl(t, 'job');
      expect(rows.map((r) => r._step)).toEqual(range(0, 60));
      expect(rows.filter((r) => (r._step as number) > 40).map((r) => r.loss)).toEqual(range(41, 60).map((s) => s + 1000));
      expect(rows.filter((r) => (r._step as number) <= 40).map((r) => r.loss)).toEqual(range(0, 40));
      const all = await exportJsonl(t, 'job', ['--all-attempts']);
      expect(all).toHaveLength(61 + 10);
      const old = all.filter((r) => r._superseded === true);
      expect(old.map((r) => [r._step, r.loss, r._attempt])).toEqual(range(41, 50).map((s) => [s, s, 1]));
      expect(all.filter((r) => r._superseded === false && (r._step as number) > 40).every((r) => r._attempt === 2)).toBe(true);
      const csv = (await cli(t, ['export', 'job', '--all-attempts', '--format', 'csv'])).stdout.trim().split('\n');
      expect(csv[0]).toBe('_step,_time,_attempt,_superseded,loss');
      expect(csv.filter((l) => /^45,[^,]*,1,true,45$/.test(l))).toHaveLength(1);
      const info = await cliJson(t, ['show', 'job']);
      expect(info).toMatchObject({ state: 'finished', historyRows: 61 });
      expect(info.metadata.supersededRows).toBe(10);
      expect(info.metadata.lastStep).toBe(60);
      expect(info.metadata.stats.loss).toMatchObject({ last: 1060, count: 61 });
      expect(info.metadata.attempts.map((a: any) => [a.n, a.state, a.fromStep, a.resumedFromStep])).toEqual([[1, 'crashed', 0, undefined], [2, 'finished', 41, 40]]);
      expect(info.lastRows.map((r: any) => [r._step, r.loss])).toEqual(range(56, 60).map((s) => [s, s + 1000]));
      const human = (await cli(t, ['show', 'job'])).stdout;
      expect(human).toMatch(/  2: from step 41 \(resumed from step 40\), /);
      expect(human).toMatch(/superseded: 10 row\(s\) of earlier attempts.*logd export job --all-attempts/);
    };
    await check();
    // The dashboard's charts read the latest timeline too.
    const ui = await startUi(t);
    try {
      const loss = (await getJson(ui, '/api/runs/job/history?keys=loss&points=1000')).body.series.loss;
      expect(loss.step).toEqual(range(0, 60));
      expect(loss.value[45]).toBe(1045);
    } finally {
      await ui.stop();
    }
    // The supersession is rebuilt from the log: by a fresh daemon, and by a rebuilt index.
    await killDaemon(t.dir);
    await startDaemon(t);
    await check();
    await killDaemon(t.dir);
    fs.rmSync(path.join(t.dataDir, 'index.db'));
    await startDaemon(t);
    await check();
  });

  it('rewinds twice: a third attempt from step 30 supersedes rows of both earlier attempts; log() without a step goes on from the step resumed', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    await startDaemon(t);
    const w = trainer(t);
    expect((await runScript(t, w, ['twice', '-', '0', '50', '0'])).stdout).toContain('done finished');
    expect((await runScript(t, w, ['twice', 'resume:40', '41', '45', '1000'])).stdout).toContain('done finished');
    expect((await runScript(t, w, ['twice', 'resume:30', '31', '35', '2000'])).stdout).toContain('done finished');
    const rows = await exportJsonl(t, 'twice');
    expect(rows.map((r) => r._step)).toEqual(range(0, 35));
    expect(rows.filter((r) => (r._step as number) > 30).map((r) => r.loss)).toEqual(range(31, 35).map((s) => s + 2000));
    const all = await exportJsonl(t, 'twice', ['--all-attempts']);
    const superseded = all.filter((r) => r._superseded).map((r) => [r._attempt as number, r._step as number]);
    expect(superseded.sort((a, b) => a[0] - b[0] || a[1] - b[1])).toEqual([...range(31, 50).map((s) => [1, s]), ...range(41, 45).map((s) => [2, s])]);
    // Without a step, log() continues from the step resumed + 1.
    const auto = script(t, 'auto.mjs', `
      const run = await logd.init({ project: 'rewind', id: 'twice', resumeFrom: { step: 33 }, onError: 'raise' });
      run.log({ loss: -1 });
      console.log('done ' + (await run.finish()).state);
    `);
    expect((await runScript(t, auto, [])).stdout).toContain('done finished');
    expect((await exportJsonl(t, 'twice')).map((r) => [r._step, r.loss]).slice(-2)).toEqual([[33, 2033], [34, -1]]);
  });

  it('refusals: a step beyond the last stored one (naming both), another run id, an unknown run, resume never, a bad step; nothing of them is stored', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    await startDaemon(t);
    const w = trainer(t);
    expect((await runScript(t, w, ['ref', '-', '0', '20', '0'])).stdout).toContain('done finished');
    const beyond = await runScript(t, w, ['ref', 'resume:25', '26', '30', '0']);
    expect(beyond.stdout).toMatch(/error .*resume_from step 25 is beyond run ref's last stored step 20; resume from a step up to 20/);
    const other = await runScript(t, w, ['ref', 'other:someone', '0', '0', '0']);
    expect(other.stdout).toMatch(/error logd: resumeFrom names run "someone" but id is "ref".*use forkFrom/);
    const unknown = script(t, 'unknown.mjs', `
      try { await logd.init({ id: 'nosuch', resumeFrom: { step: 3 }, onError: 'raise' }); } catch (e) { console.log('error ' + e.message); }
      try { await logd.init({ id: 'ref', resumeFrom: { step: 3 }, resume: 'never' }); } catch (e) { console.log('error ' + e.message); }
      try { await logd.init({ id: 'ref', resumeFrom: { step: -1 } }); } catch (e) { console.log('error ' + e.message); }
    `);
    const out = (await runScript(t, unknown, [])).stdout;
    expect(out).toMatch(/error .*run nosuch does not exist in .*resume_from rewinds a run this node's store holds/);
    expect(out).toMatch(/error logd: resume 'never' refuses to continue a run, and resumeFrom continues one/);
    expect(out).toMatch(/error logd: resumeFrom.step -1 must be a non-negative integer/);
    const info = await cliJson(t, ['show', 'ref']);
    expect(info.historyRows).toBe(21);
    expect(info.metadata.attempts).toBeUndefined();
    expect((await cliJson(t, ['runs'])).map((r: any) => r.id)).toEqual(['ref']);
  });

  it('forkFrom step 20: a new run with rows 0..20 (the source latest timeline), its config, and the link; refusals of a missing source and a step beyond its last', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    await startDaemon(t);
    const w = trainer(t);
    expect((await runScript(t, w, ['src', '-', '0', '30', '0'])).stdout).toContain('done finished');
    expect((await runScript(t, w, ['src', 'resume:15', '16', '30', '500'])).stdout).toContain('done finished'); // rows 16..30 of attempt 1 superseded
    const fork = await runScript(t, w, ['fk', 'fork:src:20', '21', '25', '9000']);
    expect(fork.stdout, fork.stderr).toContain('done finished');
    const rows = await exportJsonl(t, 'fk');
    expect(rows.map((r) => r._step)).toEqual(range(0, 25));
    expect(rows.map((r) => r.loss)).toEqual([...range(0, 15), ...range(16, 20).map((s) => s + 500), ...range(21, 25).map((s) => s + 9000)]);
    const info = await cliJson(t, ['show', 'fk']);
    expect(info.metadata.forkedFrom).toEqual({ runId: 'src', step: 20 });
    expect(info.config).toMatchObject({ lr: 0.1, from: 'fork:src:20' });
    expect(info.historyRows).toBe(26);
    expect((await cli(t, ['show', 'fk'])).stdout).toContain('forked from: run src at step 20');
    // log() without a step goes on from the fork's step + 1.
    const auto = script(t, 'fork-auto.mjs', `
      const run = await logd.init({ project: 'rewind', id: 'fk4', forkFrom: { runId: 'src', step: 7 }, onError: 'raise' });
      run.log({ loss: -1 });
      console.log('done ' + (await run.finish()).state);
    `);
    expect((await runScript(t, auto, [])).stdout).toContain('done finished');
    expect((await exportJsonl(t, 'fk4')).map((r) => r._step)).toEqual(range(0, 8));
    // The source is untouched.
    expect((await exportJsonl(t, 'src')).map((r) => r._step)).toEqual(range(0, 30));
    const missing = await runScript(t, w, ['fk2', 'fork:nosuch:3', '0', '0', '0']);
    expect(missing.stdout).toMatch(/error .*fork_from: run nosuch does not exist in .*; fork a run this node's store holds/);
    const beyond = await runScript(t, w, ['fk3', 'fork:src:31', '0', '0', '0']);
    expect(beyond.stdout).toMatch(/error .*fork_from step 31 is beyond run src's last stored step 30; fork at a step up to 30/);
    const taken = await runScript(t, w, ['fk', 'fork:src:20', '0', '0', '0']);
    expect(taken.stdout).toMatch(/error .*run fk already exists; fork_from creates a new run: pick another id/);
    // resume 'allow' (a restarted worker of a forked job): the same fork is continued, another one refused.
    const again = script(t, 'fork-again.mjs', `
      for (const step of [20, 19]) {
        try {
          const run = await logd.init({ project: 'rewind', id: 'fk', forkFrom: { runId: 'src', step }, resume: 'allow', onError: 'raise' });
          run.log({ loss: -1 });
          console.log('continued ' + (await run.finish()).state);
        } catch (e) { console.log('error ' + e.message); }
      }
    `);
    const againOut = (await runScript(t, again, [])).stdout;
    expect(againOut).toContain('continued finished');
    expect(againOut).toMatch(/error .*run fk already exists and is not a fork of run src at step 19 \(it was forked from run src at step 20\); pick another id/);
    expect((await exportJsonl(t, 'fk')).map((r) => r._step)).toEqual(range(0, 26));
    expect((await cliJson(t, ['show', 'fk'])).metadata.attempts).toHaveLength(2);
    expect((await cliJson(t, ['runs'])).map((r: any) => r.id).sort()).toEqual(['fk', 'fk4', 'src']);
  });
});
