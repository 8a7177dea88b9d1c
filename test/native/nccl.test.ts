// NCCL: runs only with a CUDA build of the addon and at least one GPU
// (one rank per GPU, at most 2); everywhere else it skips with the reason.
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { buildInfo, isAvailable } from '../../native/index.js';
import { distReady, runScenario } from './harness.js';

const hasNccl = isAvailable() && buildInfo().backends.includes('nccl');
const gpus = hasNccl ? (spawnSync('nvidia-smi', ['-L'], { encoding: 'utf8', timeout: 20_000 }).stdout ?? '').split('\n').filter((l) => l.startsWith('GPU ')).length : 0;
const reason = !hasNccl ? 'the addon was built without NCCL (CPU libtorch)' : gpus === 0 ? 'no GPU (nvidia-smi -L lists none)' : !distReady ? 'dist/ missing' : null;

describe.skipIf(reason !== null)(`native collectives (nccl)${reason ? ` — skipped: ${reason}` : ''}`, () => {
  it('host typed arrays round-trip through the GPU with the right results', async () => {
    const n = Math.min(gpus, 2);
    const outcomes = await runScenario('ops', n, 60_000, { LOGD_TEST_BACKEND: 'nccl' });
    const sum = Array.from({ length: n }, (_, r) => r).reduce((a, r) => a + r + 1, 0);
    for (const o of outcomes) {
      expect(o.code, o.stderr).toBe(0);
      expect(o.result!['sum:f32']![0]).toBe(sum);
      expect(o.result!['avg:f64']![0]).toBe(sum / n);
      expect(o.result!.broadcast).toEqual([(n - 1) * 100 + 0.5, n - 1]);
      expect(o.result!.view).toEqual([-1, -1, sum, sum + n, -1]);
    }
  });
});
