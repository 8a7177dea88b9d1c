// Asking a stalled process what it is doing. At init() a client on this node
// (opt-out: LOGD_STACKS=0) registers a stack dump on a signal and leaves a
// small file in `<data dir>/stacks/`, `<pid>.<start ticks>.stacks`, whose first
// line says so: `logd-stacks 1 pid=<pid> start=<ticks> signal=SIGUSR2 kind=python`.
// Python's faulthandler appends every thread's stack to that file; Node writes
// its diagnostic report next to it (`…stacks.json`). No file: never signalled.
//
// The daemon signals only a process that is, right now, the one the file
// names: same pid, same start time (a reused pid has another), same user as
// the daemon, and only with SIGUSR1 or SIGUSR2, whatever the file says.
import fs from 'node:fs';
import path from 'node:path';
import { readPidStat } from '../sampler/proc.js';

export const STACKS_SUFFIX = '.stacks';
const ALLOWED_SIGNALS = new Set(['SIGUSR1', 'SIGUSR2']);
/** What a stack keeps (the event carries it to the index, the shared store and the CLI). */
const KEEP_BYTES = 4096;
const READ_MAX = 256 * 1024;

export function stacksFileName(pid: number, startTicks: number): string {
  return `${pid}.${startTicks}${STACKS_SUFFIX}`;
}

interface Registration {
  pid: number;
  start: number;
  signal: NodeJS.Signals;
  kind: 'python' | 'node';
}

function readHeader(file: string): Registration | string {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(file);
  } catch {
    return 'no stack registration (the client opted out, or is not on this node)';
  }
  if (!st.isFile()) return `${file} is not a regular file`;
  if (typeof process.getuid === 'function' && st.uid !== process.getuid()) return `${file} belongs to uid ${st.uid}, not to the daemon's user`;
  const fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
  try {
    const buf = Buffer.alloc(256);
    const n = fs.readSync(fd, buf, 0, buf.length, 0);
    const line = buf.subarray(0, n).toString('utf8').split('\n')[0];
    const m = /^logd-stacks 1 pid=(\d+) start=(\d+) signal=(SIG[A-Z0-9]+) kind=(python|node)$/.exec(line);
    if (!m) return `${file} does not start with a logd-stacks header`;
    if (!ALLOWED_SIGNALS.has(m[3])) return `${file} asks for ${m[3]}; logd only sends SIGUSR1 or SIGUSR2`;
    return { pid: Number(m[1]), start: Number(m[2]), signal: m[3] as NodeJS.Signals, kind: m[4] as 'python' | 'node' };
  } finally {
    fs.closeSync(fd);
  }
}

function ownedByUs(pid: number): boolean {
  try {
    return typeof process.getuid !== 'function' || fs.statSync(`/proc/${pid}`).uid === process.getuid();
  } catch {
    return false;
  }
}

function sizeOf(file: string): number {
  try {
    return fs.statSync(file).size;
  } catch {
    return -1;
  }
}

