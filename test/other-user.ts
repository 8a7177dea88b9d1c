// A second local user for the security tests, and a way to run a process as
// that user (setpriv). Created with useradd when the tests run as root.
import fs from 'node:fs';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { execa } from 'execa';

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

/** A process started as `u` (setpriv); its stdout and stderr are collected. Kill what `track` holds in teardown. */
export function spawnAs(u: OtherUser, args: string[], env: NodeJS.ProcessEnv, track: ChildProcess[]): ChildProcess & { out: () => string } {
  const p = spawn('setpriv', [...asUser(u), ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] }) as ChildProcess & { out: () => string };
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
