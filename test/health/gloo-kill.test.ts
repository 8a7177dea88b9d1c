// Issue 21: a rank of a real torchrun DDP job (4 ranks, gloo, CPU; every rank
// logs its own run of one group) is killed with SIGKILL mid-training. Its run
// ends `crashed`, the other ranks block in the all-reduce, and `logd health`
// reports `job stalled` naming the dead rank as the likely cause, with the
// survivors' stacks inside the collective.
//
// Two things would hide the case on one node, and the test decides both:
//
// - gloo: a killed process's sockets are closed by the kernel, so the other
//   ranks read an end of stream and fail at once ("Connection closed by
//   peer"), no stall. They wait (until gloo's timeout, 30 min by default) only
//   when the dead rank's connections stay open: a host that lost power or its
//   network, or a child the rank forked after the process group existed (an
//   async checkpoint writer; a DataLoader worker, for the up to 5 s its
//   watchdog takes to see its parent gone). The fixture's rank 2 forks such a
//   child (health_train.py, mode `kill`), so the survivors wait as they would
//   for a vanished host; the test kills the child when it has looked.
// - torchrun: its agent polls its workers every --monitor_interval seconds
//   and, at the first failed one, stops the others (or restarts them all with
//   --max_restarts). With a short interval the survivors would be gone before
//   any silence could be told from a pause (the stall floor is 5 s). The job
//   runs with --monitor_interval 600: the agent does not look during the test,
//   and the test stops torchrun itself at the end.
import fs from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { describe, it, expect, afterEach } from 'vitest';
import { makeEnv, startDaemon, killDaemon, cliJson, waitUntil, alive, type TestEnv } from '../helpers.js';
import { FIXTURES, PYTHON, torchMissing, pyEnv, freePort } from '../python/py-helpers.js';
import type { GroupHealth } from '../../daemon/cli/health.js';

let t: TestEnv;
const cleanups: Array<() => void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) c();
  if (t) {
    await killDaemon(t.dir);
    await t.cleanup();
  }
});

function killPid(pid: number, sig: NodeJS.Signals = 'SIGKILL'): void {
  try {
    process.kill(pid, sig);
  } catch {
    /* gone */
  }
}

async function health(group: string): Promise<GroupHealth | null> {
  try {
    const gs = await cliJson<GroupHealth[]>(t, ['health', group]);
    return gs[0] ?? null;
  } catch {
    return null; // no run of the group yet
  }
}

describe.skipIf(torchMissing !== null)(`a rank killed under gloo${torchMissing ? ` (skipped: ${torchMissing})` : ''}`, () => {
  it('SIGKILL of rank 2 mid-training: its run ends `crashed`, the others block in the all-reduce, and `job stalled` names rank 2 as the cause', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000' });
    await startDaemon(t);
    const out = path.join(t.dir, 'out');
    fs.mkdirSync(out);
    const args = ['-m', 'torch.distributed.run', '--nproc_per_node', '4', '--master_port', String(await freePort()), '--monitor_interval', '600',
      '--redirects', '1', '--tee', '1', '--log_dir', path.join(t.dir, 'torchrun'), path.join(FIXTURES, 'health_train.py'), 'kill', out, 'gone'];
    const job = execa(PYTHON, args, { env: pyEnv(t, { OMP_NUM_THREADS: '1', HEALTH_STALL_RANK: '2' }), extendEnv: false, reject: false, all: true, timeout: 300_000 });
    cleanups.push(() => {
      job.kill('SIGKILL');
      const holder = path.join(out, 'holder.pid');
      if (fs.existsSync(holder)) killPid(Number(fs.readFileSync(holder, 'utf8')));
    });

    // Every rank trains, judged (past minSteps, steady steps).
    let g: GroupHealth | null = null;
    await waitUntil(async () => {
      if (job.exitCode !== null && job.exitCode !== undefined) throw new Error(`torchrun ended before the kill: ${job.all}`);
      g = await health('gone');
      return g !== null && g.ranks.length === 4 && g.ranks.every((r) => r.step >= 20 && r.stepS !== null);
    }, 150_000, 'four ranks past step 20');
    const victim = g!.ranks.find((r) => r.rank === 2)!;
    const holderPid = Number(fs.readFileSync(path.join(out, 'holder.pid'), 'utf8'));
    expect(alive(holderPid)).toBe(true);
    const survivors = g!.ranks.filter((r) => r.rank !== 2);

    // The pid logd reports for rank 2 is the rank's process: kill it as the OOM killer would.
    process.kill(victim.pid, 'SIGKILL');
    const killedAt = Date.now() / 1000;

    let e!: GroupHealth['events'][number];
    await waitUntil(async () => {
      g = await health('gone');
      const found = g?.events.find((x) => x.kind === 'job stalled' && x.cause);
      if (found) e = found;
      return found !== undefined;
    }, 60_000, '`job stalled` with a likely cause');
    const now = g!;

    // The dead rank is the cause; its run crashed, its process is gone.
    expect(e.cause!.ranks, e.cause!.why).toEqual([2]);
    expect(e.cause!.runIds).toEqual([victim.runId]);
    expect(e.cause!.why).toMatch(/rank 2 ended crashed/);
    expect(e.cause!.why).toMatch(new RegExp(`its process ${victim.pid} was killed by SIGKILL without calling finish\\(\\)`));
    const deadRow = now.ranks.find((r) => r.rank === 2)!;
    expect(deadRow.state).toBe('crashed');
    const shown = await cliJson<{ state: string }>(t, ['show', victim.runId]);
    expect(shown.state).toBe('crashed');

    // The survivors stalled (still alive, still open) and their stacks are inside the collective.
    expect(e.ranks.slice().sort()).toEqual([0, 1, 3]);
    for (const s of survivors) {
      expect(alive(s.pid), `rank ${s.rank} alive`).toBe(true);
      expect(now.ranks.find((r) => r.rank === s.rank)!.state).toBe('stalled');
    }
    const stacks = new Map((e.stacks ?? []).map((s) => [s.rank, s]));
    expect([...stacks.keys()].sort()).toEqual([0, 1, 3]);
    for (const r of [0, 1, 3]) expect(stacks.get(r)!.inCollective, stacks.get(r)!.text).toBe(true);
    expect(e.cause!.why).toMatch(/rank 0, rank 1, rank 3 wait inside the collective/);
    expect(now.stalled).toBe(true);
    // Reported within 10 s plus 3 median step times of the kill.
    const medianStep = Math.max(...survivors.map((r) => r.stepS ?? 0));
    expect(e.at - killedAt).toBeLessThanOrEqual(10 + 3 * medianStep);

    // Once rank 2's connections close, the survivors fail as gloo does, and their runs end `crashed` too.
    killPid(holderPid);
    await waitUntil(async () => {
      const after = await health('gone');
      return after !== null && after.ranks.every((r) => r.runState !== 'running');
    }, 60_000, 'the survivors to fail once the connections closed');
    for (const s of survivors) expect((await cliJson<{ state: string }>(t, ['show', s.runId])).state).toBe('crashed');
    job.kill('SIGTERM'); // torchrun would only look at its workers at the next --monitor_interval
    const r = await job;
    expect(r.exitCode === 0, r.all).toBe(false);
    expect(r.all).toMatch(/Connection closed by peer/);
  }, 300_000);
});
