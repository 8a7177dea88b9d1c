// What happens when a process ends without finish():
// - the event loop drains (beforeExit): every open run is finished normally;
// - process.exit() or a fatal signal: what is unsent goes to a spill file,
//   synchronously, with the exit code; the daemon ingests it and finalises.
// - a signal the process handles itself is not an exit: runs stay open.
import { liveRuns } from './run.js';
import { watchUncaught } from './uncaught.js';

let installed = false;
let finishingAtExit = false;

export function installExitHooks(): void {
  if (installed) return;
  installed = true;
  watchUncaught();
  process.on('beforeExit', () => {
    if (finishingAtExit || liveRuns().length === 0) return;
    finishingAtExit = true;
    const code = typeof process.exitCode === 'number' ? process.exitCode : 0;
    void Promise.all(liveRuns().map((r) => r.finish({ exitCode: code }))).finally(() => {
      finishingAtExit = false;
    });
  });
  process.on('exit', (code) => {
    for (const r of liveRuns()) {
      try {
        r.spillForExit(code);
      } catch (e) {
        process.stderr.write(`logd: could not spill run ${r.id} at exit: ${(e as Error).message}\n`);
      }
    }
  });
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    const onSignal = () => {
      // The process has its own handler (a checkpoint on preemption, say):
      // it goes on, and so do its runs. What is unsent is spilled on the
      // real exit (the 'exit' hook above), not now.
      if (process.listenerCount(sig) > 1) return;
      const num = sig === 'SIGINT' ? 2 : sig === 'SIGTERM' ? 15 : 1;
      for (const r of liveRuns()) {
        try {
          r.spillForExit(128 + num);
        } catch (e) {
          // Nothing more can be done in a dying process but say what is lost.
          process.stderr.write(`logd: could not spill run ${r.id} at ${sig}: ${(e as Error).message}\n`);
        }
      }
      // logd's handler is the only one: die of the signal as the process would have.
      process.removeListener(sig, onSignal);
      process.kill(process.pid, sig);
    };
    process.on(sig, onSignal);
  }
}
