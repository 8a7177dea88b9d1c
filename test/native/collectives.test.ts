// Collectives across real rank processes (test/native/worker.mjs), over the
// real libtorch c10d gloo backend.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isAvailable, loadError } from '../../native/index.js';
import { distReady, freePort, NOT_BUILT, runScenario, spawnRanks, workerScript, type RankOutcome } from './harness.js';

const skip = !isAvailable() || !distReady;
const reason = !isAvailable() ? loadError() : NOT_BUILT;

function expectedOps(n: number) {
  const ranks = Array.from({ length: n }, (_, r) => r);
  const cols = ranks.map((r) => [r + 1, 2 * (r + 1), 10 - r]);
  const reduce = (f: (a: number, b: number) => number) => [0, 1, 2].map((i) => cols.map((c) => c[i]!).reduce(f));
  const sum = reduce((a, b) => a + b);
  const out: Record<string, unknown> = {};
  for (const t of ['f32', 'f64', 'i32']) {
    out[`sum:${t}`] = sum;
    out[`avg:${t}`] = sum.map((s) => (t === 'i32' ? Math.trunc(s / n) : s / n));
    out[`min:${t}`] = reduce((a, b) => Math.min(a, b));
    out[`max:${t}`] = reduce((a, b) => Math.max(a, b));
    out[`product:${t}`] = reduce((a, b) => a * b);
  }
  out.broadcast = [(n - 1) * 100 + 0.5, n - 1];
  out.allGather = ranks.flatMap((r) => [r, r * r]);
  out.view = [-1, -1, ranks.reduce((a, r) => a + r + 1, 0), ranks.reduce((a, r) => a + r + 2, 0), -1];
  out.inflight = Array.from({ length: 8 }, (_, i) => i * n + ranks.reduce((a, r) => a + r, 0));
  out.inflightOrder = [0, 1, 2, 3, 4, 5, 6, 7];
  out.mixedOrder = [0, 1, 2, 3, 4];
  out.mixedValues = [n, n, n];
  return out;
}

function assertOps(outcomes: RankOutcome[], n: number) {
  const expected = expectedOps(n);
  for (const o of outcomes) {
    expect(o.code, `rank ${o.rank} stderr: ${o.stderr}`).toBe(0);
    expect(o.result).toMatchObject(expected);
    const r = o.result!;
    expect(r.badGather).toMatchObject({ ok: false, name: 'InvalidArgumentError', isNative: true });
    expect(r.badType).toMatchObject({ ok: false, name: 'InvalidArgumentError' });
    expect(r.badTensor).toMatchObject({ ok: false, name: 'InvalidArgumentError' });
    expect(r.badOp).toMatchObject({ ok: false, name: 'InvalidArgumentError' });
    expect(r.reduceScatter).toMatchObject({ ok: false, name: 'NotSupportedError' });
    expect(r.reduceScatter.message).toMatch(/reduce_scatter/);
    expect(r.afterDestroy).toMatchObject({ ok: false, name: 'ProcessGroupDestroyedError' });
  }
}

describe.skipIf(skip)(`native collectives (gloo)${skip ? ` — skipped: ${reason}` : ''}`, () => {
  it('every op, broadcast, allGather, views and in-flight ops agree across 2 ranks (tcp://)', async () => {
    assertOps(await runScenario('ops', 2), 2);
  });

  it('the same holds on the fast path (checkCollectives off: issued from the JS thread, completed from gloo)', async () => {
    assertOps(await runScenario('ops', 2, 10_000, { LOGD_CHECK_COLLECTIVES: '0' }), 2);
  });

  it('the same holds for 4 ranks rendezvousing through env:// like torchrun', async () => {
    const port = await freePort();
    const outcomes = await spawnRanks(4, (rank) => [workerScript, 'ops', String(rank), '4', 'env://', '20000'], {
      deadlineMs: 45_000,
      envFor: (rank) => ({ MASTER_ADDR: '127.0.0.1', MASTER_PORT: String(port), RANK: String(rank), WORLD_SIZE: '4' }),
    }).done;
    assertOps(outcomes, 4);
  });

  it('file:// rendezvous works', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'logd-native-')), 'store');
    const outcomes = await spawnRanks(2, (rank) => [workerScript, 'ops', String(rank), '2', `file://${file}`, '10000'], { deadlineMs: 30_000 }).done;
    assertOps(outcomes, 2);
  });

  it('ranks disagreeing on sizes, reduce op or collective all reject with InvalidArgumentError naming each call, and the group stays usable', async () => {
    const outcomes = await runScenario('mismatch', 2, 5000);
    for (const o of outcomes) {
      expect(o.code, o.stderr).toBe(0);
      expect(o.result).toMatchObject({ ok: false, name: 'InvalidArgumentError' });
      expect(o.result!.message).toContain('rank 0: allReduce(4 x Float, sum)');
      expect(o.result!.message).toContain('rank 1: allReduce(8 x Float, sum)');
      expect(o.result!.ops).toMatchObject({ ok: false, name: 'InvalidArgumentError' });
      expect(o.result!.ops.message).toContain('rank 1: allReduce(4 x Float, max)');
      expect(o.result!.kinds).toMatchObject({ ok: false, name: 'InvalidArgumentError' });
      expect(o.result!.kinds.message).toMatch(/rank 0: barrier\(\); rank 1: broadcast\(2 x Int, root 0\)/);
      expect(o.result!.after).toBe(3); // the group still works afterwards
    }
  });

  it.each([['on', '1'], ['off', '0']])('a long barrier leaves timers and the libuv pool (fs) running (check %s)', async (_, check) => {
    const [rank0] = await runScenario('eventloop', 2, 10_000, { LOGD_CHECK_COLLECTIVES: check });
    expect(rank0!.code, rank0!.stderr).toBe(0);
    const r = rank0!.result!;
    expect(r.barrierMs).toBeGreaterThan(1300); // it really waited for rank 1
    expect(r.ticks).toBeGreaterThan(80); // a 10 ms interval kept firing
    expect(r.maxGap).toBeLessThan(250);
    expect(r.fsMaxMs).toBeLessThan(1000); // 16 readFile calls finished long before the barrier
    expect(r.fsMaxMs).toBeLessThan(r.barrierMs);
  });
});
