// The DDP example under `logd launch`, logging through logd in both patterns:
// launch makes sure of the daemon once, ranks train with gloo and log.
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, cli, cliJson, exportJsonl, ROOT, type TestEnv } from '../helpers.js';

const native = await import('../../dist/native/index.js').catch(() => null);
const reason = !native ? 'dist/ is missing: run `make build`' : native.isAvailable() ? '' : `native addon unavailable: ${native.loadError()}`;
const train = path.join(ROOT, 'dist', 'examples', 'ddp', 'train.js');

let t: TestEnv;
afterEach(async () => t && (await t.cleanup()));

describe.skipIf(reason !== '')(`ddp example with logging${reason ? ` (skipped: ${reason})` : ''}`, () => {
  it('--log all: every rank logs its own run in one group; --log rank0: one run', async () => {
    t = makeEnv();
    const all = await cli(t, ['launch', '--nproc-per-node', '2', train, '--log', 'all', '--group', 'g-all'], { timeout: 90_000 });
    expect(all.exitCode).toBe(0);
    const runs = await cliJson(t, ['runs', '--group', 'g-all']);
    expect(runs).toHaveLength(2);
    expect(runs.map((r: any) => r.metadata.rank.rank).sort()).toEqual([0, 1]);
    expect(runs.every((r: any) => r.state === 'finished' && r.metadata.rank.worldSize === 2)).toBe(true);
    // 100 samples, batch 10, 2 ranks: 5 steps per epoch per rank, 10 epochs, plus one epoch row each.
    const rows = await exportJsonl(t, runs[0].id);
    expect(rows.filter((r) => typeof r.loss === 'number')).toHaveLength(50);
    expect(rows.filter((r) => typeof r.epoch_loss === 'number')).toHaveLength(10);
    const one = await cli(t, ['launch', '--nproc-per-node', '2', train, '--log', 'rank0', '--group', 'g-rank0'], { timeout: 90_000 });
    expect(one.exitCode).toBe(0);
    const r0 = await cliJson(t, ['runs', '--group', 'g-rank0']);
    expect(r0).toHaveLength(1);
    expect(r0[0].metadata.rank.rank).toBe(0);
  });
});
