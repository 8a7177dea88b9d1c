// The password for a store URL that carries none, found as libpq finds it:
// PGPASSWORD, else the first matching line of the file PGPASSFILE names, or
// ~/.pgpass. A line is `hostname:port:database:username:password`; `*`
// matches anything, `\` escapes `:` and `\`, `#` starts a comment. A file
// that other users could read is ignored, with a warning (as libpq does).
//
// node-postgres 8 reads ~/.pgpass by itself but prints a deprecation warning
// when it does, and pg 9 drops it; logd hands pg the password instead.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { StoreUrl } from './url.js';

export interface PgTarget { host?: string | null; port?: number | null; database?: string | null; user?: string | null }

export function pgpassFile(env: NodeJS.ProcessEnv = process.env): string {
  return env.PGPASSFILE || path.join(os.homedir(), '.pgpass');
}

/** A line's fields: the first four split at unescaped colons, the fifth (the password) is the rest. */
function fields(line: string): string[] {
  const out: string[] = [];
  let cur = '';
  for (let i = 0; i < line.length; i++) {
    if (line[i] === '\\' && i + 1 < line.length) cur += line[++i];
    else if (line[i] === ':' && out.length < 4) {
      out.push(cur);
      cur = '';
    } else cur += line[i];
  }
  out.push(cur);
  return out;
}

/** The password `text` (a pgpass file's contents) holds for `t`, or undefined. */
export function passwordFor(text: string, t: PgTarget): string | undefined {
  const host = t.host || 'localhost';
  // A Unix socket connection: its directory, or `localhost`.
  const hosts = host.startsWith('/') ? [host, 'localhost'] : [host];
  const want = [hosts, [String(t.port || 5432)], [t.database || t.user || ''], [t.user || '']];
  for (const raw of text.split('\n')) {
    const line = raw.replace(/\r$/, '');
    if (!line || line.startsWith('#')) continue;
    const f = fields(line);
    if (f.length === 5 && want.every((w, i) => f[i] === '*' || w.includes(f[i]))) return f[4];
  }
  return undefined;
}

const warned = new Set<string>();
const warnOnce = (file: string, why: string) => {
  if (warned.has(file)) return;
  warned.add(file);
  process.stderr.write(`logd: ignoring the password file ${file}: ${why}\n`);
};

/** The password for `t` from PGPASSFILE or ~/.pgpass; undefined when none is found (or the file may not be used). */
export function pgpassPassword(t: PgTarget, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const file = pgpassFile(env);
  let st: fs.Stats;
  try {
    st = fs.statSync(file);
  } catch {
    return undefined;
  }
  if (!st.isFile()) return warnOnce(file, 'it is not a regular file'), undefined;
  if (st.mode & 0o077) return warnOnce(file, `it has mode 0${(st.mode & 0o777).toString(8)}, so other users may read it; make it private with \`chmod 600 ${file}\``), undefined;
  try {
    return passwordFor(fs.readFileSync(file, 'utf8'), t);
  } catch (e) {
    return warnOnce(file, (e as Error).message), undefined;
  }
}

let installed = false;

/**
 * The pg options for `url`. A URL without a password takes PGPASSWORD (pg
 * reads it), else the pgpass file: pg asks for it through its `password`
 * default, which it uses only when neither the URL nor PGPASSWORD has one.
 */
export function pgOptions<T extends object>(url: StoreUrl, extra: T): T & { connectionString: string } {
  if (!installed) {
    installed = true;
    (pg.defaults as { password?: unknown }).password = (t: PgTarget) => pgpassPassword(t);
  }
  return { ...extra, connectionString: url.raw };
}

/** The advice when a store asked for a password and none was given. */
export const NO_PASSWORD = 'no password was given: put it in ~/.pgpass (or the file PGPASSFILE names, mode 0600) or PGPASSWORD, or give the whole URL through the environment (LOGD_UPLOAD_URL, LOGD_STORE_URL) or a file of mode 0600 (--upload-url-file, --store-url-file)';

/** True when pg failed because the server wants a password and none was found. */
export function lacksPassword(e: unknown): boolean {
  return /client password must be a string|password authentication failed.*no password|no password supplied/i.test((e as Error)?.message ?? '');
}
