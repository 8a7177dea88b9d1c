// A writer's code and environment (the SetEnvironment call; docs/api.md "Code
// and environment"): what the daemon keeps of it, and how secrets are cut out.
// Clients gather it (Python: logd/environment.py, TypeScript:
// client/environment.ts) and cut secrets first; the daemon checks again.

import { OWN_MEDIA_PREFIX } from './media.js';

/** The most a writer's environment may take, as JSON, without its package list. */
export const ENVIRONMENT_MAX_BYTES = 16 * 1024;
/** The most a SetEnvironment may carry with its package list. */
export const ENVIRONMENT_WITH_PACKAGES_MAX_BYTES = 512 * 1024;
/** The most packages listed (one line each, `name==version`), and the most characters of a line. */
export const PACKAGES_MAX = 5000;
const PACKAGE_LINE_MAX = 200;
/** The text items a run keeps of its owner's environment (logd media RUN --key ...; the dashboard's Info tab). */
export const DIFF_KEY = `${OWN_MEDIA_PREFIX}code.diff`;
export const PACKAGES_KEY = `${OWN_MEDIA_PREFIX}packages`;

const SECRET_ARG = /^(--?[\w.-]*(?:password|passwd|secret|token|api[_-]?key|access[_-]?key|credentials?)[\w.-]*)(=)(.+)$/i;
const SECRET_FLAG = /^--?[\w.-]*(?:password|passwd|secret|token|api[_-]?key|access[_-]?key|credentials?)[\w.-]*$/i;

/** A command line with the values of secret-looking flags (`--token X`, `--api-key=X`) and URL passwords replaced by `***`. */
export function redactArgv(argv: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = redactUrl(String(argv[i]));
    const m = SECRET_ARG.exec(a);
    if (m) out.push(`${m[1]}=***`);
    else if (SECRET_FLAG.test(a) && i + 1 < argv.length) {
      out.push(a, '***');
      i++;
    } else out.push(a);
  }
  return out;
}

/** `scheme://user:password@host` → `scheme://user@host` (a git remote, a store URL). */
export function redactUrl(text: string): string {
  return text.replace(/([a-z][a-z0-9+.-]*:\/\/)([^/@:\s]+):[^/@\s]*@/gi, '$1$2:***@');
}

/**
 * What the daemon keeps: a JSON object of at most ENVIRONMENT_MAX_BYTES without its package list (which may take
 * up to ENVIRONMENT_WITH_PACKAGES_MAX_BYTES), its command line and remote redacted again.
 */
export function checkEnvironment(json: string): Record<string, unknown> {
  const bytes = new TextEncoder().encode(json).length;
  if (bytes > ENVIRONMENT_WITH_PACKAGES_MAX_BYTES) throw new Error(`setEnvironment: the environment is ${bytes} bytes; at most ${ENVIRONMENT_WITH_PACKAGES_MAX_BYTES} with its package list, ${ENVIRONMENT_MAX_BYTES} without`);
  let v: unknown;
  try {
    v = JSON.parse(json);
  } catch (e) {
    throw new Error(`setEnvironment: the environment is not JSON (${(e as Error).message})`);
  }
  if (!v || typeof v !== 'object' || Array.isArray(v)) throw new Error('setEnvironment: the environment must be a JSON object');
  const env = v as Record<string, unknown>;
  if ('packages' in env) {
    const pk = env.packages;
    if (!Array.isArray(pk) || pk.length > PACKAGES_MAX || !pk.every((x) => typeof x === 'string' && x.length > 0 && x.length <= PACKAGE_LINE_MAX && !/[\n\r]/.test(x))) {
      throw new Error(`setEnvironment: packages must be a list of at most ${PACKAGES_MAX} lines (name==version), each 1..${PACKAGE_LINE_MAX} characters`);
    }
    const rest = new TextEncoder().encode(JSON.stringify({ ...env, packages: undefined })).length;
    if (rest > ENVIRONMENT_MAX_BYTES) throw new Error(`setEnvironment: the environment is ${rest} bytes without its package list; at most ${ENVIRONMENT_MAX_BYTES}`);
  } else if (bytes > ENVIRONMENT_MAX_BYTES) throw new Error(`setEnvironment: the environment is ${bytes} bytes; at most ${ENVIRONMENT_MAX_BYTES}`);
  if (Array.isArray(env.command)) env.command = redactArgv(env.command.map(String));
  const git = env.git as Record<string, unknown> | undefined;
  if (git && typeof git === 'object' && typeof git.remote === 'string') git.remote = redactUrl(git.remote);
  return env;
}