function mtimeOf(file: string): number {
  try {
    return fs.statSync(file).mtimeMs;
  } catch {
    return -1;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export type StackAnswer = { text: string; inCollective: boolean; top: string } | { problem: string };

/**
 * The stacks of process `pid` (started at `startTicks`), asked through the
 * registration it left in `dir`. Resolves within `timeoutMs`.
 */
export async function requestStack(dir: string, pid: number, startTicks: number, timeoutMs = 2000): Promise<StackAnswer> {
  const file = path.join(dir, stacksFileName(pid, startTicks));
  const reg = readHeader(file);
  if (typeof reg === 'string') return { problem: reg };
  if (reg.pid !== pid || reg.start !== startTicks) return { problem: `${file} names pid ${reg.pid} started at ${reg.start}, not ${pid} at ${startTicks}` };
  const now = readPidStat(pid);
  if (!now || now.startTicks !== startTicks) return { problem: `pid ${pid} is no longer the process that registered (it ended, or the pid was reused)` };
  if (!ownedByUs(pid)) return { problem: `pid ${pid} belongs to another user; not signalled` };
  const report = `${file}.json`;
  const before = reg.kind === 'python' ? sizeOf(file) : mtimeOf(report);
  try {
    process.kill(pid, reg.signal);
  } catch (e) {
    return { problem: `could not signal pid ${pid}: ${(e as Error).message}` };
  }
  const deadline = Date.now() + timeoutMs;
  if (reg.kind === 'python') {
    // faulthandler writes all at once, from the signal handler: wait until the size moves and settles.
    let last = before;
    while (Date.now() < deadline) {
      await sleep(50);
      const s = sizeOf(file);
      if (s > before && s === last) break;
      last = s;
    }
    const end = sizeOf(file);
    if (end <= before) return { problem: `pid ${pid} did not dump its stacks within ${timeoutMs} ms` };
    const text = readRange(file, Math.max(before, end - READ_MAX), end);
    return { text: cut(text), ...classifyPython(text) };
  }
  while (Date.now() < deadline) {
    await sleep(50);
    if (mtimeOf(report) !== before) {
      try {
        const j = JSON.parse(fs.readFileSync(report, 'utf8')) as { javascriptStack?: { message?: string; stack?: string[] } };
        const lines = (j.javascriptStack?.stack ?? []).map((l) => l.trim());
        const text = [j.javascriptStack?.message ?? '', ...lines].join('\n');
        return { text: cut(text), ...classifyLines(lines) };
      } catch {
        /* still being written */
      }
    }
  }
  return { problem: `pid ${pid} did not write its report within ${timeoutMs} ms (a Node process busy in native code answers when it returns to JavaScript)` };
}

function readRange(file: string, from: number, to: number): string {
  const fd = fs.openSync(file, 'r');
  try {
    const buf = Buffer.alloc(to - from);
    const n = fs.readSync(fd, buf, 0, buf.length, from);
    return buf.subarray(0, n).toString('utf8');
  } finally {
    fs.closeSync(fd);
  }
}

function cut(text: string): string {
  return text.length > KEEP_BYTES ? `${text.slice(0, KEEP_BYTES)}\n… (${text.length - KEEP_BYTES} more bytes)` : text;
}

/** Frames that mean "waiting in a collective": torch.distributed, DDP, a backward whose all-reduce is pending, named collectives. */
const COLLECTIVE = /torch\/distributed\/|torch\/nn\/parallel\/distributed\.py|torch\/autograd\/|\b(all_?reduce|allReduce|barrier|broadcast|all_?gather|allGather|reduce_?scatter|reduceScatter|all_to_all)\b/i;

/**
 * A faulthandler dump: blocks of `Thread 0x… (most recent call first):` then
 * `  File "…", line N in f`. The main thread's block is the one that ends in
 * `<module>` (else the first). It is in a collective when one of its frames is.
 */
export function classifyPython(text: string): { inCollective: boolean; top: string } {
  const blocks: string[][] = [];
  for (const line of text.split('\n')) {
    if (/^(Current thread|Thread) 0x[0-9a-f]+/i.test(line)) blocks.push([]);
    else if (line.startsWith('  File ') && blocks.length) blocks[blocks.length - 1].push(line.trim());
  }
  const main = blocks.find((b) => b.length && / in <module>$/.test(b[b.length - 1])) ?? blocks[0] ?? [];
  return classifyLines(main);
}

export function classifyLines(frames: readonly string[]): { inCollective: boolean; top: string } {
  return { inCollective: frames.some((f) => COLLECTIVE.test(f)), top: frames[0] ?? '' };
}

/** Registrations of processes that are gone: removed (with their Node reports). */
export function sweepStacks(dir: string): void {
  let names: string[];
  try {
    names = fs.readdirSync(dir).filter((n) => n.endsWith(STACKS_SUFFIX));
  } catch {
    return;
  }
  for (const n of names) {
    const m = /^(\d+)\.(\d+)\.stacks$/.exec(n);
    if (!m) continue;
    const st = readPidStat(Number(m[1]));
    if (st && st.startTicks === Number(m[2])) continue;
    fs.rmSync(path.join(dir, n), { force: true });
    fs.rmSync(path.join(dir, `${n}.json`), { force: true });
  }
}
