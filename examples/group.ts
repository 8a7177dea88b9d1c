// Pattern "many processes": every rank logs its own run; all runs of the job
// carry the same `group`, so they are listed and compared together.
//
//   node dist/examples/group.js [--workers 4] [--steps 20] [--project examples-group] [--group G]
//
// The launcher picks the group name once (default `exp-<timestamp>`) and hands
// it to every rank. The ranks start at the same moment and each finds or
// auto-starts the node's daemon: exactly one daemon wins, the others connect to it.
import { fileURLToPath } from 'node:url';
import * as logd from 'logd';
import { parseOptions, optionArgs, launch, rankFromEnv, trainStep, fakeMetrics, logdCommand, runMain } from './common.js';

const script = fileURLToPath(import.meta.url);
const opts = parseOptions('group.js', { workers: 4, steps: 20, project: 'examples-group' }, ['group']);

async function worker(group: string): Promise<void> {
  const { rank, worldSize } = rankFromEnv();
  const run = await logd.init({
    project: opts.project,
    group,
    name: `rank${rank}`,
    jobType: 'train',
    config: { world_size: worldSize, steps: opts.steps, lr: 0.01 },
  });
  for (let step = 0; step < opts.steps; step++) {
    await trainStep(opts.stepMs);
    const m = fakeMetrics(step, opts.steps, rank); // each rank sees its own shard, so its own curve
    run.log({ loss: m.loss, acc: m.acc }, { step });
  }
  const res = await run.finish({ exitCode: 0 });
  console.log(`[rank ${rank}] run ${run.id} ${res.state}${res.message ? ` (${res.message})` : ''}`);
  if (res.state !== 'finished') process.exitCode = 1;
}

async function main(group: string): Promise<void> {
  console.log(`group: launching ${opts.workers} ranks, each logging its own run in group ${group}`);
  const code = await launch(script, opts.workers, [...optionArgs(opts), '--group', group]);
  if (code !== 0) {
    console.error(`group: a rank failed (exit code ${code})`);
    process.exit(code);
  }
  console.log(`group: done; see: ${logdCommand(`runs --project ${opts.project} --group ${group}`)}`);
}

const group = opts.extra.group ?? `exp-${new Date().toISOString().replace(/[:.]/g, '-')}`;
await (opts.worker ? runMain(`[rank ${process.env.RANK}]`, () => worker(group)) : runMain('group', () => main(group)));
