// The TypeScript DDP example against PyTorch DDP (gloo) on the same data,
// initial weights and DistributedSampler order: final weights must agree to 1e-5.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { launch } from '../../launcher/launch.js';
import { distributedSamplerIndices } from '../../examples/ddp/sampler.js';
import { isAvailable, loadError } from '../../native/index.js';
import { distReady, freePort, NOT_BUILT, repoRoot, spawnRanks } from './harness.js';

const PYTHON = '/usr/bin/python3';
const torchOk = spawnSync(PYTHON, ['-c', 'import torch.distributed as d; assert d.is_available()'], { timeout: 60_000 }).status === 0;
const skipReason = !isAvailable() ? loadError() : !distReady ? NOT_BUILT : !torchOk ? `${PYTHON} cannot import torch.distributed: sudo apt-get install python3-torch` : null;

async function pytorchReference(worldSize: number, outDir: string): Promise<void> {
  const port = await freePort();
  // Plain env vars, as the issue asks (not torchrun).
  const outcomes = await spawnRanks(worldSize, () => [join(repoRoot, 'test', 'native', 'ref_ddp.py'), outDir, '0'], {
    deadlineMs: 60_000,
    command: PYTHON,
    envFor: (rank) => ({ MASTER_ADDR: '127.0.0.1', MASTER_PORT: String(port), RANK: String(rank), WORLD_SIZE: String(worldSize) }),
  }).done;
  for (const o of outcomes) expect(o.code, `ref_ddp.py rank ${o.rank}: ${o.stderr}`).toBe(0);
}

describe('DistributedSampler look-alike', () => {
  it('pads to a multiple of worldSize and strides rank::worldSize', () => {
    const perRank = [0, 1, 2].map((r) => distributedSamplerIndices(100, 3, r, 0, 5));
    for (const idx of perRank) expect(idx).toHaveLength(34);
    expect(new Set(perRank.flat()).size).toBe(100); // every sample, 2 of them twice (padding)
    expect(distributedSamplerIndices(100, 3, 1, 0, 5)).toEqual(perRank[1]); // deterministic
    expect(distributedSamplerIndices(100, 3, 1, 0, 6)).not.toEqual(perRank[1]); // set_epoch reshuffles
  });
});

describe.skipIf(!isAvailable() || !distReady)('DDP example on its own data and sampler', () => {
  it('trains deterministically across 3 ranks (padding path) with --log none (no logd client needed)', async () => {
    const runOnce = async () => {
      const dir = mkdtempSync(join(tmpdir(), 'logd-ddp-own-'));
      const sink = new PassThrough();
      let output = '';
      sink.on('data', (d: Buffer) => (output += d.toString()));
      const code = await launch({
        nprocPerNode: 3, nnodes: 1, nodeRank: 0, masterAddr: '127.0.0.1', masterPort: await freePort(), graceMs: 2000,
        script: join(repoRoot, 'dist', 'examples', 'ddp', 'train.js'),
        args: ['--out', join(dir, 'ts.json'), '--log', 'none', '--seed', '7', '--timeout-ms', '30000'],
        stdout: sink, stderr: sink,
      });
      expect(code, output).toBe(0);
      expect(output).toContain('[rank 0] epoch 9 loss');
      return JSON.parse(readFileSync(join(dir, 'ts.json'), 'utf8'));
    };
    const [a, b] = [await runOnce(), await runOnce()];
    expect(a.steps).toBe(40); // 100 samples padded to 102, 34 per rank: 4 batches x 10 epochs
    expect(a).toEqual(b);
  });
});

describe.skipIf(skipReason !== null)(`DDP example vs PyTorch DDP${skipReason ? ` — skipped: ${skipReason}` : ''}`, () => {
  for (const worldSize of [1, 2, 4]) {
    it(`ends with PyTorch's weights (within 1e-5) on ${worldSize} rank(s)`, async () => {
      const dir = mkdtempSync(join(tmpdir(), `logd-ddp-${worldSize}-`));
      await pytorchReference(worldSize, dir);
      const sink = new PassThrough();
      let output = '';
      sink.on('data', (d: Buffer) => (output += d.toString()));
      const code = await launch({
        nprocPerNode: worldSize, nnodes: 1, nodeRank: 0, masterAddr: '127.0.0.1', masterPort: await freePort(), graceMs: 2000,
        script: join(repoRoot, 'dist', 'examples', 'ddp', 'train.js'),
        args: ['--init', join(dir, 'initial.json'), '--indices', join(dir, 'indices.json'), '--out', join(dir, 'ts.json'), '--log', 'none', '--timeout-ms', '30000'],
        stdout: sink, stderr: sink,
      });
      expect(code, output).toBe(0);
      const ref = JSON.parse(readFileSync(join(dir, 'final.json'), 'utf8'));
      const ts = JSON.parse(readFileSync(join(dir, 'ts.json'), 'utf8'));
      const initial = JSON.parse(readFileSync(join(dir, 'initial.json'), 'utf8'));
      expect(ts.steps).toBe(10 * Math.ceil(Math.ceil(100 / worldSize) / 10));
      for (let j = 0; j < 10; j++) {
        expect(Math.abs(ts.weight[j] - ref.weight[j]), `weight ${j}`).toBeLessThan(1e-5);
        expect(Math.abs(ts.weight[j] - initial.weight[j])).toBeGreaterThan(1e-4); // it really trained
      }
      expect(Math.abs(ts.bias - ref.bias)).toBeLessThan(1e-5);
    });
  }
});
