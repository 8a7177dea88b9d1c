// Issue 12's PyTorch DDP cases: Debian's torch (gloo, CPU) launched by
// torchrun with 4 ranks, training the practice note's SimpleModel
// data-parallel (test/python/fixtures/ddp_train.py), logging through the
// Python client into a daemon it auto-starts. Every launch writes, per logging
// process, how many rows it logged; the test compares with what `logd export`
// and `logd show` say was stored.
import fs from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { describe, it, expect, beforeEach, afterEach } from 'vitest';
import { ROOT, makeEnv, cliJson, exportJsonl, type TestEnv } from '../helpers.js';
import { FIXTURES, PYTHON, torchMissing, pyEnv, readJson, freePort } from './py-helpers.js';

interface RunJson { id: string; name: string; group: string; state: string; exitCode: number; historyRows: number; finishedAt: string | null; config: Record<string, any>; metadata: { writers: Array<{ pid: number }> } }

const STEPS = 20; // 400 samples / 4 ranks / batch 10 x 2 epochs

/** torchrun, 4 ranks. Debian's torch 1.13 on Python 3.11 needs --redirects/--tee/--log_dir to start at all. */
async function torchrun(t: TestEnv, mode: string, extra: string[] = []) {
  const out = path.join(t.dir, 'out');
  fs.mkdirSync(out, { recursive: true });
  const args = ['-m', 'torch.distributed.run', '--nproc_per_node', '4', '--master_port', String(await freePort()), '--monitor_interval', '1',
    ...extra, '--redirects', '1', '--tee', '1', '--log_dir', path.join(t.dir, 'torchrun-logs'),
    path.join(FIXTURES, 'ddp_train.py'), mode, out, `g-${mode}`];
  const r = await execa(PYTHON, args, { env: pyEnv(t, { OMP_NUM_THREADS: '1' }), extendEnv: false, reject: false, all: true, timeout: 240_000 });
  expect(r.exitCode, `torchrun ${mode} failed:\n${r.all}`).toBe(0);
  const facts = (name: string) => readJson(path.join(out, `${name}.json`));
  return { facts, out };
}

const runs = (t: TestEnv, ...filter: string[]) => cliJson<RunJson[]>(t, ['runs', '--project', 'pytest', ...filter]);
const show = (t: TestEnv, id: string) => cliJson<RunJson>(t, ['show', id]);

async function expectTrainingRows(t: TestEnv, id: string, rank: number) {
  const rows = await exportJsonl(t, id);
  expect(rows.map((r) => r._step)).toEqual(Array.from({ length: rows.length }, (_, i) => i));
  for (const r of rows) {
    expect(r).toMatchObject({ 'train/rank': rank, 'train/lr': 0.01 });
    expect(typeof r.loss === 'number' && r.loss > 0 && r.loss < 10, `loss ${r.loss}`).toBe(true);
  }
  return rows;
}

