// The shared store's URL on the command line. A command line is public: every
// local user reads it in `ps` and /proc/<pid>/cmdline. So --store and
// --upload take a URL without a password, and refuse one that carries it.
// The password comes from ~/.pgpass (or PGPASSFILE, or PGPASSWORD), or the
// whole URL from LOGD_STORE_URL / LOGD_UPLOAD_URL (the environment is private
// to the user) or from a file of the user's, mode 0600: --store-url-file /
// --upload-url-file.
import fs from 'node:fs';
import { Option } from 'commander';
import { parseStoreUrl } from '../upload/url.js';

export type UrlKind = 'store' | 'upload';
const ENV: Record<UrlKind, string> = { store: 'LOGD_STORE_URL', upload: 'LOGD_UPLOAD_URL' };

/** What the options of one command hold: `--store`/`--store-url-file`, or `--upload`/`--upload-url-file`. */
export interface UrlOptions { store?: string; storeUrlFile?: string; upload?: string; uploadUrlFile?: string }

/** `--<kind> <url>`: `what` says what the command does with the store. */
export function urlOption(kind: UrlKind, what: string, dflt = ENV[kind]): Option {
  return new Option(`--${kind} <url>`, `${what} at this postgres:// URL, without a password (default ${dflt}); the password comes from ~/.pgpass or PGPASSFILE`);
}

/** `--<kind>-url-file <path>`: the URL, password included, from a private file. */
export function urlFileOption(kind: UrlKind): Option {
  return new Option(`--${kind}-url-file <path>`, `like --${kind}, the URL (password included) read from this file of yours, mode 0600`);
}

/**
 * The URL the options name, or undefined when they name none (the command's
 * default applies). Throws an Error that says what is wrong and what to do.
 */
export function urlFromOptions(kind: UrlKind, o: UrlOptions): string | undefined {
  const [url, file] = kind === 'store' ? [o.store, o.storeUrlFile] : [o.upload, o.uploadUrlFile];
  if (url !== undefined && file !== undefined) throw new Error(`give --${kind} or --${kind}-url-file, not both`);
  if (file !== undefined) return readUrlFile(`--${kind}-url-file`, file);
  if (url === undefined) return undefined;
  const parsed = parseStoreUrl(url);
  if (parsed.password) {
    throw new Error(`--${kind} ${parsed.shown}: refusing a URL with a password on the command line, where every local user can read it (ps, /proc/<pid>/cmdline). ` +
      `Give the URL without the password and keep the password in ~/.pgpass (or the file PGPASSFILE names, mode 0600), ` +
      `or pass the whole URL in ${ENV[kind]} or in a file of mode 0600 with --${kind}-url-file PATH. ` +
      'The password was visible while this command ran and may be in your shell history: consider changing it');
  }
  return url;
}

/** urlFromOptions() for a command: a refusal is printed and ends the command with exit code 2 (a usage error). */
export function urlOrExit(kind: UrlKind, o: UrlOptions): string | undefined {
  try {
    return urlFromOptions(kind, o);
  } catch (e) {
    process.stderr.write(`logd: ${(e as Error).message}\n`);
    process.exit(2);
  }
}

/** The URL in `file`: one line in a regular file of the user's that no one else can read. */
export function readUrlFile(flag: string, file: string): string {
  let fd: number;
  try {
    // O_NONBLOCK: a FIFO put there does not hang the command (it is refused below).
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new Error(`${flag} ${file}: ${code === 'ENOENT' ? 'no such file' : code === 'EACCES' ? 'permission denied' : (e as Error).message}; write the store's postgres:// URL into a file of yours and \`chmod 600\` it`);
  }
  try {
    const st = fs.fstatSync(fd);
    const uid = typeof process.getuid === 'function' ? process.getuid() : st.uid;
    if (!st.isFile()) throw new Error(`${flag} ${file} is not a regular file (${st.isDirectory() ? 'a directory' : 'a device, FIFO or socket'}); name a file that holds the URL`);
    if (st.uid !== uid) throw new Error(`${flag} ${file} is owned by uid ${st.uid}, not by you (uid ${uid}): another user could change the store you use; keep the URL in a file of your own, mode 0600`);
    if (st.mode & 0o077) {
      throw new Error(`${flag} ${file} has mode 0${(st.mode & 0o777).toString(8)}: other local users may read the password in it; make it private with \`chmod 600 ${file}\` (and consider changing the password)`);
    }
    const lines = fs.readFileSync(fd, 'utf8').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
    if (lines.length !== 1) throw new Error(`${flag} ${file} must hold one postgres:// URL on one line; it holds ${lines.length} line(s) (besides blank lines and # comments)`);
    try {
      parseStoreUrl(lines[0]);
    } catch (e) {
      throw new Error(`${flag} ${file}: ${(e as Error).message}`);
    }
    return lines[0];
  } finally {
    fs.closeSync(fd);
  }
}
