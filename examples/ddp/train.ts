// Data-parallel training of the SimpleModel (Linear(10 -> 1) + sigmoid, BCE,
// SGD lr 0.01, batch 10, 10 epochs) with gradients computed here in float64
// and averaged across ranks with the native allReduce, as DDP does.
//
//   logd launch --nproc-per-node 2 dist/examples/ddp/train.js [--init initial.json]
//     [--indices indices.json] [--out final.json] [--log rank0|all|none] [--seed 0]
//     [--backend gloo|nccl]   (nccl: the gradients go through the GPU, one per rank)
//
// --init and --indices take the files test/native/ref_ddp.py writes, so the run
// can be compared with PyTorch DDP weight for weight.
import { readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { initProcessGroup, type ProcessGroup } from '../../native/index.js';
import { distributedSamplerIndices, syntheticInitialState, type InitialState } from './sampler.js';

const { values: flags } = parseArgs({
  options: {
    init: { type: 'string' },
    indices: { type: 'string' },
    out: { type: 'string' },
    log: { type: 'string', default: 'none' },
    group: { type: 'string' },
    seed: { type: 'string', default: '0' },
    epochs: { type: 'string', default: '10' },
    'timeout-ms': { type: 'string', default: '60000' },
    backend: { type: 'string', default: 'gloo' },
  },
});

const LR = 0.01;
const BATCH = 10;
const SAMPLES = 100;
const DIMS = 10;
const seed = Number(flags.seed);
const epochs = Number(flags.epochs);
const logMode = flags.log as 'rank0' | 'all' | 'none';
if (!['rank0', 'all', 'none'].includes(logMode)) throw new Error(`train: --log must be rank0, all or none (got ${flags.log})`);

// The slice of the logd client this example uses (client/ lands separately).
interface LogdRun {
  log(data: Record<string, number>, opts?: { step?: number }): void;
  finish(): Promise<void>;
}
interface LogdClient {
  init(opts: { project: string; name?: string; group?: string; config?: Record<string, unknown> }): Promise<LogdRun>;
}

/** Forward pass, BCE loss (log clamped at -100 like torch) and its gradient, averaged over the batch. */
function batchGradient(state: InitialState, w: Float64Array, b: number, batch: number[], out: Float64Array): void {
  out.fill(0);
  for (const i of batch) {
    const x = state.X[i]!;
    const y = state.Y[i]!;
    let z = b;
    for (let j = 0; j < DIMS; j++) z += w[j]! * x[j]!;
    const p = 1 / (1 + Math.exp(-z));
    out[DIMS + 1]! -= y * Math.max(Math.log(p), -100) + (1 - y) * Math.max(Math.log(1 - p), -100);
    const dz = p - y; // d(BCE)/dp * dp/dz
    for (let j = 0; j < DIMS; j++) out[j]! += dz * x[j]!;
    out[DIMS]! += dz;
  }
  for (let k = 0; k < out.length; k++) out[k]! /= batch.length;
}

/** A group name every rank agrees on: --group, the one `logd launch` gives (LOGD_GROUP), or a random id from rank 0. */
async function sharedGroupName(pg: ProcessGroup): Promise<string> {
  if (flags.group) return flags.group;
  if (process.env.LOGD_GROUP) return process.env.LOGD_GROUP;
  const id = new Int32Array([Math.floor(Math.random() * 0x7fffffff)]);
  await pg.broadcast(id, 0);
  return `ddp-${id[0]!.toString(16)}`;
}

async function main(): Promise<void> {
  if (flags.backend !== 'gloo' && flags.backend !== 'nccl') throw new Error(`train: --backend must be gloo or nccl, not ${flags.backend}`);
  const pg = await initProcessGroup({ backend: flags.backend, initMethod: 'env://', timeoutMs: Number(flags['timeout-ms']) });
  const { rank, worldSize } = pg;
  const state: InitialState = flags.init ? JSON.parse(readFileSync(flags.init, 'utf8')) : syntheticInitialState(SAMPLES, DIMS, seed);
  const indexFile: number[][][] | null = flags.indices ? JSON.parse(readFileSync(flags.indices, 'utf8')) : null;
  if (indexFile && indexFile[0]?.length !== worldSize) {
    throw new Error(`train: ${flags.indices} was written for ${indexFile[0]?.length} ranks, this job has ${worldSize}`);
  }

  // DDP broadcasts rank 0's parameters at construction; do the same.
  const params = new Float64Array([...state.weight, state.bias]);
  await pg.broadcast(params, 0);
  const w = params.subarray(0, DIMS);

  let run: LogdRun | null = null;
  const group = logMode === 'none' ? null : await sharedGroupName(pg);
  if (logMode === 'all' || (logMode === 'rank0' && rank === 0)) {
    const spec = 'logd'; // resolved at run time: the client is an optional peer of this example
    const logd = (await import(spec).catch((err: Error) => {
      throw new Error(`--log ${logMode} needs the logd client package (build it with \`make build\`), or pass --log none: ${err.message}`);
    })) as LogdClient;
    run = await logd.init({
      project: 'ddp-example',
      name: `rank-${rank}`,
      group: group ?? undefined,
      config: { lr: LR, batch: BATCH, epochs, worldSize, seed, backend: pg.backend },
    });
  }

  const grad = new Float64Array(DIMS + 2); // [dW..., dB, loss], averaged across ranks in one allReduce
  let step = 0;
  for (let epoch = 0; epoch < epochs; epoch++) {
    const mine = indexFile ? indexFile[epoch]![rank]! : distributedSamplerIndices(SAMPLES, worldSize, rank, seed, epoch);
    let epochLoss = 0;
    let batches = 0;
    for (let start = 0; start < mine.length; start += BATCH) {
      batchGradient(state, w, params[DIMS]!, mine.slice(start, start + BATCH), grad);
      await pg.allReduce(grad, 'avg');
      for (let j = 0; j <= DIMS; j++) params[j]! -= LR * grad[j]!;
      epochLoss += grad[DIMS + 1]!;
      batches++;
      run?.log({ loss: grad[DIMS + 1]! }, { step });
      step++;
    }
    run?.log({ epoch, epoch_loss: epochLoss / batches }, { step });
    if (rank === 0) console.log(`epoch ${epoch} loss ${(epochLoss / batches).toFixed(6)}`);
  }

  const final = { weight: Array.from(w), bias: params[DIMS]!, worldSize, steps: step };
  if (rank === 0) {
    console.log(JSON.stringify(final));
    if (flags.out) writeFileSync(flags.out, JSON.stringify(final));
  }
  await run?.finish();
  await pg.destroy();
}

main().catch((err: Error) => {
  console.error(`train: ${err.name}: ${err.message}`);
  process.exit(1);
});
