// The code and environment a trainer runs (docs/api.md "Code and environment"):
// the git commit, branch, dirty flag and remote of the working directory, the
// command line (secrets cut out), the interpreter and logd's version. Gathered
// after init(), off the training path (git runs as child processes that do
// not block the event loop), and sent once with SetEnvironment. Off with
// init({ saveCode: false }) or LOGD_SAVE_CODE=0.
import os from 'node:os';
import { createRequire } from 'node:module';
import { LOGD_VERSION } from '../src/config.js';
import { redactArgv, redactUrl } from '../src/environment.js';

const GIT_MS = 2000;

function git(args: string[], cwd: string): Promise<string | null> {
  // node:child_process loads only here, after init returned.
  const { execFile } = createRequire(import.meta.url)('node:child_process') as typeof import('node:child_process');
  return new Promise((resolve) => {
    execFile('git', args, { cwd, timeout: GIT_MS, maxBuffer: 1 << 20, windowsHide: true, env: { ...process.env, GIT_OPTIONAL_LOCKS: '0', GIT_TERMINAL_PROMPT: '0' } }, (err, stdout) => resolve(err ? null : stdout.trim()));
  });
}

/** The git facts of `cwd`, or null outside a work tree (or without git). */
export async function gitFacts(cwd: string): Promise<Record<string, unknown> | null> {
  const commit = await git(['rev-parse', 'HEAD'], cwd);
  if (!commit) return null;
  const [branch, status, remote, root] = await Promise.all([
    git(['rev-parse', '--abbrev-ref', 'HEAD'], cwd),
    git(['status', '--porcelain', '--untracked-files=no'], cwd),
    git(['config', '--get', 'remote.origin.url'], cwd),
    git(['rev-parse', '--show-toplevel'], cwd),
  ]);
  return {
    commit, branch: branch && branch !== 'HEAD' ? branch : null, dirty: status === null ? null : status.length > 0,
    ...(status ? { changed: status.split('\n').length } : {}),
    ...(remote ? { remote: redactUrl(remote) } : {}), ...(root ? { root } : {}),
  };
}

/** Gathered once per process and working directory: a process that makes 500 runs runs git 4 times, not 2 000. */
const gathered = new Map<string, Promise<Record<string, unknown>>>();

export function gatherEnvironment(): Promise<Record<string, unknown>> {
  const cwd = process.cwd();
  let got = gathered.get(cwd);
  if (!got) gathered.set(cwd, (got = gather(cwd)));
  return got;
}

async function gather(cwd: string): Promise<Record<string, unknown>> {
  return {
    git: await gitFacts(cwd),
    command: redactArgv(process.argv).map((a) => (a.length > 500 ? `${a.slice(0, 499)}…` : a)).slice(0, 100),
    cwd,
    runtime: `node ${process.versions.node}`,
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    logd: LOGD_VERSION,
    client: 'typescript',
  };
}
