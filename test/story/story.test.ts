// The job's story from end records (src/story): the judgement alone, on
// hand-built ranks. The real processes are in torchrun-faults.test.ts.
import { describe, it, expect } from 'vitest';
import { tellStory, tracebackError, nonFiniteKeys, type StoryRank } from '../../src/story/story.js';
import { decodeWaitStatus, describeEnd, type RunEnd } from '../../src/story/end.js';
import { splitJobs, pickJob } from '../../src/story/jobs.js';
import type { RunInfo } from '../../src/wire.js';

const T = 1_800_000_000;
function end(p: Partial<RunEnd>): RunEnd {
  return { at: T, atWithinS: 0, pid: 100, host: 'a', rank: null, exitCode: null, signal: null, lastStep: 10, lastStepAt: T - 1, lastLines: [], source: 'client', ...p };
}
function rank(r: number, e: Partial<RunEnd> | null, state = 'crashed', extra: Partial<StoryRank> = {}): StoryRank {
  return { runId: `run${r}`, rank: r, host: 'a', pid: 100 + r, state, stateReason: '', exitCode: e?.exitCode ?? -1, finishedAt: T + 1, end: e ? end({ rank: r, pid: 100 + r, ...e }) : null, nonFinite: [], ...extra };
}
const peerGone = { exitCode: 1, exception: { type: 'RuntimeError', message: '[../gloo/transport/tcp/pair.cc:598] Connection closed by peer [127.0.0.1]:1234' } };

