// Issue 21: rank health on real DDP jobs. Debian's torch (gloo, CPU) under
// torchrun with 4 ranks, every rank logging its own run of one group
// (test/python/fixtures/health_train.py), into a real daemon that judges them
// (daemon/health/). The judgements are read as a user reads them:
// `logd health GROUP --json`.
import fs from 'node:fs';
import path from 'node:path';
import { execa, execaSync } from 'execa';
import { describe, it, expect, afterEach } from 'vitest';
import { makeEnv, startDaemon, killDaemon, cliJson, waitUntil, type TestEnv } from '../helpers.js';
import { FIXTURES, PYTHON, torchMissing, pythonMissing, pyEnv, spawnPython, killSpawnedPython, freePort } from './py-helpers.js';
import type { GroupHealth } from '../../daemon/cli/health.js';

/** torchrun, 4 ranks (Debian's torch 1.13 on Python 3.11 needs --redirects/--tee/--log_dir to start at all). */
async function torchrun(t: TestEnv, mode: string, group: string, env: Record<string, string> = {}) {
  const out = path.join(t.dir, `out-${group}`);
  fs.mkdirSync(out, { recursive: true });
  const args = ['-m', 'torch.distributed.run', '--nproc_per_node', '4', '--master_port', String(await freePort()), '--monitor_interval', '1',
    '--redirects', '1', '--tee', '1', '--log_dir', path.join(t.dir, `torchrun-${group}`), path.join(FIXTURES, 'health_train.py'), mode, out, group];
  return execa(PYTHON, args, { env: pyEnv(t, { OMP_NUM_THREADS: '1', ...env }), extendEnv: false, reject: false, all: true, timeout: 420_000 });
}

async function health(t: TestEnv, group: string): Promise<GroupHealth> {
  const gs = await cliJson<GroupHealth[]>(t, ['health', group]);
  expect(gs).toHaveLength(1);
  return gs[0];
}

const kinds = (g: GroupHealth) => g.events.map((e) => `${e.kind}:${e.ranks.join(',')}`);

let t: TestEnv;
afterEach(async () => {
  killSpawnedPython();
  if (t) {
    await killDaemon(t.dir);
    await t.cleanup();
  }
});

describe.skipIf(torchMissing !== null)(`rank health under torchrun, 4 ranks (DDP, gloo)${torchMissing ? ` (skipped: ${torchMissing})` : ''}`, () => {
  it('rank 2 sleeps inside step 30 before its backward: `job stalled` names rank 2, the stacks show it outside the collective and the others inside; then every rank recovers; --on-stall gets the event and is killed at its timeout', async () => {
    const marker = path.join(fs.mkdtempSync('/tmp/logd-onstall-'), 'event.json');
    // The command reads the event, then hangs: the daemon must kill it and go on.
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000', LOGD_ON_STALL: `cat > ${marker}; exec sleep 601`, LOGD_ON_STALL_TIMEOUT_MS: '3000' });
    const daemon = await startDaemon(t);
    const job = torchrun(t, 'stall', 'stall', { HEALTH_STALL_S: '30' });
    let g!: GroupHealth;
    await waitUntil(async () => {
      if (job.exitCode !== null && job.exitCode !== undefined) throw new Error('torchrun ended before a stall was seen');
      try {
        g = await health(t, 'stall');
      } catch {
        return false; // the ranks' runs are not created yet
      }
      return g.events.some((e) => e.kind === 'job stalled' && e.cause);
    }, 150_000, 'logd health to report the job stalled');
    const e = g.events.find((x) => x.kind === 'job stalled')!;
    expect(e.ranks.slice().sort()).toEqual([0, 1, 2, 3]);
    expect(e.cause!.ranks, e.cause!.why).toEqual([2]);
    const stacks = new Map((e.stacks ?? []).map((s) => [s.rank, s]));
    expect([...stacks.keys()].sort()).toEqual([0, 1, 2, 3]);
    expect(stacks.get(2)!.inCollective, stacks.get(2)!.text).toBe(false);
    expect(stacks.get(2)!.text).toMatch(/health_train\.py/);
    for (const r of [0, 1, 3]) expect(stacks.get(r)!.inCollective, stacks.get(r)!.text).toBe(true);
    // Detected within 10 s plus 3 median step times of the last step (the daemon's own clock and the rows' times).
    const lastStepAt = Math.max(...g.ranks.map((r) => r.stepAt));
    const medianStep = Math.max(...g.ranks.map((r) => r.stepS ?? 0));
    expect(e.at - lastStepAt).toBeLessThanOrEqual(10 + 3 * medianStep);
    expect(g.stalled).toBe(true);

    const r = await job;
    expect(r.exitCode, r.all).toBe(0);
    const after = await health(t, 'stall');
    const rec = after.events.filter((x) => x.kind === 'recovered' && x.at > e.at);
    expect(rec.flatMap((x) => x.ranks).sort()).toEqual([0, 1, 2, 3]);
    expect(after.stalled).toBe(false);
    expect(kinds(after).filter((k) => k.startsWith('straggler'))).toEqual([]);

    // --on-stall: the event arrived on stdin, and the hanging command was killed at its timeout.
    const got = JSON.parse(fs.readFileSync(marker, 'utf8'));
    expect(got).toMatchObject({ kind: 'job stalled', group: 'stall' });
    await waitUntil(() => /--on-stall took longer than 3000 ms; killed/.test(daemon.stderr()), 10_000, 'the daemon to kill --on-stall');
    expect(execaSync('pgrep', ['-f', 'sleep 601'], { reject: false }).stdout.trim()).toBe('');
    expect(daemon.stderr()).toMatch(/health: group stall: job stalled: .*likely cause: rank 2/);
  }, 400_000);

  it('rank 3 adds 30 % of compute to its step from step 50 on: `straggler` names rank 3 and nobody else', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000' });
    await startDaemon(t);
    const r = await torchrun(t, 'straggler', 'slow');
    expect(r.exitCode, r.all).toBe(0);
    const g = await health(t, 'slow');
    // On a failure, what the judge saw: each rank's CPU and wall time per step, and every event with its evidence.
    const saw = JSON.stringify({ ranks: g.ranks.map((x) => ({ rank: x.rank, cpuPerStepS: x.cpuPerStepS, stepS: x.stepS })), events: g.events.map((e) => [e.kind, e.ranks, e.evidence]) });
    expect(kinds(g), saw).toEqual(['straggler:3']);
    expect(g.events[0].evidence).toMatch(/CPU per step/);
  }, 400_000);

  it('a healthy job of 300 steps with ±15 % step-time jitter raises no event', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000' });
    await startDaemon(t);
    const r = await torchrun(t, 'healthy', 'fine');
    expect(r.exitCode, r.all).toBe(0);
    const g = await health(t, 'fine');
    expect(g.ranks.map((x) => x.rank)).toEqual([0, 1, 2, 3]);
    for (const x of g.ranks) expect(x.step).toBeGreaterThan(250); // the last progress judged before the runs finished
    expect(g.ranks.every((x) => x.stepsPerS !== null)).toBe(true);
    expect(kinds(g)).toEqual([]);
  }, 400_000);
});

