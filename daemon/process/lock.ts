// Taking the one-daemon-per-data-dir lock (daemon/process/data-dir-lock.ts), kept
// apart from daemon.ts so that `logd serve` takes it before loading the
// daemon: when eight ranks start at once, seven sidecars lose the race, and
// each loser then exits having paid for Node, this file and SQLite, not for
// grpc-js, the store and the rest of the daemon.
import fs from 'node:fs';
import type { LogdPaths } from '../../src/config.js';
import { DataDirLock } from './data-dir-lock.js';
import { refuseNewerFormat, stampFormat } from './data-format.js';
import { privateRuntime } from '../../src/runtime-dir.js';
import { writeOwnerFile, liveOwner, stopMarker, type OwnerFile } from '../../src/service-file.js';
import { procStartTime } from '../../src/proc.js';

export const EXIT_ALREADY_RUNNING = 3;

/**
 * Creates the data dir when missing and takes its lock; null when another daemon holds it.
 * Throws, before writing anything there, when a newer logd wrote the data dir (data-format.ts).
 */
export function acquireLock(paths: LogdPaths): DataDirLock | null {
  if (fs.existsSync(paths.dataDir) && !fs.statSync(paths.dataDir).isDirectory()) {
    throw new Error(`LOGD_DIR ${paths.dataDir} exists and is not a directory; point LOGD_DIR at a directory`);
  }
  if (fs.existsSync(paths.dataDir)) refuseNewerFormat(paths.dataDir);
  fs.mkdirSync(paths.dataDir, { recursive: true, mode: 0o700 });
  const lock = DataDirLock.acquire(paths.dataDir);
  if (lock) {
    try {
      refuseNewerFormat(paths.dataDir); // a newer daemon may have stamped it between the look above and the lock
      stampFormat(paths.dataDir);
    } catch (e) {
      lock.release();
      throw e;
    }
    nameOwner(paths);
    // A daemon serves again: `logd stop` is undone.
    fs.rmSync(stopMarker(paths.dataDir), { force: true });
  }
  return lock;
}

/**
 * The lock, waiting while its holder is stopping: a daemon that went idle
 * and is finalising when a client needs one again (the client started this
 * one because the other no longer answers) hands over in milliseconds to
 * seconds; exiting here would leave that client waiting for a daemon that
 * never comes. Null when the holder is not stopping, or still holds the lock
 * after `maxMs`.
 */
export async function acquireLockWhenFree(paths: LogdPaths, maxMs: number): Promise<DataDirLock | null> {
  const until = Date.now() + maxMs;
  for (;;) {
    const lock = acquireLock(paths);
    if (lock) return lock;
    const owner = liveOwner(paths.ownerFile);
    // Starting (or serving): that one is the daemon. Gone between the two looks: try again at once.
    if (owner && !owner.stopping) return null;
    if (Date.now() > until) return null;
    await new Promise((r) => setTimeout(r, owner ? 25 : 5));
  }
}

/** Marks the owner file: this daemon is stopping (acquireLockWhenFree waits for it). */
export function markStopping(paths: LogdPaths, why: string): void {
  try {
    const o = JSON.parse(fs.readFileSync(paths.ownerFile, 'utf8')) as OwnerFile;
    if (o.pid === process.pid) writeOwnerFile(paths.ownerFile, { ...o, stopping: why });
  } catch {
    /* no owner file: nothing to mark */
  }
}

/**
 * Names this process in the data dir's owner file as soon as it holds the lock, before it loads the daemon:
 * a sidecar that lost the start race reads it to wait for this one rather than start another
 * (client/discovery.ts). A runtime dir that cannot be used is left for serve() to report.
 */
export function nameOwner(paths: LogdPaths): void {
  try {
    const rt = privateRuntime(paths, true);
    writeOwnerFile(rt.ownerFile, { pid: process.pid, procStart: procStartTime(process.pid) ?? undefined, runtimeDir: rt.runtimeDir, serviceFile: rt.serviceFile });
  } catch {
    /* serve() meets the same problem and says what it is */
  }
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
