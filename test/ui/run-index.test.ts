// The runs table's index (daemon/ui/run-index.ts) over a source that counts
// its calls: read whole once; within 2 s nothing is asked; after, a check (a
// one-run listing) and the live runs read anew; a run that comes or goes
// means a new whole read; sorted views are kept until the runs change.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { RunIndex } from '../../daemon/ui/run-index.js';
import { runJson } from '../../daemon/ui/api.js';
import type { QuerySource, RunFilter, RunInfo } from '../../daemon/query/index.js';

function info(id: string, createdAt: number, state: string, summary: Record<string, unknown> = {}): RunInfo {
  return { id, project: 'p', name: id, group: '', jobType: '', tags: [], state, stateReason: '', createdAt, finishedAt: 0, exitCode: 0,
    configJson: '{}', summaryJson: JSON.stringify(summary), metadataJson: '{}', historyRows: 1, writers: 0, runToken: '', mode: 'online', notes: '', ownerWriterId: '' } as unknown as RunInfo;
}

function source(runs: RunInfo[]) {
  const calls = { all: 0, head: 0, get: [] as string[] };
  const src = {
    kind: 'local', where: 'test',
    async listRuns(f: RunFilter) {
      const sorted = [...runs].sort((a, b) => b.createdAt - a.createdAt);
      if (f.limit === 1) calls.head++;
      else calls.all++;
      return { runs: sorted.slice(f.offset ?? 0, (f.offset ?? 0) + (f.limit ?? 1000)), total: sorted.length };
    },
    async getRun(id: string) {
      calls.get.push(id);
      return runs.find((r) => r.id === id)!;
    },
    async history() { throw new Error('unused'); },
    async close() {},
  } as unknown as QuerySource;
  return { src, calls };
}

afterEach(() => vi.restoreAllMocks());

describe('the runs table index', () => {
  it('reads once, then checks; live runs are read anew; a new run means a whole read', async () => {
    let now = 1_000_000;
    vi.spyOn(Date, 'now').mockImplementation(() => now);
    const runs = [info('a', 1, 'finished', { loss: 3 }), info('b', 2, 'running', { loss: 2 }), info('c', 3, 'finished', { loss: 1 })];
    const { src, calls } = source(runs);
    const index = new RunIndex(src, (r) => runJson(r));
    const byLoss = (rs: Array<Record<string, unknown>>) => [...rs].sort((x, y) => (x.summary as { loss: number }).loss - (y.summary as { loss: number }).loss).map((r) => r.id);
    expect(await index.selected({}, 'loss', byLoss)).toEqual(['c', 'b', 'a']);
    // The sorted view is kept: not computed again.
    expect(await index.selected({}, 'loss', () => { throw new Error('computed again'); })).toEqual(['c', 'b', 'a']);
    expect(calls).toEqual({ all: 1, head: 0, get: [] });
    // The live run logs on: its summary changes.
    runs[1] = info('b', 2, 'finished', { loss: 0.5 });
    now += 2500;
    expect(byLoss(await index.runs({}))).toEqual(['b', 'c', 'a']);
    expect(calls).toEqual({ all: 1, head: 1, get: ['b'] });
    // Nothing live any more: a check only.
    now += 2500;
    await index.runs({});
    expect(calls).toEqual({ all: 1, head: 2, get: ['b'] });
    // A run comes: read whole again.
    runs.push(info('d', 4, 'running', { loss: 9 }));
    now += 2500;
    expect((await index.runs({})).map((r) => r.id)).toEqual(['d', 'c', 'b', 'a']);
    expect(calls.all).toBe(2);
  });
});
