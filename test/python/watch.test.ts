// run.watch(ddp_model) (issue 21): in synchronous DDP every rank steps at the
// same rate, so a rank that computes slower shows only in where the time goes.
// A real torchrun job (Debian's torch, gloo, 4 ranks, every rank its own run in
// one group) where rank 3 sleeps 40 ms before each backward: its wait in the
// gradient all-reduce is the shortest, the others wait for it, and it arrives
// last; all of it read back with `logd export` as a user would.
import fs from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { makeEnv, exportJsonl, cliJson, killDaemon, type TestEnv } from '../helpers.js';
import { FIXTURES, PYTHON, torchMissing, pyEnv, readJson, freePort, runPython } from './py-helpers.js';

const STEPS = 40;
const SLOW_RANK = 3;
const SLOW_MS = 40;
const median = (a: number[]) => a.slice().sort((x, y) => x - y)[a.length >> 1]!;

describe.skipIf(torchMissing !== null)(`run.watch(ddp_model): arrival and wait at the all-reduce, per rank${torchMissing ? ` (skipped: ${torchMissing})` : ''}`, () => {
  let t: TestEnv;
  const rows: Array<Array<Record<string, number>>> = [];
  const ids: string[] = [];

  beforeAll(async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    const out = path.join(t.dir, 'out');
    fs.mkdirSync(out);
    const args = ['-m', 'torch.distributed.run', '--nproc_per_node', '4', '--master_port', String(await freePort()), '--monitor_interval', '1',
      '--redirects', '1', '--tee', '1', '--log_dir', path.join(t.dir, 'torchrun'),
      path.join(FIXTURES, 'watch_train.py'), out, 'g-watch', String(SLOW_RANK), String(SLOW_MS), String(STEPS)];
    const r = await execa(PYTHON, args, { env: pyEnv(t, { OMP_NUM_THREADS: '1' }), extendEnv: false, reject: false, all: true, timeout: 240_000 });
    expect(r.exitCode, `torchrun failed:\n${r.all}`).toBe(0);
    for (let rank = 0; rank < 4; rank++) {
      const f = readJson<{ run: string; state: string }>(path.join(out, `rank${rank}.json`));
      expect(f.state).toBe('finished');
      ids.push(f.run);
      rows.push((await exportJsonl(t, f.run)) as Array<Record<string, number>>);
    }
  }, 300_000);

  afterAll(async () => {
    if (!t) return;
    await killDaemon(t.dir);
    await t.cleanup();
  });

  it("the figures ride in the loop's own rows: every step once, no row added, each with the loss and the rank's wait", async () => {
    for (const r of rows) {
      expect(r.map((x) => x._step)).toEqual(Array.from({ length: STEPS }, (_, i) => i));
      expect(r.every((x) => typeof x.loss === 'number')).toBe(true);
      const timed = r.filter((x) => typeof x['logd/ddp/wait_ms'] === 'number' && typeof x['logd/ddp/arrival'] === 'number');
      expect(timed.length).toBeGreaterThanOrEqual(STEPS - 1);
      expect(timed.every((x) => x['logd/ddp/buckets']! >= 1 && x['logd/ddp/wait_ms']! >= 0)).toBe(true);
    }
    for (const id of ids) expect((await cliJson<{ historyRows: number }>(t, ['show', id])).historyRows).toBe(STEPS);
  });

  it('the slow rank waits least at the all-reduce, and every other rank waits for it', () => {
    const waits = rows.map((r) => median(r.slice(2).map((x) => x['logd/ddp/wait_ms']!).filter((w) => typeof w === 'number')));
    const others = waits.filter((_, rank) => rank !== SLOW_RANK);
    expect(Math.min(...others), `median waits per rank: ${waits.map((w) => w.toFixed(1)).join(', ')} ms`).toBeGreaterThan(waits[SLOW_RANK]! + SLOW_MS / 2);
  });

  it('the slow rank arrives last at the all-reduce in nearly every step (one clock: one node)', () => {
    let last = 0;
    let steps = 0;
    for (let s = 1; s < STEPS - 1; s++) {
      const arrivals = rows.map((r) => r.find((x) => x._step === s)?.['logd/ddp/arrival']);
      if (arrivals.some((a) => typeof a !== 'number')) continue;
      steps++;
      if (arrivals.indexOf(Math.max(...(arrivals as number[]))) === SLOW_RANK) last++;
    }
    expect(steps).toBeGreaterThanOrEqual(STEPS - 4);
    expect(last / steps, `rank ${SLOW_RANK} arrived last in ${last} of ${steps} steps`).toBeGreaterThanOrEqual(0.8);
  });

  it('refuses a model that is not DistributedDataParallel, saying what it takes', async () => {
    const file = path.join(t.dir, 'bad.py');
    fs.writeFileSync(file, `
import torch, logd
run = logd.init(project="watch-bad")
try:
    run.watch(torch.nn.Linear(2, 2))
except TypeError as e:
    print("REFUSED", e)
run.finish()
`);
    const r = await runPython(t, [file], { timeout: 60_000 });
    expect(r.exitCode, r.all).toBe(0);
    expect(r.stdout).toMatch(/REFUSED logd: run.watch\(\) takes a torch.nn.parallel.DistributedDataParallel model, not Linear/);
    expect((await cliJson(t, ['runs', '--project', 'watch'])).length).toBe(4);
  });
});