describe('the job story', () => {
  it('wait statuses decode to signals by name and exit codes', () => {
    expect(decodeWaitStatus(9)).toEqual({ exitCode: null, signal: 'SIGKILL', coreDumped: false });
    expect(decodeWaitStatus(0x86)).toEqual({ exitCode: null, signal: 'SIGABRT', coreDumped: true });
    expect(decodeWaitStatus(1 << 8)).toEqual({ exitCode: 1, signal: null, coreDumped: false });
    expect(describeEnd(end({ signal: 'SIGSEGV', coreDumped: true }))).toBe('died of a segmentation fault (SIGSEGV), core dumped');
    expect(describeEnd(end({ source: 'gone' }))).toMatch(/how is not known/);
  });

  it('a finished job, or one still running with no failure, has no story', () => {
    expect(tellStory([rank(0, { exitCode: 0 }, 'finished'), rank(1, null, 'running')])).toBeNull();
  });

  it('the killed rank is first although a survivor\'s error was recorded earlier; survivors are consequences', () => {
    const s = tellStory([rank(0, { ...peerGone, at: T + 0.01 }), rank(1, { ...peerGone, at: T - 0.02 }), rank(2, { signal: 'SIGKILL', source: 'wait-status', at: T, atWithinS: 0.05, lastStep: 277 })])!;
    expect(s.first.map((f) => f.rank)).toEqual([2]);
    expect(s.after.every((f) => f.consequence)).toBe(true);
    expect(s.line).toMatch(/^failed: rank 2 \(pid 102, a\) was killed by SIGKILL at step 277, \d\d:\d\d:\d\d; ranks 0, 1 failed right after it \(connection closed by peer\)$/);
  });

  it('only consequences (the cause on a node not seen): no rank is blamed', () => {
    const s = tellStory([rank(0, peerGone), rank(1, peerGone)])!;
    expect(s.first).toEqual([]);
    expect(s.line).toMatch(/the rank that failed first is not among the ranks seen here/);
  });

  it('two independent failures within the record\'s precision are named together, unordered', () => {
    const s = tellStory([rank(2, { signal: 'SIGKILL', at: T, atWithinS: 0.05 }), rank(3, { signal: 'SIGKILL', at: T + 0.001, atWithinS: 0.05 }), rank(0, peerGone)])!;
    expect(s.unordered).toBe(true);
    expect(s.first.map((f) => f.rank)).toEqual([2, 3]);
    expect(s.line).toMatch(/too close together to say which was first/);
  });

  it('every rank stopped by SIGTERM together is `stopped`; a lone SIGTERM before the others\' errors is the cause', () => {
    const all = tellStory([0, 1].map((r) => rank(r, { signal: 'SIGTERM', at: T + r * 0.01 })))!;
    expect(all.verdict).toBe('stopped');
    expect(all.first).toEqual([]);
    const lone = tellStory([rank(1, { signal: 'SIGTERM', at: T }), rank(0, { ...peerGone, at: T + 0.1 })])!;
    expect(lone.first.map((f) => [f.rank, f.cause])).toEqual([[1, 'terminated']]);
  });

  it('ranks a launcher stops within milliseconds of the first failure are not ordered against it', () => {
    const s = tellStory([rank(1, { signal: 'SIGTERM', at: T + 0.001, source: 'parent' }), rank(2, { signal: 'SIGKILL', at: T, source: 'parent' }),
      rank(3, { signal: 'SIGTERM', at: T - 0.001, source: 'parent' })])!;
    expect(s.first.map((f) => f.rank)).toEqual([2]);
    expect(s.after.map((f) => [f.rank, f.consequence])).toEqual([[3, true], [1, true]]);
    expect(s.line).toMatch(/^failed: rank 2 .*was killed by SIGKILL.*; ranks 1, 3 failed right after it \(stopped with the job\)$/);
  });

  it('causes: OOM, CUDA OOM, NaN by the last values, an exception from a traceback in the console', () => {
    expect(tellStory([rank(0, { signal: 'SIGKILL', oom: '/proc/vmstat oom_kill 3 -> 4' })])!.first[0].cause).toBe('oom');
    expect(tellStory([rank(0, { exitCode: 1, exception: { type: 'torch.OutOfMemoryError', message: 'CUDA out of memory. Tried to allocate 2.00 GiB' } })])!.first[0].cause).toBe('oom');
    expect(tellStory([rank(0, { exitCode: 1 }, 'crashed', { nonFinite: ['loss'] })])!.first[0].cause).toBe('nan');
    const lines = ['Traceback (most recent call last):', '  File "train.py", line 3, in <module>', 'KeyError: \'label\''];
    const f = tellStory([rank(0, { exitCode: 1, source: 'wait-status', lastLines: lines })])!.first[0];
    expect([f.cause, f.evidence[0]]).toEqual(['exception', "KeyError: 'label'"]);
    expect(tracebackError(['no traceback', 'ValueError: x'])).toBeNull();
    expect(nonFiniteKeys('{"loss":"NaN","acc":1,"_step":"Infinity"}')).toEqual(['loss']);
  });

  it('jobs of a group: a relaunch repeating ranks is a new job; runs made one after another with new ranks or names stay one', () => {
    const run = (id: string, rank: number | null, created: number, finished: number, name = id): RunInfo => ({
      id, project: 'p', name, group: 'g', jobType: '', tags: [], state: finished ? 'crashed' : 'running', stateReason: '', createdAt: created, finishedAt: finished, exitCode: 0,
      configJson: '{}', summaryJson: '{}', metadataJson: JSON.stringify({ rank: rank === null ? null : { rank } }), historyRows: 0, writers: 0, runToken: '', mode: '', notes: '', ownerWriterId: '' });
    const twice = splitJobs([run('a0', 0, 100, 110), run('a1', 1, 100.5, 110), run('b0', 0, 200, 210), run('b1', 1, 200.2, 210)]);
    expect(twice.map((j) => j.runs.map((r) => r.id))).toEqual([['a0', 'a1'], ['b0', 'b1']]);
    expect(pickJob(twice, undefined).n).toBe(2);
    expect(pickJob(twice, 'all').runs).toHaveLength(4);
    expect(() => pickJob(twice, '3')).toThrow(/no job "3" in this group: it has 2 job\(s\)/);
    const inTurn = splitJobs([run('r0', 0, 100, 101), run('r1', 1, 102, 103), run('r2', 2, 104, 105)]);
    expect(inTurn).toHaveLength(1);
    const sweep = splitJobs([run('t1', null, 100, 101, 'trial-1'), run('t2', null, 102, 103, 'trial-2'), run('t1b', null, 104, 105, 'trial-1')]);
    expect(sweep.map((j) => j.runs.length)).toEqual([2, 1]);
    // A thousand ranks launched twice (the second launch after the first ended): two jobs of 1 024 each, split in
    // one pass (it used to compare each run with every run of the job, parsing both ranks each time: minutes for
    // a 1 024-rank group page).
    const big = [...Array.from({ length: 1024 }, (_, i) => run(`x${i}`, i, 1000 + i / 1000, 1100)), ...Array.from({ length: 1024 }, (_, i) => run(`y${i}`, i, 2000 + i / 1000, 2100))];
    expect(splitJobs(big).map((j) => [j.runs.length, j.runs[0].id])).toEqual([[1024, 'x0'], [1024, 'y0']]);
  });
});
