// Issue 23, item 10: `logd launch` names its job's group (the script's name
// and the start time, or --group), gives it to every rank as LOGD_GROUP
// (which init() takes when no group is given), and says where the runs went:
// the group and the command that lists them, which works as printed.
import { afterEach, describe, expect, it } from 'vitest';
import { execa } from 'execa';
import { makeEnv, cli, cliJson, script, CLI, type TestEnv } from './helpers.js';
import { defaultGroup } from '../launcher/launch.js';
import { pythonMissing, runPython } from './python/py-helpers.js';

let t: TestEnv;
afterEach(async () => t && (await t.cleanup()));

/** A rank that logs a few rows into a run of its own, naming no group. */
const rankScript = (t: TestEnv) => script(t, 'train.mjs', `
  const run = await logd.init({ project: 'launched', name: 'rank' + process.env.RANK });
  for (let s = 0; s < 5; s++) run.log({ loss: 1 / (s + 1) }, { step: s });
  console.log('rank ' + process.env.RANK + ' trained');
  await run.finish();
  console.log('group=' + run.group);
`);

describe('logd launch names its group and says where the runs went', () => {
  it('the default group: the script name and the start time, every rank in it; the printed command lists them', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    const before = new Date();
    const r = await cli(t, ['launch', '--nproc-per-node', '2', '--master-port', '29731', rankScript(t)], { timeout: 60_000 });
    expect(r.exitCode, r.stderr).toBe(0);
    const m = /launch: done; the runs of this job are in group (train-\d{8}-\d{6}): (logd runs --group \S+)/.exec(r.stderr);
    expect(m, r.stderr).not.toBeNull();
    const group = m![1];
    // Stamped with the local time of the launch.
    const [, y, mo, d, hh, mi, ss] = /(\d{4})(\d\d)(\d\d)-(\d\d)(\d\d)(\d\d)$/.exec(group)!.map(Number);
    const at = new Date(y, mo - 1, d, hh, mi, ss).getTime();
    expect(at).toBeGreaterThanOrEqual(Math.floor(before.getTime() / 1000) * 1000);
    expect(at).toBeLessThanOrEqual(Date.now());
    expect(defaultGroup('/x/train.mjs', new Date(at))).toBe(group);
    expect(r.stderr).toContain(`launch: the runs of this job are in group ${group}`); // said at the start as well
    expect(r.stdout).toContain(`[rank 0] group=${group}`);
    expect(r.stdout).toContain(`[rank 1] group=${group}`);
    // The printed command, as printed (`logd` being this checkout's CLI).
    const listed = await execa(process.execPath, [CLI, ...m![2].split(' ').slice(1), '--json'], { env: t.env });
    const runs = JSON.parse(listed.stdout) as Array<{ name: string; group: string; state: string }>;
    expect(runs.map((x) => [x.name, x.group, x.state]).sort()).toEqual([['rank0', group, 'finished'], ['rank1', group, 'finished']]);
    // The launch turns console capture on for its ranks: what each printed is stored with its run.
    const logs = (await cli(t, ['logs', group])).stdout.split('\n');
    expect(logs).toContain('[rank 0] rank 0 trained');
    expect(logs).toContain('[rank 1] rank 1 trained');
  });

  it('--group names it; a run that names its own group keeps it', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    const r = await cli(t, ['launch', '--nproc-per-node', '2', '--master-port', '29732', '--group', 'sweep 7/lr', rankScript(t)], { timeout: 60_000 });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stderr).toContain("in group sweep 7/lr: logd runs --group 'sweep 7/lr' (or /groups/sweep%207%2Flr in logd ui)");
    expect((await cliJson(t, ['runs', '--group', 'sweep 7/lr'])).length).toBe(2);
    const own = script(t, 'own.mjs', `
      const run = await logd.init({ project: 'launched', group: 'mine' });
      await run.finish();
    `);
    expect((await cli(t, ['launch', '--nproc-per-node', '1', '--master-port', '29733', own], { timeout: 60_000 })).exitCode).toBe(0);
    expect((await cliJson(t, ['runs', '--group', 'mine'])).length).toBe(1);
  });

  it.skipIf(pythonMissing !== null)(`a Python rank takes the launch's group too (LOGD_GROUP)${pythonMissing ? ` (skipped: ${pythonMissing})` : ''}`, async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    const code = 'import logd\nr = logd.init(project="launched")\nprint("group=" + r.group)\nr.finish()\nr2 = logd.init(project="launched", group="own")\nprint("group=" + r2.group)\nr2.finish()';
    const r = await runPython(t, ['-c', code], { env: { LOGD_GROUP: 'train-20261125-093012' } });
    expect(r.exitCode, r.all).toBe(0);
    expect(r.stdout.split('\n')).toEqual(['group=train-20261125-093012', 'group=own']);
  });
});
