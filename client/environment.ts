// The code and environment a trainer runs (docs/api.md "Code and environment"):
// the command line (secrets cut out), the working directory, the interpreter
// and logd's version. Gathered after init(), off the training path, and sent
// once with SetEnvironment. The git facts of the working directory (commit,
// branch, dirty flag, remote) are read by the daemon (daemon/code), once per
// directory for every run started there within a few seconds: the trainer
// runs no git and loads no child_process. Off with init({ saveCode: false })
// or LOGD_SAVE_CODE=0.
//
// With it: the installed versions of the program's own dependencies (the
// nearest package.json's, read from node_modules; LOGD_SAVE_PACKAGES=0 leaves
// them out), which the run keeps as its `logd/packages` text item; and
// LOGD_SAVE_DIFF=0 asks the daemon not to keep a dirty tree's diff.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
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
  const packages = process.env.LOGD_SAVE_PACKAGES === '0' ? null : dependencies(cwd);
  return {
    command: redactArgv(process.argv).map((a) => (a.length > 500 ? `${a.slice(0, 499)}…` : a)).slice(0, 100),
    cwd,
    runtime: `node ${process.versions.node}`,
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    logd: LOGD_VERSION,
    client: 'typescript',
    ...(packages ? { packages } : {}),
    ...(process.env.LOGD_SAVE_DIFF === '0' ? { saveDiff: false } : {}),
  };
}

/** The most dependencies listed: a package.json with more is a workspace root, not a trainer. */
const MAX_DEPENDENCIES = 300;

/**
 * `name==version` of each dependency of the nearest package.json (from the working directory up), as installed
 * (its node_modules/NAME/package.json, looked up the way Node resolves it); `name==?` where it is not installed.
 * Null when there is no package.json. About a millisecond for 50 dependencies, once per process.
 */
function dependencies(cwd: string): string[] | null {
  let dir = cwd;
  for (let i = 0; i < 32; i++) {
    let pkg: { dependencies?: Record<string, string>; devDependencies?: Record<string, string> } | null = null;
    try {
      pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
    } catch {
      pkg = null;
    }
    if (pkg && typeof pkg === 'object') {
      const names = [...Object.keys(pkg.dependencies ?? {}), ...Object.keys(pkg.devDependencies ?? {})].slice(0, MAX_DEPENDENCIES);
      return names.map((n) => `${n}==${installedVersion(dir, n) ?? '?'}`.slice(0, 200));
    }
    const up = path.dirname(dir);
    if (up === dir) break;
    dir = up;
  }
  return null;
}

function installedVersion(from: string, name: string): string | null {
  if (!/^(@[\w.-]+\/)?[\w.-]+$/.test(name)) return null;
  for (let dir = from, i = 0; i < 32; i++) {
    try {
      const v = (JSON.parse(fs.readFileSync(path.join(dir, 'node_modules', name, 'package.json'), 'utf8')) as { version?: unknown }).version;
      return typeof v === 'string' ? v : null;
    } catch {
      /* not here: the parent's node_modules */
    }
    const up = path.dirname(dir);
    if (up === dir) break;
    dir = up;
  }
  return null;
}
