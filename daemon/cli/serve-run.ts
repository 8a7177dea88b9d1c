// What `logd serve` does once its flags are read: the data dir's lock first (a daemon that loses the start race
// exits before loading the daemon proper), then the daemon. serve.ts calls it with the parsed flags; daemon/cli.ts
// calls it directly for `logd serve --sidecar`, the exact command a client starts, so a sidecar's start skips the
// command-line parser (commander: 4-6 ms of a cold start on the 2-core machine).
import path from 'node:path';
import { resolvePaths, daemonTunables } from '../../src/config.js';
import { fail } from './fail.js';

export interface ServeFlags { port?: number; host: string; allowRemote?: boolean; sidecar?: boolean; sampleInterval?: number; onStall?: string; alerts?: string }

export async function runServe(o: ServeFlags, uploadUrl: string | undefined): Promise<void> {
  // The file names the sinks (its URLs stay in it, or in the variables it names): only its path is on argv.
  if (o.alerts) process.env.LOGD_ALERTS = path.resolve(o.alerts);
  const { acquireLockWhenFree, refuseSecondDaemon } = await import('../process/lock.js');
  const paths = resolvePaths();
  process.umask(0o077);
  let lock;
  try {
    // A daemon that is stopping hands the lock over: wait for it (at most its own stop deadline and 2 s).
    lock = await acquireLockWhenFree(paths, daemonTunables().shutdownTimeoutMs + 2000);
  } catch (e) {
    fail((e as Error).message);
  }
  if (!lock) refuseSecondDaemon(paths, (line) => process.stderr.write(`${new Date().toISOString()} ${line}\n`));
  const { serve } = await import('../daemon.js');
  try {
    await serve({ sidecar: !!o.sidecar, port: o.port ?? null, host: o.host, allowRemote: !!o.allowRemote, sampleIntervalMs: o.sampleInterval, uploadUrl, onStall: o.onStall }, paths, lock);
  } catch (e) {
    fail((e as Error).message);
  }
}
