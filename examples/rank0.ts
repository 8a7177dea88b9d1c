// Pattern "one process": every rank trains, only rank 0 creates a run and logs.
//
//   node dist/examples/rank0.js [--workers 4] [--steps 20] [--project examples-rank0]
//
// Without --worker this script is its own launcher (like torchrun): it starts
// --workers copies of itself with RANK, LOCAL_RANK, WORLD_SIZE, ... set.
// The run records the rank of its creator (`logd show RUN --json` ->
// metadata.rank), so one run per job is enough to know where it came from.
import { fileURLToPath } from 'node:url';
import * as logd from 'logd';
import { parseOptions, optionArgs, launch, rankFromEnv, trainStep, fakeMetrics, logdCommand, runMain } from './common.js';

const script = fileURLToPath(import.meta.url);
const opts = parseOptions('rank0.js', { workers: 4, steps: 20, project: 'examples-rank0' });

async function worker(): Promise<void> {
  const { rank, worldSize } = rankFromEnv();
  // Only rank 0 talks to logd; the other ranks never connect at all.
  const run = rank === 0
    ? await logd.init({
        project: opts.project,
        name: `rank0-${new Date().toISOString().replace(/[:.]/g, '-')}`,
        jobType: 'train',
        config: { world_size: worldSize, steps: opts.steps, lr: 0.01, batch_size: 32 },
      })
    : null;
  for (let step = 0; step < opts.steps; step++) {
    await trainStep(opts.stepMs); // every rank does its share of the work
    if (run) {
      const m = fakeMetrics(step, opts.steps);
      run.log({ loss: m.loss, acc: m.acc }, { step });
    }
  }
  if (run) {
    run.summary.update({ final_loss: fakeMetrics(opts.steps - 1, opts.steps).loss });
    const res = await run.finish({ exitCode: 0 });
    console.log(`[rank 0] run ${run.id} ${res.state}: ${opts.steps} steps logged${res.message ? ` (${res.message})` : ''}`);
    if (res.state !== 'finished') process.exitCode = 1;
  }
}

async function main(): Promise<void> {
  console.log(`rank0: launching ${opts.workers} ranks; only rank 0 logs`);
  const code = await launch(script, opts.workers, optionArgs(opts));
  if (code !== 0) {
    console.error(`rank0: a rank failed (exit code ${code})`);
    process.exit(code);
  }
  console.log(`rank0: done; see: ${logdCommand(`runs --project ${opts.project}`)}`);
}

await (opts.worker ? runMain(`[rank ${process.env.RANK}]`, worker) : runMain('rank0', main));
