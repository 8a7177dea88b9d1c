// Issue 19 in the Python client, second slice: logd.init(id=...,
// resume_from=(run_id, step)) rewinds a run to a checkpoint's step (earlier
// attempts' rows above it superseded), fork_from=(run_id, step) starts a new
// run as the daemon's copy of another's rows. Real processes, a real daemon.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, cli, cliJson, exportJsonl, startDaemon, killDaemon, type TestEnv } from '../helpers.js';
import { execa } from 'execa';
import { FIXTURES, PYTHON, pythonMissing, torchMissing, runPython, pyEnv, freePort, readJson } from './py-helpers.js';

let t: TestEnv;
afterEach(async () => {
  if (!t) return;
  await killDaemon(t.dir);
  await t.cleanup();
});

const range = (a: number, b: number) => Array.from({ length: b - a + 1 }, (_, i) => a + i);

/** args: id, how (`-`, `resume:S`, `fork:RUN:S`, `pair:RUN:S` for a raw resume_from pair), first, last, loss offset, `kill` or `finish`. */
const TRAINER = `
import os, signal, sys, logd
id, how, first, last, offset, end = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
kw = {}
if how.startswith("resume:"):
    kw["resume_from"] = (id, int(how[7:]))
elif how.startswith("fork:"):
    _, src, step = how.split(":")
    kw["fork_from"] = (src, int(step))
elif how.startswith("pair:"):
    _, src, step = how.split(":")
    kw["resume_from"] = (src, int(step))
try:
    run = logd.init(project="rewind", id=id, config={"how": how}, **kw)
except Exception as e:
    print("error %s: %s" % (type(e).__name__, e))
    sys.exit(3)
for s in range(first, last + 1):
    run.log({"loss": s + offset}, step=s)
if end == "kill":
    run.flush()
    os.kill(os.getpid(), signal.SIGKILL)
print("done", run.finish().state)
`;