describe.skipIf(pythonMissing !== null)(`rank health without torch: steps never given, opt-out, a pause${pythonMissing ? ` (skipped: ${pythonMissing})` : ''}`, () => {
  /** Two runs of one group in one process log 40 rows 50 ms apart, then pause while alive. */
  const twoRanks = (stepGiven: boolean) => `
import sys, time, logd
runs = [logd.init(project="h", group=sys.argv[1], name="r%d" % i) for i in range(2)]
for i in range(40):
    for r in runs:
        r.log({"x": i}${stepGiven ? ', step=i' : ''})
    time.sleep(0.05)
print("paused", flush=True)
time.sleep(60)
`;

  it('steps never given: a pause of a run that logs with the client\'s own counter is no stall', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000' });
    await startDaemon(t);
    const file = path.join(t.dir, 'two.py');
    fs.writeFileSync(file, twoRanks(false));
    const p = spawnPython(t, [file, 'nostep']);
    await waitUntil(() => p.lines.includes('paused'), 60_000, 'the runs to log');
    await new Promise((r) => setTimeout(r, 9000));
    const g = await health(t, 'nostep');
    expect(g.ranks).toHaveLength(2);
    expect(g.ranks.map((r) => r.state)).toEqual(['ok', 'ok']);
    expect(kinds(g)).toEqual([]);
  }, 120_000);

  it('the same with steps given is judged: `job stalled` within the floor; LOGD_STACKS=0 leaves the process unsignalled, with no stacks', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000' });
    await startDaemon(t);
    const file = path.join(t.dir, 'two.py');
    fs.writeFileSync(file, twoRanks(true));
    const p = spawnPython(t, [file, 'steps'], { LOGD_STACKS: '0' });
    await waitUntil(() => p.lines.includes('paused'), 60_000, 'the runs to log');
    let g!: GroupHealth;
    await waitUntil(async () => (g = await health(t, 'steps')).events.some((e) => e.kind === 'job stalled'), 20_000, 'the stall to be judged');
    const e = g.events.find((x) => x.kind === 'job stalled')!;
    expect(e.stacks ?? []).toEqual([]);
    expect(e.evidence).toMatch(/no stack registration/);
    expect(p.exitCode).toBeNull(); // SIGUSR2 would have killed it: it was never signalled
    expect(fs.readdirSync(path.join(t.dataDir, 'stacks'))).toEqual([]);
  }, 120_000);
});
