// Issue 38 item 9: managing runs on the node's store. `logd rename`, `logd tag` and `logd note` on finished runs
// and on a run that is still logging; the edits survive a killed daemon and a rebuild of the index from the logs
// (they are EDIT frames in each run's log); `logd rm` asks (or wants --yes), refuses a running run, removes a
// run or a group for good; bad input is refused with what is wrong. Real daemon, real trainers.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cli, cliJson, killDaemon, makeEnv, runScript, script, spawnScript, startDaemon, waitUntil, type TestEnv } from './helpers.js';

let t: TestEnv;
afterEach(async () => {
  if (t) {
    await killDaemon(t.dir);
    await t.cleanup();
  }
});

async function threeRuns(): Promise<string[]> {
  const r = await runScript(t, script(t, 'three.mjs', `
    for (let i = 0; i < 3; i++) {
      const run = await logd.init({ project: 'manage', group: 'sweep-1', name: 'r' + i, tags: ['base'] });
      for (let s = 0; s < 50; s++) run.log({ loss: 1 / (s + 1) }, { step: s });
      await run.finish();
      console.log('run ' + run.id);
    }
  `));
  expect(r.exitCode, r.stderr).toBe(0);
  return r.stdout.split('\n').filter((l) => l.startsWith('run ')).map((l) => l.slice(4));
}

const shown = async (id: string) => {
  const j = await cliJson(t, ['show', id]);
  return { name: j.name, tags: j.tags, notes: j.notes, state: j.state, rows: j.historyRows };
};