describe.skipIf(pythonMissing !== null)(`Python: init(resume_from=..., fork_from=...)${pythonMissing ? ` (skipped: ${pythonMissing})` : ''}`, () => {
  it('killed at step 50, resumed from 40, logs 41..60: export 0..60 once, --all-attempts the old 41..50 superseded, attempts say resumed from 40, across a daemon restart; a fork at 20; refusals raise', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    await startDaemon(t);
    const file = path.join(t.dir, 'trainer.py');
    fs.writeFileSync(file, TRAINER);
    const first = await runPython(t, [file, 'py', '-', '0', '50', '0', 'kill']);
    expect(first.signal, first.all).toBe('SIGKILL');
    const second = await runPython(t, [file, 'py', 'resume:40', '41', '60', '1000', 'finish']);
    expect(second.stdout, second.all).toContain('done finished');

    const check = async () => {
      const rows = await exportJsonl(t, 'py');
      expect(rows.map((r) => r._step)).toEqual(range(0, 60));
      expect(rows.map((r) => r.loss)).toEqual([...range(0, 40), ...range(41, 60).map((s) => s + 1000)]);
      const all = await exportJsonl(t, 'py', ['--all-attempts']);
      expect(all.filter((r) => r._superseded).map((r) => [r._step, r.loss, r._attempt])).toEqual(range(41, 50).map((s) => [s, s, 1]));
      const info = await cliJson(t, ['show', 'py']);
      expect(info.metadata.attempts.map((a: any) => [a.n, a.state, a.resumedFromStep])).toEqual([[1, 'crashed', undefined], [2, 'finished', 40]]);
      expect(info).toMatchObject({ state: 'finished', historyRows: 61, metadata: { supersededRows: 10, lastStep: 60 } });
    };
    await check();
    await killDaemon(t.dir);
    await startDaemon(t);
    await check();

    const fork = await runPython(t, [file, 'pyfork', 'fork:py:20', '21', '22', '5000', 'finish']);
    expect(fork.stdout, fork.all).toContain('done finished');
    expect((await exportJsonl(t, 'pyfork')).map((r) => [r._step, r.loss])).toEqual([...range(0, 20).map((s) => [s, s]), [21, 5021], [22, 5022]]);
    expect((await cliJson(t, ['show', 'pyfork'])).metadata.forkedFrom).toEqual({ runId: 'py', step: 20 });
    expect((await cli(t, ['show', 'pyfork'])).stdout).toContain('forked from: run py at step 20');

    expect((await runPython(t, [file, 'py', 'resume:61', '0', '0', '0', 'finish'])).stdout).toMatch(/error CallError: .*resume_from step 61 is beyond run py's last stored step 60/);
    expect((await runPython(t, [file, 'py', 'pair:other:3', '0', '0', '0', 'finish'])).stdout).toMatch(/error ValueError: logd: resume_from names run "other" but id is "py"/);
    expect((await runPython(t, [file, 'nope', 'resume:3', '0', '0', '0', 'finish'])).stdout).toMatch(/error CallError: .*run nope does not exist/);
    expect((await runPython(t, [file, 'f2', 'fork:nope:3', '0', '0', '0', 'finish'])).stdout).toMatch(/error CallError: .*fork_from: run nope does not exist/);
    expect((await runPython(t, [file, 'f3', 'fork:py:99', '0', '0', '0', 'finish'])).stdout).toMatch(/error CallError: .*fork_from step 99 is beyond run py's last stored step 60/);
    expect((await cliJson(t, ['runs'])).map((r: any) => r.id).sort()).toEqual(['py', 'pyfork']);
    expect((await cliJson(t, ['show', 'py'])).metadata.attempts).toHaveLength(2);
  });

  it('a restarted torchrun worker whose earlier attempt never reached the daemon: resume_from=(None, 40) starts its run, says so once, and training goes on; a named run still raises', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    await startDaemon(t);
    const file = path.join(t.dir, 'restarted.py');
    fs.writeFileSync(file, `
import sys, logd
try:
    run = logd.init(project="rewind", group="g-lost", name="rank1", resume_from=(None if sys.argv[1] == "derived" else "named-run", 40))
except Exception as e:
    print("error %s: %s" % (type(e).__name__, e))
    sys.exit(3)
for s in range(41, 61):
    run.log({"loss": s}, step=s)
print("run", run.id, run.finish().state)
`);
    const env = { RANK: '1', LOCAL_RANK: '1', WORLD_SIZE: '4', TORCHELASTIC_RUN_ID: 'job-lost-attempt', TORCHELASTIC_RESTART_COUNT: '1' };
    const r = await runPython(t, [file, 'derived'], { env });
    expect(r.exitCode, r.all).toBe(0);
    const [, id, state] = r.stdout.trim().split('\n').pop()!.split(' ');
    expect(state).toBe('finished');
    expect(id).toMatch(/^tr[0-9a-f]{18}$/);
    expect(r.stderr.match(/resume_from=\(None, 40\): this rank's run of the job's earlier attempt is not in the daemon's store/g) ?? [], r.stderr).toHaveLength(1);
    expect((await exportJsonl(t, id)).map((x) => x._step)).toEqual(range(41, 60));
    const named = await runPython(t, [file, 'named'], { env });
    expect(named.exitCode).toBe(3);
    expect(named.stdout).toMatch(/error CallError: CreateRun: run named-run does not exist/);
  });
});

describe.skipIf(torchMissing !== null)(`torchrun, 4 ranks: a job restarted from its checkpoint rewinds each rank's run${torchMissing ? ` (skipped: ${torchMissing})` : ''}`, () => {
  it('rank 1 SIGKILLs itself at step 50, --max_restarts 2 resumes from the step-40 checkpoint: one run per rank, steps 0..60 once, 41..50 of attempt 1 superseded, two attempts, finished', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000' });
    const out = path.join(t.dir, 'out');
    fs.mkdirSync(out);
    // Debian's torch 1.13 on Python 3.11 needs --redirects/--tee/--log_dir to start at all.
    const r = await execa(PYTHON, ['-m', 'torch.distributed.run', '--nproc_per_node', '4', '--master_port', String(await freePort()), '--monitor_interval', '1',
      '--max_restarts', '2', '--redirects', '1', '--tee', '1', '--log_dir', path.join(t.dir, 'torchrun-logs'),
      path.join(FIXTURES, 'rewind_train.py'), out, 'g-rewind'], { env: pyEnv(t, { OMP_NUM_THREADS: '1' }), extendEnv: false, reject: false, all: true, timeout: 300_000 });
    const daemonLog = () => {
      try {
        return fs.readFileSync(path.join(t.runtimeDir, 'daemon.log'), 'utf8').slice(-6000);
      } catch (e) {
        return `(no daemon log: ${(e as Error).message})`;
      }
    };
    expect(r.exitCode, `torchrun failed:\n${r.all.slice(-8000)}\n--- the daemon's log ---\n${daemonLog()}`).toBe(0);
    expect((await cliJson(t, ['runs', '--project', 'rewind'])).length).toBe(4);
    for (let rank = 0; rank < 4; rank++) {
      const first = readJson(path.join(out, `rank${rank}-attempt0.json`));
      const second = readJson(path.join(out, `rank${rank}-attempt1.json`));
      expect(second, `rank ${rank}`).toEqual({ run: first.run, resumed_from: 40 });
      expect(readJson(path.join(out, `rank${rank}-finish.json`)).state).toBe('finished');
      const rows = await exportJsonl(t, first.run);
      expect(rows.map((x) => x._step), `rank ${rank}`).toEqual(range(0, 60));
      expect(rows.map((x) => x.attempt), `rank ${rank}`).toEqual([...range(0, 40).map(() => 0), ...range(41, 60).map(() => 1)]);
      expect(rows.every((x) => x.rank === rank)).toBe(true);
      const superseded = (await exportJsonl(t, first.run, ['--all-attempts'])).filter((x) => x._superseded);
      // Rank 1 logged up to step 50 before it died; the others up to where torchrun stopped them (at most 50).
      if (rank === 1) expect(superseded.map((x) => x._step)).toEqual(range(41, 50));
      expect(superseded.every((x) => x._attempt === 1 && x.attempt === 0 && (x._step as number) >= 41 && (x._step as number) <= 50), `rank ${rank}`).toBe(true);
      const info = await cliJson(t, ['show', first.run]);
      expect(info.state).toBe('finished');
      expect(info.metadata.attempts.map((a: any) => [a.n, a.resumedFromStep])).toEqual([[1, undefined], [2, 40]]);
      expect(info.metadata.attempts[1]).toMatchObject({ fromStep: 41, state: 'finished' });
      expect(info.metadata.supersededRows).toBe(superseded.length);
    }
  });
});
