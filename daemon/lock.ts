// The "one daemon per data dir" lock: an abstract-namespace socket, exclusive
// and released by the kernel when its holder dies. Kept apart from daemon.ts
// so that `logd serve` takes it before loading the daemon: when eight ranks
// start at once, seven sidecars lose the race, and each loser then exits
// having paid for Node and this file, not for grpc-js, SQLite and the store.
import fs from 'node:fs';
import net from 'node:net';
import type { LogdPaths } from '../src/config.js';

export const EXIT_ALREADY_RUNNING = 3;

export function acquireLock(name: string): Promise<net.Server | null> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', (e: NodeJS.ErrnoException) => (e.code === 'EADDRINUSE' ? resolve(null) : reject(e)));
    srv.listen({ path: `\0${name}` }, () => {
      srv.unref();
      resolve(srv);
    });
  });
}

/** Another daemon holds the lock: say which, and exit with EXIT_ALREADY_RUNNING (clients read that code). */
export function refuseSecondDaemon(paths: LogdPaths, log: (line: string) => void): never {
  let where = paths.serviceFile;
  try {
    const owner = JSON.parse(fs.readFileSync(paths.ownerFile, 'utf8')) as { pid: number; serviceFile: string };
    where = `pid ${owner.pid}, service file ${owner.serviceFile}`;
  } catch {
    /* it is starting up */
  }
  log(`serve: another logd daemon already serves ${paths.dataDir} (${where}); not starting a second one. Use that daemon (same LOGD_RUNTIME_DIR), or give this one another LOGD_DIR`);
  process.exit(EXIT_ALREADY_RUNNING);
}
