// Trust in the runtime directory, shared by the daemon (which creates it) and
// the client (which reads the service file and connects to the socket in it).
//
// Whoever can write a directory decides what its service file says and which
// process listens on its socket. A runtime dir is therefore trusted only if it
// is a real directory (not a symlink), owned by the user, with mode 0700, and
// if no other user can rename or replace it: every directory above it is owned
// by the user or root and is not writable by others unless sticky (like /tmp).
// Without this, another local user who pre-creates /tmp/logd-<uid>/… receives
// the user's runs.
import fs from 'node:fs';
import path from 'node:path';

export class UntrustedDirError extends Error {
  override name = 'UntrustedDirError';
  /** `dir`: the directory refused; `reason`: why, in words (the message says it too, with what to do). */
  constructor(message: string, readonly dir = '', readonly reason = '') {
    super(message);
  }
}

const myUid = (): number => (typeof process.getuid === 'function' ? process.getuid() : 0);
const octal = (mode: number) => `0${(mode & 0o7777).toString(8)}`;

/** Why `dir` itself is not private to the user, or null when it is. Throws ENOENT through. */
function leafProblem(dir: string, uid: number): string | null {
  const st = fs.lstatSync(dir);
  if (st.isSymbolicLink()) return `${dir} is a symbolic link`;
  if (!st.isDirectory()) return `${dir} is not a directory`;
  if (st.uid !== uid) return `${dir} is owned by uid ${st.uid}, not by you (uid ${uid})`;
  if ((st.mode & 0o777) !== 0o700) return `${dir} has mode ${octal(st.mode)}, not 0700`;
  return null;
}

/** Why another user could rename or replace something inside `dir`'s ancestors, or null. */
function ancestorProblem(dir: string, uid: number): string | null {
  for (let d = path.dirname(dir); ; d = path.dirname(d)) {
    const st = fs.statSync(d);
    if (st.uid !== uid && st.uid !== 0) return `${d} (above ${dir}) is owned by uid ${st.uid}, not by you or root`;
    const sticky = (st.mode & 0o1000) !== 0;
    if ((st.mode & 0o002) !== 0 && !sticky) return `${d} (above ${dir}) is writable by every user and not sticky (mode ${octal(st.mode)})`;
    if (d === path.dirname(d)) return null;
  }
}

/**
 * Why `dir` cannot be trusted as a private directory of this user, or null
 * when it can. A missing directory is no problem here (nothing to trust yet).
 */
export function untrustedDirReason(dir: string, uid = myUid()): string | null {
  try {
    return leafProblem(dir, uid) ?? ancestorProblem(dir, uid);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    return `${dir} cannot be checked: ${(e as Error).message}`;
  }
}

/** The message for a directory the user cannot trust: what is wrong, what it means, what to do. */
export function untrustedDirMessage(what: string, reason: string): string {
  return `logd: refusing ${what}: ${reason}. Another local user may have created or changed it to receive or block your logging; nothing was sent. ` +
    'Set XDG_RUNTIME_DIR (or LOGD_RUNTIME_DIR) to a directory only you can write, or remove the offending directory (it may take an administrator).';
}

/** A directory of the user's that nobody else could write is made 0700: its contents can only be the user's. */
function tightenOwn(d: string, uid: number): void {
  try {
    const st = fs.lstatSync(d);
    if (st.isDirectory() && st.uid === uid && (st.mode & 0o077) !== 0 && (st.mode & 0o022) === 0) fs.chmodSync(d, 0o700);
  } catch {
    /* missing: nothing to tighten */
  }
}

/**
 * Makes `dir` exist as a private directory (mode 0700, owned by the user)
 * and checks it, or throws UntrustedDirError saying why it cannot be trusted.
 * `parent`: the per-user directory above a default runtime dir, made private the same way.
 */
export function ensurePrivateDir(dir: string, parent: string | null = null): void {
  const uid = myUid();
  const make = (d: string) => {
    try {
      fs.mkdirSync(d, { mode: 0o700 });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    tightenOwn(d, uid);
    const why = untrustedDirReason(d, uid);
    if (why) throw new UntrustedDirError(untrustedDirMessage(`to use ${d} as the runtime dir`, why), d, why);
  };
  if (parent) {
    fs.mkdirSync(path.dirname(parent), { recursive: true, mode: 0o700 });
    make(parent);
  } else {
    fs.mkdirSync(path.dirname(dir), { recursive: true, mode: 0o700 });
  }
  make(dir);
}

/** Throws UntrustedDirError when an existing `dir` (or its default per-user `parent`) is not private. */
export function trustedRuntimeDir(dir: string, parent: string | null = null): void {
  for (const d of parent ? [parent, dir] : [dir]) {
    tightenOwn(d, myUid());
    const why = untrustedDirReason(d);
    if (why) throw new UntrustedDirError(untrustedDirMessage(`to use ${d} as the runtime dir`, why), d, why);
  }
}
