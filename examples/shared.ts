// Pattern "shared run": one run, several processes. The parent creates the
// run and passes `run.handle()` to forked children; each child attaches and
// logs its own keys (`child0/loss`, ...) at the same step numbers as the
// parent. Every process is a writer of its own; rows of the same step from
// different writers are all kept (`logd export RUN --raw` shows them apart).
//
//   node dist/examples/shared.js [--workers 2] [--steps 20] [--project examples-shared]
//
// The parent finishes the run after its children have exited: the owner's
// finish is what makes the run `finished`, a child's finish only detaches it.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import * as logd from 'logd';
import { parseOptions, optionArgs, trainStep, fakeMetrics, waitForExit, logdCommand, runMain } from './common.js';

const script = fileURLToPath(import.meta.url);
const opts = parseOptions('shared.js', { workers: 2, steps: 20, project: 'examples-shared' });

/** How the handle reaches a child: any channel works (env, argv, a file, IPC); here the environment. */
const HANDLE_ENV = 'SHARED_RUN_HANDLE';

async function child(): Promise<void> {
  const index = Number(process.env.SHARED_CHILD_INDEX);
  const handle = process.env[HANDLE_ENV];
  if (!handle) throw new Error(`${HANDLE_ENV} is not set; run this script without --worker`);
  const run = await logd.attach(handle);
  for (let step = 0; step < opts.steps; step++) {
    await trainStep(opts.stepMs);
    run.log({ [`child${index}/loss`]: fakeMetrics(step, opts.steps, index + 1).loss }, { step });
  }
  const res = await run.finish(); // detaches this writer; the run stays open for its owner
  console.log(`[child ${index}] logged ${opts.steps} steps into run ${run.id}, detached`);
  if (res.timedOut) {
    console.error(`[child ${index}] ${res.message}`);
    process.exitCode = 1;
  }
}

async function main(): Promise<void> {
  const run = await logd.init({
    project: opts.project,
    name: `shared-${new Date().toISOString().replace(/[:.]/g, '-')}`,
    jobType: 'train',
    config: { children: opts.workers, steps: opts.steps },
  });
  console.log(`shared: run ${run.id}; forking ${opts.workers} children that attach to it`);
  const children = Array.from({ length: opts.workers }, (_, index) =>
    fork(script, ['--worker', ...optionArgs(opts)], { env: { ...process.env, [HANDLE_ENV]: run.handle(), SHARED_CHILD_INDEX: String(index) } }),
  );
  const exited = Promise.all(children.map((c, i) => waitForExit(c, 60_000, `child ${i}`)));
  for (let step = 0; step < opts.steps; step++) {
    await trainStep(opts.stepMs);
    const m = fakeMetrics(step, opts.steps);
    run.log({ loss: m.loss, acc: m.acc }, { step });
  }
  const codes = await exited;
  const failed = codes.filter((c) => c !== 0).length;
  // A failed child makes the run `crashed`, so nobody mistakes it for a complete one.
  const res = await run.finish({ exitCode: failed > 0 ? 1 : 0 });
  console.log(`shared: run ${run.id} ${res.state}${res.message ? ` (${res.message})` : ''}`);
  if (failed > 0 || res.state !== 'finished') {
    console.error(`shared: ${failed} child(ren) failed; run ${run.id} is ${res.state}`);
    process.exit(1);
  }
  console.log(`shared: done; see: ${logdCommand(`show ${run.id}`)}`);
  console.log(`        rows per writer: ${logdCommand(`export ${run.id} --raw`)}`);
}

await (opts.worker ? runMain(`[child ${process.env.SHARED_CHILD_INDEX}]`, child) : runMain('shared', main));
