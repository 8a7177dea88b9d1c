// Where a deferred run's records wait (issue 24: init() never ends training):
// when no daemon can be used, the client keeps the run's rows and spills them
// at exit. The spool of this data dir when it is writable; otherwise a
// private dir under the user's state dir, named after the data dir, which the
// daemon of that data dir also reads when it starts. Both the client and the
// daemon compute it here, so they agree.
import crypto from 'node:crypto';
import os from 'node:os';
import path from 'node:path';

export function deferredFallbackDir(dataDir: string, env: NodeJS.ProcessEnv = process.env): string {
  const state = env.XDG_STATE_HOME || path.join(env.HOME || os.homedir(), '.local', 'state');
  const tag = crypto.createHash('sha256').update(path.resolve(dataDir)).digest('hex').slice(0, 16);
  return path.join(state, 'logd', 'deferred', tag);
}
