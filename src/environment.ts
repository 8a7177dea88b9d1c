// A writer's code and environment (the SetEnvironment call; docs/api.md "Code
// and environment"): what the daemon keeps of it, and how secrets are cut out.
// Clients gather it (Python: logd/environment.py, TypeScript:
// client/environment.ts) and cut secrets first; the daemon checks again.

/** The most a writer's environment may take, as JSON. */
export const ENVIRONMENT_MAX_BYTES = 16 * 1024;

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

/** What the daemon keeps: a JSON object of at most ENVIRONMENT_MAX_BYTES, its command line and remote redacted again. */
export function checkEnvironment(json: string): Record<string, unknown> {
  const bytes = new TextEncoder().encode(json).length;
  if (bytes > ENVIRONMENT_MAX_BYTES) throw new Error(`setEnvironment: the environment is ${bytes} bytes; at most ${ENVIRONMENT_MAX_BYTES}`);
  let v: unknown;
  try {
    v = JSON.parse(json);
  } catch (e) {
    throw new Error(`setEnvironment: the environment is not JSON (${(e as Error).message})`);
  }
  if (!v || typeof v !== 'object' || Array.isArray(v)) throw new Error('setEnvironment: the environment must be a JSON object');
  const env = v as Record<string, unknown>;
  if (Array.isArray(env.command)) env.command = redactArgv(env.command.map(String));
  const git = env.git as Record<string, unknown> | undefined;
  if (git && typeof git === 'object' && typeof git.remote === 'string') git.remote = redactUrl(git.remote);
  return env;
}

/** A writer's environment in a few lines for people (`logd show`, the dashboard's Info tab): code, command, versions. */
export function describeEnvironment(env: Record<string, unknown>): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  const git = env.git as { commit?: string; branch?: string | null; dirty?: boolean | null; changed?: number; remote?: string; unread?: string } | null | undefined;
  if (git && git.commit) {
    const dirty = git.dirty ? `, dirty (${git.changed ?? 'some'} file${git.changed === 1 ? '' : 's'} changed)` : git.dirty === false ? ', clean' : '';
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
  return out;
}
