// The code and environment a trainer runs (docs/api.md "Code and environment"):
// the command line (secrets cut out), the working directory, the interpreter
// and logd's version. Gathered after init(), off the training path, and sent
// once with SetEnvironment. The git facts of the working directory (commit,
// branch, dirty flag, remote) are read by the daemon (daemon/code), once per
// directory for every run started there within a few seconds: the trainer
// runs no git and loads no child_process. Off with init({ saveCode: false })
// or LOGD_SAVE_CODE=0.
//
// The daemon also reads, from the working directory, a dirty tree's diff and
// the installed versions of the nearest package.json's dependencies, which the
// run keeps as its `logd/code.diff` and `logd/packages` text items;
// LOGD_SAVE_DIFF=0 and LOGD_SAVE_PACKAGES=0 ask it not to.
import os from 'node:os';
import { LOGD_VERSION } from '../src/config.js';
import { redactArgv } from '../src/environment.js';

/** Gathered once per process and working directory: a process that makes 500 runs gathers twice at most. */
const gathered = new Map<string, Record<string, unknown>>();

export function gatherEnvironment(): Record<string, unknown> {
  const cwd = process.cwd();
  let got = gathered.get(cwd);
  if (!got) gathered.set(cwd, (got = gather(cwd)));
  return got;
}

function gather(cwd: string): Record<string, unknown> {
  return {
    command: redactArgv(process.argv).map((a) => (a.length > 500 ? `${a.slice(0, 499)}…` : a)).slice(0, 100),
    cwd,
    runtime: `node ${process.versions.node}`,
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    logd: LOGD_VERSION,
    client: 'typescript',
    ...(process.env.LOGD_SAVE_DIFF === '0' ? { saveDiff: false } : {}),
    ...(process.env.LOGD_SAVE_PACKAGES === '0' ? { savePackages: false } : {}),
  };
}
