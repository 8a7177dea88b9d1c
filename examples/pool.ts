// Pattern "pool": a parent sets logd up once, then a pool of forked workers
// runs trials (a small learning-rate sweep), each trial its own run.
//
//   node dist/examples/pool.js [--workers 3] [--trials 6] [--steps 15] [--project examples-pool]
//
// `logd.setup()` in the parent finds or starts the daemon and exports
// LOGD_SERVICE; forked children inherit it and connect to that same daemon
// instead of looking for (or starting) one of their own.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import * as logd from 'logd';
import { parseOptions, optionArgs, trainStep, fakeMetrics, waitForExit, logdCommand, runMain } from './common.js';

const script = fileURLToPath(import.meta.url);
const opts = parseOptions('pool.js', { workers: 3, steps: 15, project: 'examples-pool' }, ['trials', 'group']);

type ToWorker = { kind: 'trial'; trial: number; lr: number; service: string } | { kind: 'stop' };
type FromWorker = { kind: 'done'; trial: number; runId: string; state: string; pid: number };

const lrFor = (trial: number) => Number((0.1 * 0.5 ** trial).toPrecision(3));

async function runTrial(msg: Extract<ToWorker, { kind: 'trial' }>, group: string): Promise<FromWorker> {
  // Inherited from the parent's setup(): this worker reuses the parent's daemon.
  if (process.env.LOGD_SERVICE !== msg.service) {
    throw new Error(`pool worker ${process.pid}: LOGD_SERVICE is ${JSON.stringify(process.env.LOGD_SERVICE)}, not the parent's ${msg.service}`);
  }
  const run = await logd.init({
    project: opts.project, group, jobType: 'sweep', name: `trial${msg.trial}`,
    config: { trial: msg.trial, lr: msg.lr, steps: opts.steps },
  });
  for (let step = 0; step < opts.steps; step++) {
    await trainStep(opts.stepMs);
    const m = fakeMetrics(step, opts.steps, msg.trial);
    run.log({ loss: m.loss, acc: m.acc }, { step });
  }
  const res = await run.finish({ exitCode: 0 });
  return { kind: 'done', trial: msg.trial, runId: run.id, state: res.state, pid: process.pid };
}

function worker(group: string): void {
  // One trial at a time: the parent sends the next one when this one is done.
  process.on('message', (msg: ToWorker) => {
    if (msg.kind === 'stop') {
      process.disconnect();
      return;
    }
    runTrial(msg, group).then(
      (res) => process.send!(res),
      (e: Error) => {
        console.error(`pool worker ${process.pid}: trial ${msg.trial} failed: ${e.message}`);
        process.exit(1);
      },
    );
  });
}

async function main(group: string): Promise<void> {
  const trials = Number(opts.extra.trials ?? opts.workers * 2);
  if (!Number.isSafeInteger(trials) || trials < 1) {
    console.error(`pool: --trials must be a positive integer, not ${JSON.stringify(opts.extra.trials)}`);
    process.exit(2);
  }
  const { service } = await logd.setup();
  console.log(`pool: daemon at ${service.split('#')[0]}; ${opts.workers} workers run ${trials} trials in group ${group}`);

  const queue = Array.from({ length: trials }, (_, i) => i);
  const results: FromWorker[] = [];
  const workers = Array.from({ length: opts.workers }, () => fork(script, ['--worker', ...optionArgs(opts), '--group', group]));
  for (const w of workers) {
    const sendNext = () => {
      const trial = queue.shift();
      const msg: ToWorker = trial === undefined ? { kind: 'stop' } : { kind: 'trial', trial, lr: lrFor(trial), service };
      w.send(msg);
    };
    w.on('message', (res: FromWorker) => {
      results.push(res);
      console.log(`pool: trial ${res.trial} (lr ${lrFor(res.trial)}) -> run ${res.runId} ${res.state}, worker pid ${res.pid}`);
      sendNext();
    });
    sendNext();
  }
  const codes = await Promise.all(workers.map((w, i) => waitForExit(w, 60_000, `pool worker ${i}`)));
  const failed = codes.filter((c) => c !== 0).length;
  const notFinished = results.filter((r) => r.state !== 'finished').length;
  if (failed > 0 || results.length !== trials || notFinished > 0) {
    console.error(`pool: ${failed} worker(s) failed, ${results.length}/${trials} trials done, ${notFinished} not finished`);
    process.exit(1);
  }
  console.log(`pool: done; see: ${logdCommand(`runs --project ${opts.project} --group ${group}`)}`);
}

const group = opts.extra.group ?? `sweep-${new Date().toISOString().replace(/[:.]/g, '-')}`;
if (opts.worker) worker(group);
else await runMain('pool', () => main(group));
