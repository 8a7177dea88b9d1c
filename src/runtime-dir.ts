// Which runtime dir to use. The default one, `<tmp>/logd-<uid>/<key>` when
// XDG_RUNTIME_DIR is unset, has a name every local user can predict, so
// another user can create it first (as a directory or a symlink) to receive
// or block this user's logging. Such a dir is never used (src/private-dir.ts);
// the runtime dir then moves to the user's own state dir
// (LogdPaths.runtimeFallback), which no other user can create, and stderr
// says once what was taken and by whom. Every process of the user computes
// the same fallback, so later processes find the daemon there; children get
// it through LOGD_SERVICE. LOGD_RUNTIME_DIR is never replaced: it is used or
// refused.
import fs from 'node:fs';
import path from 'node:path';
import { runtimeFiles, type LogdPaths } from './config.js';
import { ensurePrivateDir, trustedRuntimeDir, UntrustedDirError } from './private-dir.js';

let told = false;

/**
 * `paths` with a runtime dir this user can trust: checked, or made when
 * `create` (a daemon about to serve in it). Throws UntrustedDirError when
 * neither the default dir nor the fallback is private to the user.
 */
export function privateRuntime(paths: LogdPaths, create: boolean): LogdPaths {
  const use = (p: LogdPaths) => (create ? ensurePrivateDir : trustedRuntimeDir)(p.runtimeDir, p.runtimeParent);
  try {
    use(paths);
    return paths;
  } catch (e) {
    if (!(e instanceof UntrustedDirError) || !paths.runtimeFallback) throw e;
    const dir = paths.runtimeFallback;
    const moved: LogdPaths = { ...paths, runtimeDir: dir, runtimeParent: path.dirname(dir), runtimeFallback: null, ...runtimeFiles(dir) };
    use(moved);
    if (!told) process.stderr.write(`${takenLine(e, dir)}\n`);
    told = true;
    return moved;
  }
}

/** The one line that says which dir was taken, by whom, and where logd goes instead. */
function takenLine(e: UntrustedDirError, instead: string): string {
  const by = owner(e.dir);
  const what = by ? `another local user, ${by}, made it (${e.reason})` : e.reason;
  return `logd: not using ${e.dir} as the runtime dir: ${what}. It may be there to receive or block your logging; nothing was sent to it. ` +
    `Using ${instead} instead, which only you can create. To choose the place yourself, set XDG_RUNTIME_DIR or LOGD_RUNTIME_DIR to a directory only you can write.`;
}

/** `uid N (name)` of whoever owns `p` when that is not this user; '' otherwise. */
function owner(p: string): string {
  let uid: number;
  try {
    uid = fs.lstatSync(p).uid;
  } catch {
    return '';
  }
  if (uid === (typeof process.getuid === 'function' ? process.getuid() : uid)) return '';
  let name = '';
  try {
    name = fs.readFileSync('/etc/passwd', 'utf8').split('\n').map((l) => l.split(':')).find((f) => f[2] === String(uid))?.[0] ?? '';
  } catch {
    /* no name: the uid says it */
  }
  return name ? `uid ${uid} (${name})` : `uid ${uid}`;
}
