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
  if (Buffer.byteLength(json) > ENVIRONMENT_MAX_BYTES) throw new Error(`setEnvironment: the environment is ${Buffer.byteLength(json)} bytes; at most ${ENVIRONMENT_MAX_BYTES}`);
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
