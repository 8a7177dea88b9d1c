// Each OOM kill the kernel counted explains one death (daemon/runs/process-end.ts
// OomWatch.claim): the ranks a launcher stops after the OOM victim are not
// called OOM kills too, even when their exit status was collected before the
// daemon looked.
import { describe, expect, it } from 'vitest';
import { OomWatch } from '../../daemon/runs/process-end.js';

describe('OOM kills claimed one per death', () => {
  it('a count that rose by one explains one process; by two, two; never more', () => {
    const w = new OomWatch();
    expect(w.claim('/sys/fs/cgroup/memory/job/memory.oom_control', 0, 1)).toBe(true);
    expect(w.claim('/sys/fs/cgroup/memory/job/memory.oom_control', 0, 1)).toBe(false);
    // The count rises again: one more.
    expect(w.claim('/sys/fs/cgroup/memory/job/memory.oom_control', 0, 2)).toBe(true);
    expect(w.claim('/sys/fs/cgroup/memory/job/memory.oom_control', 0, 2)).toBe(false);
    // Another counter is its own.
    expect(w.claim('vmstat', 10, 12)).toBe(true);
    expect(w.claim('vmstat', 10, 12)).toBe(true);
    expect(w.claim('vmstat', 10, 12)).toBe(false);
    // A process that joined after the kills (its base is the count now) claims none of them.
    expect(w.claim('/sys/fs/cgroup/memory/other/memory.oom_control', 5, 5)).toBe(false);
  });
});
