// A second local user for the security tests, and a way to run a process as
// that user (setpriv). Created with useradd when the tests run as root.
//
// The checkout may be closed to that user (cloned into a 0700 dir, or under
// /root), so what it runs is staged first: stageFor() copies the built daemon
// (dist/, package.json, proto/ and the runtime node_modules) into a temp dir
// every user can read, and the other user's processes run from there.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { execa } from 'execa';
import { ROOT } from './helpers.js';

export const OTHER = 'logd-other';

export interface OtherUser { uid: number; gid: number }

/** A second local user, created when we are root; the reason as a string when that cannot be done here. */
export async function otherUser(): Promise<OtherUser | string> {
  if (process.getuid?.() !== 0) return 'not root: cannot create or become another user';
  for (const tool of ['useradd', 'setpriv']) {
    if ((await execa('sh', ['-c', `command -v ${tool}`], { reject: false })).exitCode !== 0) return `${tool} is missing`;
  }
  if ((await execa('id', ['-u', OTHER], { reject: false })).exitCode !== 0) {
    const r = await execa('useradd', ['--no-create-home', '--shell', '/usr/sbin/nologin', OTHER], { reject: false });
    // Two test files may race to create the user; the loser finds it there.
    if (r.exitCode !== 0 && (await execa('id', ['-u', OTHER], { reject: false })).exitCode !== 0) return `useradd failed: ${r.stderr}`;
  }
  const uid = Number((await execa('id', ['-u', OTHER])).stdout);
  const gid = Number((await execa('id', ['-g', OTHER])).stdout);
  return { uid, gid };
}

/** setpriv's arguments that make the rest of the command line run as `u`, with no supplementary groups. */
export function asUser(u: OtherUser): string[] {
  return [`--reuid=${u.uid}`, `--regid=${u.gid}`, '--clear-groups'];
}

/** A process started as `u` (setpriv), in the staged tree; its stdout and stderr are collected. Kill what `track` holds in teardown. */
export function spawnAs(u: OtherUser, args: string[], env: NodeJS.ProcessEnv, track: ChildProcess[]): ChildProcess & { out: () => string } {
  const p = spawn('setpriv', [...asUser(u), ...args], { env, cwd: stageFor(u).root, stdio: ['ignore', 'pipe', 'pipe'] }) as ChildProcess & { out: () => string };
  let out = '';
  p.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  p.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  p.out = () => out;
  track.push(p);
  return p;
}

/** A private home dir for `u` under `dir` (0700, owned by u). */
export function homeFor(u: OtherUser, dir: string): string {
  const home = path.join(dir, 'attacker');
  fs.mkdirSync(home, { mode: 0o700 });
  fs.chownSync(home, u.uid, u.gid);
  return home;
}

/** The package's runtime dependencies, hoisted ones under node_modules/ (nested ones come along with their parent). */
function runtimePackages(): string[] {
  const found = new Set<string>();
  const visit = (dir: string) => {
    const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as { dependencies?: object; optionalDependencies?: object };
    for (const dep of Object.keys({ ...pkg.dependencies, ...pkg.optionalDependencies })) {
      if (dir !== ROOT && fs.existsSync(path.join(dir, 'node_modules', dep, 'package.json'))) visit(path.join(dir, 'node_modules', dep));
      else if (!found.has(dep) && fs.existsSync(path.join(ROOT, 'node_modules', dep, 'package.json'))) {
        found.add(dep);
        visit(path.join(ROOT, 'node_modules', dep));
      }
    }
  };
  visit(ROOT);
  return [...found];
}

/** Readable (and, where the owner may execute, executable) by every user: a checkout made under umask 077 is not. */
function openToAll(p: string): void {
  const st = fs.lstatSync(p);
  if (st.isSymbolicLink()) return;
  if (st.isDirectory()) {
    fs.chmodSync(p, 0o755);
    for (const e of fs.readdirSync(p)) openToAll(path.join(p, e));
  } else fs.chmodSync(p, (st.mode & 0o7777) | 0o444 | (st.mode & 0o100 ? 0o111 : 0));
}

/** What the other user runs: `node` (this Node, or a copy of it when u cannot run it where it is) and `cli`, this checkout's `logd`. */
export interface Stage { root: string; node: string; cli: string }
let stage: Stage | null = null;

const runsAs = (u: OtherUser, cwd: string, argv: string[]) =>
  spawnSync('setpriv', [...asUser(u), ...argv], { cwd, encoding: 'utf8', timeout: 60_000 });

/**
 * This checkout's built daemon, copied into a temp dir that `u` can read
 * (made once per test file; unstage() removes it).
 */
export function stageFor(u: OtherUser): Stage {
  if (stage) return stage;
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'logd-stage-'));
  try {
    const copy = (rel: string) => fs.cpSync(path.join(ROOT, rel), path.join(root, rel), { recursive: true });
    for (const rel of ['package.json', 'dist', 'proto']) copy(rel);
    for (const name of runtimePackages()) copy(path.join('node_modules', name));
    let node = process.execPath;
    if (runsAs(u, root, [node, '--version']).status !== 0) {
      // Node itself lives where u cannot reach (e.g. under /root/.nvm).
      node = path.join(root, 'bin', 'node');
      fs.mkdirSync(path.dirname(node));
      fs.copyFileSync(process.execPath, node);
    }
    openToAll(root);
    const cli = path.join(root, 'dist', 'daemon', 'cli.js');
    // Proof: u loads the CLI and the daemon proper from the stage (a missing module is named here).
    const daemon = path.join(root, 'dist', 'daemon', 'daemon.js');
    for (const args of [[cli, '--version'], ['--input-type=module', '-e', `await import(${JSON.stringify(daemon)})`]]) {
      const probe = runsAs(u, root, [node, ...args]);
      if (probe.status !== 0) throw new Error(`the daemon staged in ${root} does not load as uid ${u.uid}: ${probe.stderr || probe.error}`);
    }
    stage = { root, node, cli };
    return stage;
  } catch (e) {
    fs.rmSync(root, { recursive: true, force: true });
    throw e;
  }
}

/** Removes what stageFor() made (for afterAll). */
export function unstage(): void {
  if (stage) fs.rmSync(stage.root, { recursive: true, force: true });
  stage = null;
}
