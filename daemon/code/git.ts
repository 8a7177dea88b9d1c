// The git facts of a trainer's working directory, read by the daemon (docs/api.md "Code and environment"): the
// commit, branch, dirty flag (and how many tracked files changed), the origin remote and the work tree's root,
// and of a dirty tree its diff against the commit (tracked files only, cut at DIFF_MAX_BYTES).
//
// Why here and not in the clients: a client that ran git itself paid for it in every short process (git spawned
// 3–5 times, 20–40 ms of a 100-row run's finish waiting for it, and node:child_process or subprocess loaded into
// the trainer). The daemon lives on, so one answer serves every run started in the same directory within
// CACHE_MS: a sweep of 500 runs, or a test suite of short processes, runs git once.
//
// Whose directory: only one owned by the daemon's own user is read (as git's own safe.directory rule would
// insist); git runs with fsmonitor off, no optional locks and no prompt, each call within GIT_MS, at most
// MAX_RUNNING directories at once and MAX_WAITING queued (more are answered "busy" rather than queued for ever).
import fs from 'node:fs';
import path from 'node:path';
import { execFile, spawn } from 'node:child_process';
import { redactUrl } from '../../src/environment.js';

const GIT_MS = 2000;
/** One answer per directory serves the runs started there within this long (a file edited meanwhile shows at the next read). */
export const CACHE_MS = 5000;
const MAX_RUNNING = 2;
const MAX_WAITING = 64;
const MAX_CACHED = 256;
/** The most of a dirty tree's diff kept (cut at a line's end); its whole size is said beside it. */
export const DIFF_MAX_BYTES = 256 * 1024;

export interface GitFacts {
  commit?: string;
  branch?: string | null;
  dirty?: boolean | null;
  changed?: number;
  remote?: string;
  root?: string;
  /** Why the directory was not read (another user's, gone, the daemon busy); absent when it was. */
  unread?: string;
  /** A dirty tree's `git diff HEAD` (tracked files, no binary contents), at most DIFF_MAX_BYTES; the run keeps it as a text item (daemon/runs/run.ts). */
  diff?: string;
  /** The diff's whole size in bytes, and whether `diff` is cut. */
  diffBytes?: number;
  diffCut?: boolean;
}

/**
 * `git diff HEAD` of a work tree, at most `cap` bytes (cut after the last whole line), with its whole size; null
 * when git fails. No external diff drivers or text conversions run (a repository's config names programs).
 */
export function gitDiff(cwd: string, cap = DIFF_MAX_BYTES): Promise<{ diff: string; bytes: number; cut: boolean } | null> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let kept = 0;
    let bytes = 0;
    const p = spawn('git', [...GIT_CONFIG, '-c', 'core.quotepath=off', 'diff', 'HEAD', '--no-color', '--no-ext-diff', '--no-textconv'], {
      cwd, stdio: ['ignore', 'pipe', 'ignore'], windowsHide: true, env: gitEnv(),
    });
    const timer = setTimeout(() => p.kill('SIGKILL'), GIT_MS);
    p.stdout.on('data', (d: Buffer) => {
      bytes += d.byteLength;
      if (kept < cap + 1) {
        chunks.push(d);
        kept += d.byteLength;
      }
    });
    p.on('error', () => {
      clearTimeout(timer);
      resolve(null);
    });
    p.on('close', (code) => {
      clearTimeout(timer);
      if (code !== 0) return resolve(null);
      let out = Buffer.concat(chunks);
      const cut = bytes > cap;
      if (cut) {
        out = out.subarray(0, cap);
        const nl = out.lastIndexOf(0x0a);
        out = out.subarray(0, nl + 1);
      }
      resolve({ diff: out.toString('utf8'), bytes, cut });
    });
  });
}

/** How every git here runs: no fsmonitor, no optional locks, no prompt, no pager, C locale. */
const GIT_CONFIG = ['-c', 'core.fsmonitor=false'];
const gitEnv = (): NodeJS.ProcessEnv => ({ ...process.env, GIT_OPTIONAL_LOCKS: '0', GIT_TERMINAL_PROMPT: '0', GIT_PAGER: 'cat', LC_ALL: 'C' });

function git(args: string[], cwd: string): Promise<string | null> {
  return new Promise((resolve) => {
    execFile('git', [...GIT_CONFIG, ...args], { cwd, timeout: GIT_MS, maxBuffer: 4 << 20, windowsHide: true, env: gitEnv() }, (err, stdout) => resolve(err ? null : stdout));
  });
}

