// Failure paths: nothing may hang. Every rejection must arrive within the
// process group timeout (plus scheduling slack on a 2-core machine).
import { describe, expect, it } from 'vitest';
import { isAvailable, loadError } from '../../native/index.js';
import { distReady, freePort, NOT_BUILT, spawnRanks, workerScript } from './harness.js';

const skip = !isAvailable() || !distReady;
const reason = !isAvailable() ? loadError() : NOT_BUILT;
const SLACK_MS = 1500;

describe.skipIf(skip)(`native failure handling${skip ? ` — skipped: ${reason}` : ''}`, () => {
  it.each([['on', '1'], ['off', '0']])('a peer SIGKILLed mid-collective makes the others reject within the timeout (check %s)', async (_, check) => {
    const port = await freePort();
    const timeoutMs = 5000;
    const run = spawnRanks(3, (rank) => [workerScript, 'killed', String(rank), '3', `tcp://127.0.0.1:${port}`, String(timeoutMs)], {
      deadlineMs: 30_000,
      envFor: () => ({ LOGD_CHECK_COLLECTIVES: check }),
    });
    await run.waitForLine(2, 'READY');
    // Ranks 0 and 1 are now (or soon) inside an allReduce that rank 2 never joins.
    await new Promise((r) => setTimeout(r, 300));
    run.procs[2]!.kill('SIGKILL');
    const outcomes = await run.done;
    for (const o of outcomes.slice(0, 2)) {
      expect(o.code, o.stderr).toBe(0);
      expect(o.result).toMatchObject({ ok: false });
      expect(['PeerLostError', 'CollectiveTimeoutError']).toContain(o.result!.name);
      expect(o.result!.ms).toBeLessThan(timeoutMs + SLACK_MS);
      expect(o.result!.destroyed).toMatchObject({ ok: true });
      expect(o.result!.destroyed.ms).toBeLessThan(timeoutMs + SLACK_MS);
      expect(o.result!.destroyMaxGap).toBeLessThan(250); // the event loop kept ticking during destroy()
    }
  });

  it.each([['on', '1'], ['off', '0']])('a peer that is alive but never joins makes the others reject with CollectiveTimeoutError at the timeout (check %s)', async (_, check) => {
    const port = await freePort();
    const timeoutMs = 2000;
    const run = spawnRanks(2, (rank) => [workerScript, 'killed', String(rank), '2', `tcp://127.0.0.1:${port}`, String(timeoutMs)], {
      deadlineMs: 30_000,
      envFor: () => ({ LOGD_CHECK_COLLECTIVES: check }),
    });
    await run.waitForLine(1, 'READY');
    const rank0 = await new Promise<number | null>((resolve) => run.procs[0]!.on('close', resolve));
    run.procs[1]!.kill('SIGKILL');
    const [o] = await run.done;
    expect(rank0, o!.stderr).toBe(0);
    expect(o!.result).toMatchObject({ ok: false, name: 'CollectiveTimeoutError' });
    expect(o!.result!.ms).toBeGreaterThan(timeoutMs - 100);
    expect(o!.result!.ms).toBeLessThan(timeoutMs + SLACK_MS);
    expect(o!.result!.destroyed).toMatchObject({ ok: true });
    expect(o!.result!.destroyMaxGap).toBeLessThan(250);
  });

  it('init rejects with CollectiveTimeoutError when another rank never starts (server side)', async () => {
    const port = await freePort();
    const [rank0] = await spawnRanks(2, (rank) => [workerScript, 'ops', String(rank), '2', `tcp://127.0.0.1:${port}`, '2000'], {
      deadlineMs: 20_000,
      ranks: [0],
    }).done;
    expect(rank0!.code).toBe(3);
    expect(rank0!.result).toMatchObject({ init: 'failed', name: 'CollectiveTimeoutError' });
    expect(rank0!.result!.message).toMatch(/rank 0 of 2, timeout 2000 ms/);
    expect(rank0!.result!.ms).toBeLessThan(2000 + SLACK_MS);
  });

  it('init rejects with CollectiveTimeoutError when the master never starts (client side)', async () => {
    const port = await freePort();
    const [rank1] = await spawnRanks(2, (rank) => [workerScript, 'ops', String(rank), '2', `tcp://127.0.0.1:${port}`, '2000'], {
      deadlineMs: 20_000,
      ranks: [1],
    }).done;
    expect(rank1!.code).toBe(3);
    expect(rank1!.result).toMatchObject({ init: 'failed', name: 'CollectiveTimeoutError' });
    expect(rank1!.result!.ms).toBeLessThan(2000 + SLACK_MS);
  });
});
