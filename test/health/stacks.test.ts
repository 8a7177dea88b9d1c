// Issue 21: the daemon signals a process for its stacks only when it is, right
// now, the process that registered: same pid, same start time, same user,
// and only with SIGUSR1/SIGUSR2. Each case uses a real `sleep` process:
// SIGUSR2's default action kills it, so a process still alive afterwards was
// never signalled.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { requestStack, stacksFileName, classifyPython, sweepStacks } from '../../daemon/health/stacks.js';
import { readPidStat } from '../../daemon/sampler/proc.js';

const children: ChildProcess[] = [];
let dir = '';
afterEach(() => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

function sleeper(opts: { uid?: number; gid?: number } = {}): { pid: number; start: number; child: ChildProcess } {
  const child = spawn('sleep', ['30'], { stdio: 'ignore', ...opts });
  children.push(child);
  const st = readPidStat(child.pid!)!;
  return { pid: child.pid!, start: st.startTicks, child };
}

const alive = (c: ChildProcess) => c.exitCode === null && c.signalCode === null;
const settle = () => new Promise((r) => setTimeout(r, 200));

function register(pid: number, start: number, signal = 'SIGUSR2', kind = 'python', headerPid = pid, headerStart = start): string {
  const file = path.join(dir, stacksFileName(pid, start));
  fs.writeFileSync(file, `logd-stacks 1 pid=${headerPid} start=${headerStart} signal=${signal} kind=${kind}\n`, { mode: 0o600 });
  return file;
}

describe('stacks: who may be signalled', () => {
  it('the registered process itself is signalled (and, being a plain `sleep`, dies of SIGUSR2)', async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'logd-stacks-'));
    const s = sleeper();
    register(s.pid, s.start);
    const a = await requestStack(dir, s.pid, s.start, 500);
    expect('problem' in a && a.problem).toMatch(/did not dump/);
    await settle();
    expect(s.child.signalCode).toBe('SIGUSR2');
  });

  it('no registration (the client opted out), another start time (a reused pid), a header naming another process: never signalled', async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'logd-stacks-'));
    const s = sleeper();
    expect(await requestStack(dir, s.pid, s.start, 300)).toMatchObject({ problem: expect.stringMatching(/no stack registration/) });
    register(s.pid, s.start + 1); // the registration of an earlier process with the same pid
    expect(await requestStack(dir, s.pid, s.start + 1, 300)).toMatchObject({ problem: expect.stringMatching(/no longer the process|reused/) });
    register(s.pid, s.start, 'SIGUSR2', 'python', s.pid + 1, s.start);
    expect(await requestStack(dir, s.pid, s.start, 300)).toMatchObject({ problem: expect.stringMatching(/names pid/) });
    await settle();
    expect(alive(s.child)).toBe(true);
  });

  it('a header asking for another signal, a symlink, a file of another user: refused', async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'logd-stacks-'));
    const s = sleeper();
    register(s.pid, s.start, 'SIGKILL');
    expect(await requestStack(dir, s.pid, s.start, 300)).toMatchObject({ problem: expect.stringMatching(/only sends SIGUSR1 or SIGUSR2/) });
    const target = path.join(dir, 'elsewhere');
    fs.writeFileSync(target, `logd-stacks 1 pid=${s.pid} start=${s.start} signal=SIGUSR2 kind=python\n`);
    const file = path.join(dir, stacksFileName(s.pid, s.start));
    fs.rmSync(file);
    fs.symlinkSync(target, file);
    expect(await requestStack(dir, s.pid, s.start, 300)).toMatchObject({ problem: expect.stringMatching(/not a regular file/) });
    if (process.getuid?.() === 0) {
      fs.rmSync(file);
      register(s.pid, s.start);
      fs.chownSync(file, 65534, 65534);
      expect(await requestStack(dir, s.pid, s.start, 300)).toMatchObject({ problem: expect.stringMatching(/belongs to uid 65534/) });
    }
    await settle();
    expect(alive(s.child)).toBe(true);
  });

  it.skipIf(process.getuid?.() !== 0)('a process of another user (a pid reused by someone else) is never signalled, even with a valid registration', async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'logd-stacks-'));
    const s = sleeper({ uid: 65534, gid: 65534 });
    register(s.pid, s.start);
    expect(await requestStack(dir, s.pid, s.start, 300)).toMatchObject({ problem: expect.stringMatching(/another user/) });
    await settle();
    expect(alive(s.child)).toBe(true);
  });

  it('registrations of processes that are gone are swept; live ones stay', async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'logd-stacks-'));
    const s = sleeper();
    const live = register(s.pid, s.start);
    const gone = register(s.pid, s.start + 7);
    fs.writeFileSync(`${gone}.json`, '{}');
    sweepStacks(dir);
    expect(fs.existsSync(live)).toBe(true);
    expect(fs.existsSync(gone)).toBe(false);
    expect(fs.existsSync(`${gone}.json`)).toBe(false);
  });

  it('a faulthandler dump: the main thread is the block ending in <module>; in a collective when one of its frames is', () => {
    const dump = [
      'Thread 0x00007f0000000001 (most recent call first):',
      '  File "/usr/lib/python3/dist-packages/torch/utils/data/_utils/worker.py", line 10 in _loop',
      '',
      'Current thread 0x00007f0000000002 (most recent call first):',
      '  File "/usr/lib/python3/dist-packages/torch/autograd/__init__.py", line 197 in backward',
      '  File "/job/train.py", line 60 in main',
      '  File "/job/train.py", line 70 in <module>',
    ].join('\n');
    expect(classifyPython(dump)).toEqual({ inCollective: true, top: 'File "/usr/lib/python3/dist-packages/torch/autograd/__init__.py", line 197 in backward' });
    expect(classifyPython(dump.replace(/.*autograd.*\n/, '')).inCollective).toBe(false);
  });
});