/**
 * The long parts of an environment, as the run's text items: the package list (PACKAGES_KEY) and a dirty tree's
 * diff (DIFF_KEY, from the daemon's read of git). What stays says how many packages and how long the diff is.
 */
export function splitEnvironment(env: Record<string, unknown>): { kept: Record<string, unknown>; texts: Array<[string, string]> } {
  const texts: Array<[string, string]> = [];
  const kept: Record<string, unknown> = { ...env };
  if (Array.isArray(env.packages)) {
    // By lower-cased name, code unit by code unit: localeCompare's first call loads the ICU collator, 7-8 ms of a
    // daemon's first run end (bench/RESULTS.md, "A cold Python process").
    const lines = (env.packages as string[]).map((l) => [l.toLowerCase(), l] as const).sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)).map((x) => x[1]);
    delete kept.packages;
    kept.packagesCount = lines.length;
    if (lines.length) texts.push([PACKAGES_KEY, `${lines.join('\n')}\n`]);
  }
  const git = env.git as Record<string, unknown> | null | undefined;
  if (git && typeof git === 'object' && typeof git.diff === 'string') {
    const { diff, ...rest } = git;
    kept.git = rest;
    if ((diff as string).length) texts.push([DIFF_KEY, diff as string]);
  }
  return { kept, texts };
}

/** A writer's environment in a few lines for people (`logd show`, the dashboard's Info tab): code, command, versions. */
export function describeEnvironment(env: Record<string, unknown>): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  const git = env.git as { commit?: string; branch?: string | null; dirty?: boolean | null; changed?: number; remote?: string; unread?: string; diffBytes?: number; diffCut?: boolean } | null | undefined;
  if (git && git.commit) {
    const diff = typeof git.diffBytes === 'number' ? `; its diff ${git.diffBytes} bytes${git.diffCut ? ' (kept: the first 256 KiB)' : ''} in ${DIFF_KEY}` : '';
    const dirty = git.dirty ? `, dirty (${git.changed ?? 'some'} file${git.changed === 1 ? '' : 's'} changed${diff})` : git.dirty === false ? ', clean' : '';
    out.push(['code', `git ${git.commit.slice(0, 12)}${git.branch ? ` on ${git.branch}` : ' (detached)'}${dirty}${git.remote ? ` · ${git.remote}` : ''}`]);
  } else if (git && typeof git.unread === 'string') out.push(['code', `not read: ${git.unread}`]);
  else if ('git' in env) out.push(['code', 'not in a git work tree']);
  if (Array.isArray(env.command)) {
    const line = env.command.map((a) => (/^[\w@%+=:,./-]+$/.test(String(a)) ? String(a) : `'${String(a).replace(/'/g, "'\\''")}'`)).join(' ');
    out.push(['command', line.length > 300 ? `${line.slice(0, 299)}…` : line]);
  }
  const parts: string[] = [];
  if (typeof env.runtime === 'string') parts.push(env.runtime);
  const torch = env.torch as { version?: string; cuda?: string | null; cudnn?: number; nccl?: string; gpus?: number } | undefined;
  if (torch && torch.version) {
    const built = [torch.cuda ? `CUDA ${torch.cuda}` : 'CPU', torch.cudnn ? `cuDNN ${torch.cudnn}` : '', torch.nccl ? `NCCL ${torch.nccl}` : ''].filter(Boolean).join(', ');
    parts.push(`torch ${torch.version} (${built})`);
  }
  if (typeof env.numpy === 'string') parts.push(`numpy ${env.numpy}`);
  if (typeof env.logd === 'string') parts.push(`logd ${env.logd}`);
  if (typeof env.platform === 'string') parts.push(env.platform);
  if (parts.length) out.push(['env', parts.join(', ')]);
  if (typeof env.packagesCount === 'number') out.push(['packages', `${env.packagesCount} installed, listed in ${PACKAGES_KEY} (logd media RUN --key ${PACKAGES_KEY})`]);
  return out;
}