describe('managing runs: rename, tag, note, rm', () => {
  it('edits of finished runs show everywhere and survive a killed daemon and a rebuilt index', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    await startDaemon(t);
    const [a, b] = await threeRuns();
    expect((await cli(t, ['rename', a, 'baseline, lr 3e-4'])).stdout.trim()).toBe(`${a}  baseline, lr 3e-4`);
    expect((await cli(t, ['tag', a, b, '--add', 'best,keep', '--remove', 'base'])).stdout.trim().split('\n')).toEqual([`${a}  best,keep`, `${b}  best,keep`]);
    await cli(t, ['note', a, 'first line']);
    expect((await cli(t, ['note', a, 'second line', '--append'])).stdout.trim()).toBe(`${a}  notes: first line …`);
    const want = { name: 'baseline, lr 3e-4', tags: ['best', 'keep'], notes: 'first line\nsecond line', state: 'finished', rows: 50 };
    expect(await shown(a)).toEqual(want);
    // The listing filters see them: by tag, and by text in the name or the notes.
    expect((await cliJson(t, ['runs', '--tag', 'keep'])).map((r: { id: string }) => r.id).sort()).toEqual([a, b].sort());
    expect((await cliJson(t, ['runs', '--search', 'second line'])).map((r: { id: string }) => r.id)).toEqual([a]);
    // Killed (no clean stop), then the index thrown away: the next daemon rebuilds it from the logs.
    await killDaemon(t.dir, 'SIGKILL');
    for (const f of fs.readdirSync(t.dataDir).filter((f) => f.startsWith('index.db'))) fs.rmSync(path.join(t.dataDir, f));
    await startDaemon(t);
    expect(await shown(a)).toEqual(want);
    expect((await shown(b)).tags).toEqual(['best', 'keep']);
    // Rows are untouched.
    expect((await cli(t, ['export', a, '--keys', 'loss'])).stdout.trim().split('\n')).toHaveLength(50);
  });

  it('a run that is still logging: renamed and tagged while it runs, kept through its finish; rm refuses it', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    await startDaemon(t);
    const go = path.join(t.dir, 'go');
    const w = spawnScript(t, script(t, 'live.mjs', `
      import fs from 'node:fs';
      const run = await logd.init({ project: 'manage', name: 'live' });
      console.log('run ' + run.id);
      run.log({ loss: 1 }, { step: 0 });
      while (!fs.existsSync(${JSON.stringify(go)})) await new Promise((r) => setTimeout(r, 20));
      for (let s = 1; s < 100; s++) run.log({ loss: 1 / (s + 1) }, { step: s });
      const res = await run.finish();
      console.log('done ' + res.state);
    `));
    await waitUntil(() => w.lines.some((l) => l.startsWith('run ')), 30_000, 'the trainer to start its run');
    const id = w.lines.find((l) => l.startsWith('run '))!.slice(4);
    await cli(t, ['rename', id, 'live, renamed']);
    await cli(t, ['tag', id, '--add', 'watching']);
    expect(await shown(id)).toMatchObject({ name: 'live, renamed', tags: ['watching'], state: 'running' });
    const rm = await cli(t, ['rm', id, '--yes'], { reject: false });
    expect(rm.exitCode).toBe(1);
    expect(rm.stderr).toMatch(new RegExp(`run ${id} is running: a run can be removed once it has ended .*nothing was removed`));
    fs.writeFileSync(go, '');
    await w.closed;
    expect(w.lines).toContain('done finished');
    expect(await shown(id)).toEqual({ name: 'live, renamed', tags: ['watching'], notes: '', state: 'finished', rows: 100 });
  });

  it('rm: asks (no terminal: wants --yes, removes nothing), then removes a run, and a whole group, for good', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    await startDaemon(t);
    const [a, b, c] = await threeRuns();
    const asked = await cli(t, ['rm', a], { reject: false });
    expect(asked.exitCode).toBe(2);
    expect(asked.stderr).toMatch(new RegExp(`logd rm removes 1 run\\(s\\) from the local store \\(.*\\) for good: ${a} \\(r0, finished\\); add --yes`));
    expect(fs.existsSync(path.join(t.dataDir, 'runs', a))).toBe(true);
    const gone = await cli(t, ['rm', a, '--yes']);
    expect(gone.stdout.trim()).toBe(`removed ${a} (r0)`);
    expect(fs.existsSync(path.join(t.dataDir, 'runs', a))).toBe(false);
    const show = await cli(t, ['show', a], { reject: false });
    expect(show.exitCode).toBe(1);
    expect(show.stderr).toMatch(/does not exist/);
    // The rest of the group, by name.
    const g = await cli(t, ['rm', '--group', 'sweep-1', '--yes']);
    expect(g.stdout.trim().split('\n').sort()).toEqual([`removed ${b} (r1)`, `removed ${c} (r2)`].sort());
    expect(await cliJson(t, ['runs'])).toEqual([]);
    const none = await cli(t, ['rm', '--group', 'sweep-1', '--yes'], { reject: false });
    expect(none.stderr).toMatch(/group "sweep-1" has no runs in the local store/);
  });

  it('bad input is refused with what is wrong, and changes nothing', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    await startDaemon(t);
    const [a] = await threeRuns();
    const cases: Array<[string[], RegExp]> = [
      [['rename', a, '  '], /a run's name cannot be empty/],
      [['tag', a, '--add', 'bad\u0007tag'], /tag "bad\\u0007tag" contains a control character/],
      [['tag', a], /say what to change: --add TAGS and\/or --remove TAGS/],
      [['tag', '--group', 'sweep-1', a, '--add', 'x'], /give run ids or --group, not both/],
      [['note', a, 'x'.repeat(70_000)], /notes of 70000 bytes: a run keeps at most 65536/],
      [['rename', 'no-such-run', 'x'], /run "no-such-run" does not exist/],
      [['rename', '../../etc', 'x'], /run id/],
      [['rm'], /name the runs \(their ids\), or a whole group with --group NAME/],
      [['rm', a, '--shared', '--yes'], /--shared changes the store LOGD_STORE_URL names, and it is not set/],
    ];
    for (const [args, msg] of cases) {
      const r = await cli(t, args, { reject: false });
      expect(r.exitCode, args.join(' ')).not.toBe(0);
      expect(r.stderr, args.join(' ')).toMatch(msg);
    }
    expect(await shown(a)).toEqual({ name: 'r0', tags: ['base'], notes: '', state: 'finished', rows: 50 });
  });
});