/** `git status --porcelain=v2 --branch` read: its head and oid lines, and how many entries (changed tracked files). */
export function parseStatus(out: string): { commit: string | null; branch: string | null; changed: number } {
  let commit: string | null = null;
  let branch: string | null = null;
  let changed = 0;
  for (const line of out.split('\n')) {
    if (line.startsWith('# branch.oid ')) {
      const oid = line.slice(13).trim();
      commit = /^[0-9a-f]{7,64}$/.test(oid) ? oid : null; // "(initial)": no commit yet
    } else if (line.startsWith('# branch.head ')) {
      const head = line.slice(14).trim();
      branch = head === '(detached)' ? null : head;
    } else if (line && !line.startsWith('#')) changed++;
  }
  return { commit, branch, changed };
}

async function read(cwd: string, withDiff: boolean): Promise<GitFacts | null> {
  let st: fs.Stats;
  try {
    st = await fs.promises.stat(cwd);
  } catch (e) {
    return { unread: `the directory cannot be read by the daemon (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})` };
  }
  if (!st.isDirectory()) return { unread: 'not a directory' };
  const uid = process.getuid?.();
  if (uid !== undefined && st.uid !== uid) return { unread: `the directory belongs to uid ${st.uid}, not the daemon's user (${uid})` };
  const status = await git(['status', '--porcelain=v2', '--branch', '--untracked-files=no'], cwd);
  if (status === null) return null; // not a work tree (or no git): "not in a git work tree"
  const s = parseStatus(status);
  if (!s.commit) return null; // a repository without a commit yet
  const [remote, root, diff] = await Promise.all([
    git(['config', '--get', 'remote.origin.url'], cwd), git(['rev-parse', '--show-toplevel'], cwd),
    withDiff && s.changed > 0 ? gitDiff(cwd) : Promise.resolve(null),
  ]);
  return {
    commit: s.commit, branch: s.branch, dirty: s.changed > 0, ...(s.changed ? { changed: s.changed } : {}),
    ...(remote?.trim() ? { remote: redactUrl(remote.trim()) } : {}), ...(root?.trim() ? { root: root.trim() } : {}),
    ...(diff && diff.bytes > 0 ? { diff: diff.diff, diffBytes: diff.bytes, diffCut: diff.cut } : {}),
  };
}

/** The daemon's reader of working directories: cached per directory, bounded in what it runs at once. */
export class GitReader {
  private readonly cache = new Map<string, { at: number; facts: Promise<GitFacts | null> }>();
  private running = 0;
  private readonly waiting: Array<() => void> = [];
  /** Directories read so far, each with 1–3 git processes (a cache hit reads nothing). */
  reads = 0;

  constructor(private readonly cacheMs = CACHE_MS) {}

  /** The git facts of `cwd` (an absolute path the client sent), with a dirty tree's diff unless `withDiff` is false; never rejects. */
  facts(cwd: string, withDiff = true): Promise<GitFacts | null> {
    if (typeof cwd !== 'string' || !path.isAbsolute(cwd) || cwd.length > 4096 || cwd.includes('\0')) return Promise.resolve({ unread: 'the working directory is not an absolute path' });
    const dir = path.normalize(cwd);
    const key = `${withDiff ? 'd' : 'n'}:${dir}`;
    const now = Date.now();
    const hit = this.cache.get(key);
    if (hit && now - hit.at < this.cacheMs) return hit.facts;
    if (this.running >= MAX_RUNNING && this.waiting.length >= MAX_WAITING) return Promise.resolve({ unread: 'the daemon was reading too many directories at once' });
    // After a turn of the event loop: spawning git takes the daemon 2-3 ms, which the SetEnvironment that asked
    // (answered at once) would otherwise wait behind.
    const facts = this.slot().then(() => new Promise<void>((r) => setImmediate(r))).then(async () => {
      try {
        this.reads++;
        return await read(dir, withDiff);
      } catch (e) {
        return { unread: (e as Error).message };
      } finally {
        this.running--;
        this.waiting.shift()?.();
      }
    });
    this.cache.set(key, { at: now, facts });
    if (this.cache.size > MAX_CACHED) {
      for (const [k, v] of this.cache) if (now - v.at >= this.cacheMs || this.cache.size > MAX_CACHED) this.cache.delete(k);
    }
    return facts;
  }

  private slot(): Promise<void> {
    if (this.running < MAX_RUNNING) {
      this.running++;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiting.push(() => {
      this.running++;
      resolve();
    }));
  }
}