describe.skipIf(torchMissing !== null)(`Python client under torchrun, 4 ranks (DDP, gloo)${torchMissing ? ` (skipped: ${torchMissing})` : ''}`, () => {
  let t: TestEnv;
  beforeEach(() => {
    // A sidecar that outlives the checks: a CLI call racing its idle shutdown can fail with "Call cancelled".
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000' });
  });
  afterEach(async () => {
    await t.cleanup();
  });

  it('(a) rank 0 only: one run, every step, the torchrun environment recorded', async () => {
    const { facts } = await torchrun(t, 'rank0');
    const f = facts('rank0');
    expect(f.rows).toBe(STEPS);
    expect(facts('rank0-finish').state).toBe('finished');
    const all = await runs(t);
    expect(all).toHaveLength(1);
    const run = await show(t, f.run);
    expect(run).toMatchObject({ name: 'rank0', state: 'finished', exitCode: 0, historyRows: STEPS });
    expect(run.config.torchrun).toMatchObject({ RANK: 0, LOCAL_RANK: 0, WORLD_SIZE: 4, LOCAL_WORLD_SIZE: 4, GROUP_RANK: 0, ROLE_RANK: 0, TORCHELASTIC_RESTART_COUNT: 0 });
    expect(typeof run.config.torchrun.TORCHELASTIC_RUN_ID).toBe('string');
    await expectTrainingRows(t, f.run, 0);
  });

  it('(b) every rank logs into its own run of one group', async () => {
    const { facts } = await torchrun(t, 'group');
    const grouped = await runs(t, '--group', 'g-group');
    expect(grouped.map((r) => r.name).sort()).toEqual(['rank0', 'rank1', 'rank2', 'rank3']);
    for (let rank = 0; rank < 4; rank++) {
      const f = facts(`rank${rank}`);
      const run = await show(t, f.run);
      expect(run).toMatchObject({ state: 'finished', historyRows: f.rows, group: 'g-group' });
      expect(run.config.torchrun).toMatchObject({ RANK: rank, WORLD_SIZE: 4 });
      expect(f.rows).toBe(STEPS);
      await expectTrainingRows(t, f.run, rank);
    }
  });

  it('(c) rank 0 logs while its DataLoader forks 2 workers per epoch, which log too (through their relays)', async () => {
    const { facts } = await torchrun(t, 'dataloader');
    const f = facts('dataloader');
    expect(facts('dataloader-finish').state).toBe('finished');
    const rows = await exportJsonl(t, f.run);
    const training = rows.filter((r) => 'loss' in r);
    expect(training).toHaveLength(STEPS);
    // 2 workers x 2 epochs, each logged once from worker_init_fn in its forked process.
    const started = rows.filter((r) => 'worker/started' in r).map((r) => r['worker/started']).sort();
    expect(started).toEqual([1, 1, 2, 2]);
    const run = await show(t, f.run);
    expect(run.metadata.writers).toHaveLength(5);
  });

  it('(d) a spawn pool started after logd.setup() inherits LOGD_SERVICE; its workers log into the group', async () => {
    const { facts } = await torchrun(t, 'spawn');
    const parent = facts('spawn-parent');
    expect(parent.service).toMatch(/^unix:.*#/);
    for (const i of [0, 1]) {
      const f = facts(`spawned-${i}`);
      expect(f.service).toBe(parent.service);
      const run = await show(t, f.run);
      expect(run).toMatchObject({ name: `spawned-${i}`, group: 'g-spawn', state: 'finished', historyRows: 10 });
      const rows = await exportJsonl(t, f.run);
      expect(rows.map((r) => r['pool/value'])).toEqual(Array.from({ length: 10 }, (_, s) => i * 100 + s));
    }
    expect((await show(t, facts('spawn').run)).historyRows).toBe(STEPS);
  });

  it('(e) a child process attaches to rank 0\'s run through its handle and logs into it', async () => {
    const { facts, out } = await torchrun(t, 'shared');
    const f = facts('shared');
    expect(readJson(path.join(out, 'child.json'))).toEqual({ rows: 50, state: 'running' }); // a non-owner detaches; the run stays open
    const run = await show(t, f.run);
    expect(run).toMatchObject({ state: 'finished', historyRows: STEPS + 50 });
    expect(run.metadata.writers).toHaveLength(2);
    const rows = await exportJsonl(t, f.run);
    expect(rows.filter((r) => 'child/value' in r).map((r) => r['child/value'])).toEqual(Array.from({ length: 50 }, (_, i) => i));
    expect(rows.filter((r) => 'loss' in r)).toHaveLength(STEPS);
  });

  it('(f) kill -9 of one rank: that attempt is crashed within 5 s, and the restart continues each rank\'s run as its second attempt', async () => {
    const { facts } = await torchrun(t, 'kill', ['--max_restarts', '1']);
    const killed = facts('killed');
    const dead = await show(t, killed.run);
    const firstOfDead = (dead.metadata as any).attempts[0];
    expect(firstOfDead.state).toBe('crashed');
    expect(firstOfDead.endedAt - killed.at).toBeLessThan(5);
    expect(await runs(t)).toHaveLength(4); // one run per rank, whatever the restarts
    for (let rank = 0; rank < 4; rank++) {
      // The first attempt: torchrun stopped the surviving ranks; the restart continued the same run (a stable id per rank).
      const first = facts(`rank${rank}`);
      const second = facts(`rank${rank}-attempt-1`);
      expect(second.run, `rank ${rank}`).toBe(first.run);
      const run = await show(t, first.run);
      expect(run, `rank ${rank}`).toMatchObject({ name: `rank${rank}`, state: 'finished', historyRows: first.rows + STEPS });
      const attempts = (run.metadata as any).attempts;
      expect(attempts.map((a: any) => a.n)).toEqual([1, 2]);
      expect(['crashed', 'killed'], `rank ${rank}`).toContain(attempts[0].state);
      expect(attempts[1]).toMatchObject({ state: 'finished', fromStep: first.rows });
      expect(run.config.torchrun.TORCHELASTIC_RESTART_COUNT).toBe(1); // the config update of the second attempt, merged
      const rows = await exportJsonl(t, first.run, ['--raw']);
      expect(rows).toHaveLength(first.rows + STEPS);
      for (const r of rows) expect(r['train/rank']).toBe(rank);
    }
  });
});

describe.skipIf(torchMissing !== null)(`examples/python under torchrun, 2 ranks${torchMissing ? ` (skipped: ${torchMissing})` : ''}`, () => {
  let t: TestEnv;
  beforeEach(() => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000' });
  });
  afterEach(async () => {
    await t.cleanup();
  });

  it('rank0.py and group.py run as their README says and store what they print', async () => {
    const example = (name: string) => path.join(ROOT, 'examples', 'python', name);
    const launch = async (name: string) => {
      const args = ['-m', 'torch.distributed.run', '--nproc_per_node', '2', '--master_port', String(await freePort()),
        '--redirects', '1', '--tee', '1', '--log_dir', path.join(t.dir, `logs-${name}`), example(name)];
      const r = await execa(PYTHON, args, { env: pyEnv(t, { OMP_NUM_THREADS: '1' }), extendEnv: false, reject: false, all: true, timeout: 240_000 });
      expect(r.exitCode, r.all).toBe(0);
      return r.all ?? '';
    };
    const shown = /stored: logd show (\S+)/.exec(await launch('rank0.py'));
    expect(shown).not.toBeNull();
    expect(await cliJson<RunJson>(t, ['show', shown![1]])).toMatchObject({ name: 'rank0', state: 'finished', historyRows: 60 });
    const grouped = /stored: logd runs --group (\S+)/.exec(await launch('group.py'));
    expect(grouped).not.toBeNull();
    const runs = await cliJson<RunJson[]>(t, ['runs', '--group', grouped![1]]);
    expect(runs.map((r) => [r.name, r.state, r.historyRows]).sort()).toEqual([['rank0', 'finished', 60], ['rank1', 'finished', 60]]);
  });
});
