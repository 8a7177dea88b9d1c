import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { memoryReading, parseMeminfo, readCgroupMemory } from '../../daemon/sampler/memory.js';
import { PAGE_SIZE, ProcessSnapshot, TICKS_PER_SECOND, processTree, cpuPercent, parseDiskstats, parseNetDev, parsePidStat, parseProcStat } from '../../daemon/sampler/proc.js';
import { ProcessTreeTracker, gpuProcessMetrics } from '../../daemon/sampler/process-metrics.js';
import { spawnBusyFamily } from './family.js';

const GiB = 1024 ** 3;

describe('/proc parsers', () => {
  it('computes system and per-core CPU % from two /proc/stat readings', () => {
    const a = parseProcStat('cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 60 0 20 400 20 0 0 0 0 0\ncpu1 40 0 30 400 30 0 0 0 0 0\nintr 1 2 3\n');
    const b = parseProcStat('cpu  250 0 100 850 50 0 0 0 0 0\ncpu0 160 0 20 400 20 0 0 0 0 0\ncpu1 90 0 80 450 30 0 0 0 0 0\n');
    expect(cpuPercent(a.all, b.all)).toBeCloseTo((200 / 250) * 100, 9);
    expect(cpuPercent(a.cores[0]!, b.cores[0]!)).toBe(100);
    expect(cpuPercent(a.cores[1]!, b.cores[1]!)).toBe(((50 + 50) / 150) * 100);
    expect(cpuPercent(a.all, a.all)).toBeUndefined();
  });

  it('sums whole disks from /proc/diskstats in 512-byte sectors, not partitions or loop devices', () => {
    const text = [
      '   7       0 loop0 10 0 999 0 0 0 999 0 0 0 0 0 0 0 0 0 0',
      ' 259       0 nvme0n1 52999 7390 3024010 16865 36233 16441 2880296 9836 0 6536 27182 0 0 0 0 0 0',
      ' 259       1 nvme0n1p1 52000 7390 3000000 16865 36000 16441 2880000 9836 0 6536 27182 0 0 0 0 0 0',
      '   8       0 sda 10 0 100 0 20 0 200 0 0 0 0',
      '   8       1 sda1 10 0 100 0 20 0 200 0 0 0 0',
      ' 253       0 dm-0 10 0 5000 0 20 0 5000 0 0 0 0',
    ].join('\n');
    const counted = (n: string): boolean => ['nvme0n1', 'sda'].includes(n);
    expect(parseDiskstats(text, counted)).toEqual({ readBytes: (3024010 + 100) * 512, writeBytes: (2880296 + 200) * 512 });
  });

  it('sums network bytes of every interface except lo', () => {
    const text = `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:    3193      29    0    0    0     0          0         0     3193      29    0    0    0     0       0          0
  eth0: 308817006   10134    0    0    0     0          0         0   686807    6148    0    0    0     0       0          0
  ib0: 1000 1 0 0 0 0 0 0 2000 2 0 0 0 0 0 0
`;
    expect(parseNetDev(text)).toEqual({ recvBytes: 308817006 + 1000, sentBytes: 686807 + 2000 });
  });

  it('reads ppid, CPU ticks and start time from /proc/<pid>/stat even with ") (" in the name', () => {
    const text = '8635 (we ird) (name) R 8630 8630 5483 0 -1 4194304 99 0 0 0 17 4 0 0 20 0 3 0 63233 3133440 365 18446744073709551615';
    expect(parsePidStat(8635, text)).toEqual({ pid: 8635, ppid: 8630, cpuTicks: 21, startTicks: 63233, threads: 3, rssBytes: 365 * PAGE_SIZE });
    expect(parsePidStat(1, 'garbage')).toBeNull();
  });

  it('knows USER_HZ and the page size, and its RSS agrees with VmRSS of /proc/self/status', () => {
    expect(TICKS_PER_SECOND).toBe(100);
    expect([4096, 16384, 65536]).toContain(PAGE_SIZE);
    const vmRss = Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync('/proc/self/status', 'utf8'))![1]) * 1024;
    const fromStat = parsePidStat(process.pid, readFileSync('/proc/self/stat', 'utf8'))!.rssBytes;
    expect(Math.abs(fromStat - vmRss) / vmRss).toBeLessThan(0.05);
  });
});

describe('memory with cgroups', () => {
  const dirs: string[] = [];
  afterEach(() => dirs.splice(0).forEach((d) => rmSync(d, { recursive: true, force: true })));
  function tree(files: Record<string, string>): string {
    const root = mkdtempSync(join(tmpdir(), 'logd-cgroup-'));
    dirs.push(root);
    for (const [path, content] of Object.entries(files)) {
      mkdirSync(join(root, path, '..'), { recursive: true });
      writeFileSync(join(root, path), content);
    }
    return root;
  }
  const meminfo = parseMeminfo('MemTotal:       65536000 kB\nMemFree:  1000 kB\nMemAvailable:   49152000 kB\n')!;

  it('uses MemTotal/MemAvailable when there is no cgroup limit', () => {
    const m = memoryReading(meminfo, null)!;
    expect(m.source).toBe('meminfo');
    expect(m.percent).toBeCloseTo(25, 9);
  });

  it('cgroup v2: takes the tightest limit on the path (set on the job, not the leaf) minus inactive file cache', () => {
    const root = tree({
      'cgroup.controllers': 'cpu memory',
      'memory.max': 'max\n',
      'job_1/memory.max': `${8 * GiB}\n`,
      'job_1/memory.current': `${3 * GiB}\n`,
      'job_1/memory.stat': `anon 1\ninactive_file ${1 * GiB}\nactive_file 5\n`,
      'job_1/step_0/memory.max': 'max\n',
      'job_1/step_0/memory.current': `${1 * GiB}\n`,
    });
    const cg = readCgroupMemory(root, '0::/job_1/step_0\n');
    expect(cg).toEqual({ limitBytes: 8 * GiB, usedBytes: 2 * GiB, version: 2 });
    const m = memoryReading(meminfo, cg)!;
    expect(m).toMatchObject({ source: 'cgroup2', limitBytes: 8 * GiB, usedBytes: 2 * GiB, percent: 25 });
  });

  it('cgroup v2 without any limit, and cgroup v1 whose "unlimited" is a huge number, mean no cgroup limit', () => {
    expect(readCgroupMemory(tree({ 'cgroup.controllers': 'memory', 'memory.max': 'max\n' }), '0::/\n')).toBeNull();
    const v1 = tree({ 'memory/memory.limit_in_bytes': '9223372036854771712\n', 'memory/memory.usage_in_bytes': '1000\n' });
    expect(readCgroupMemory(v1, '4:memory:/process_api/abc\n0::/\n')).toBeNull();
  });

  it('cgroup v1: a container sees its own cgroup at the mount root', () => {
    const v1 = tree({
      'memory/memory.limit_in_bytes': `${4 * GiB}\n`,
      'memory/memory.usage_in_bytes': `${2 * GiB}\n`,
      'memory/memory.stat': `cache 5\ntotal_inactive_file ${GiB}\n`,
    });
    expect(readCgroupMemory(v1, '9:cpuset,memory:/docker/abc\n')).toEqual({ limitBytes: 4 * GiB, usedBytes: GiB, version: 1 });
  });
});

describe('process trees (real processes)', () => {
  const cleanups: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0)) await c();
  });

  it('finds descendants by either strategy, and measures CPU % and RSS of the whole tree', async () => {
    const fam = await spawnBusyFamily(cleanups);
    for (const strategy of ['auto', 'scan'] as const) {
      const pids = new ProcessSnapshot('/proc', strategy).tree(fam.child);
      expect(pids[0]).toBe(fam.child);
      expect(pids).toContain(fam.grandchild);
    }
    expect(processTree(fam.child).sort()).toEqual([fam.child, fam.grandchild].sort());
    expect(processTree(2 ** 22 + 12345)).toEqual([]);

    const tracker = new ProcessTreeTracker(fam.child);
    const first = tracker.measure(new ProcessSnapshot(), 64 * GiB, Date.now())!;
    expect(first.metrics).not.toHaveProperty('proc.cpu.percent'); // baseline only
    await new Promise((r) => setTimeout(r, 1000));
    const second = tracker.measure(new ProcessSnapshot(), 64 * GiB, Date.now())!;
    expect(second.metrics['proc.count']).toBe(2);
    expect(second.metrics['proc.memory.rssMB']).toBeGreaterThan(20); // two node processes
    // The child busy-loops; an idle tree shows ~0. Low bar: a loaded 2-core machine.
    expect(second.metrics['proc.cpu.percent']).toBeGreaterThan(5);
    expect(second.metrics['proc.cpu.percent']).toBeLessThan(220);
  });

  it('between rediscoveries re-reads only known members: a new child waits, a dead one drops at once', async () => {
    const slow = new ProcessTreeTracker(process.pid, 60_000);
    const eager = new ProcessTreeTracker(process.pid, 0);
    const count = (t: ProcessTreeTracker): number => t.measure(new ProcessSnapshot(), null, Date.now())!.metrics['proc.count']!;
    const before = count(slow);
    expect(count(eager)).toBe(before);
    const fam = await spawnBusyFamily(cleanups);
    expect(count(slow)).toBe(before); // not looked for yet
    expect(count(eager)).toBe(before + 2);
    await fam.kill();
    const fresh = new ProcessTreeTracker(process.pid, 60_000);
    expect(count(fresh)).toBe(before);
    const withFamily = new ProcessTreeTracker(process.pid, 60_000);
    const fam2 = await spawnBusyFamily(cleanups);
    expect(count(withFamily)).toBe(before + 2);
    await fam2.kill();
    expect(count(withFamily)).toBe(before);
  });

  it('attributes compute-apps memory to the tree and copies its GPU metrics under gpu.process.<i>', () => {
    const apps = [
      { pid: 10, gpuUuid: 'GPU-a', usedMemoryBytes: 100 },
      { pid: 11, gpuUuid: 'GPU-a', usedMemoryBytes: 20 },
      { pid: 11, gpuUuid: 'GPU-b', usedMemoryBytes: null },
      { pid: 99, gpuUuid: 'GPU-b', usedMemoryBytes: 5000 },
    ];
    const out = gpuProcessMetrics([10, 11], apps, new Map([['GPU-a', 0], ['GPU-b', 1]]), { 'gpu.0.temp': 50, 'gpu.1.temp': 60, cpu: 3 });
    expect(out).toEqual({
      'gpu.process.memoryAllocatedBytes': 120,
      'gpu.process.gpus': 2,
      'gpu.process.0.temp': 50,
      'gpu.process.0.processMemoryAllocatedBytes': 120,
      'gpu.process.1.temp': 60,
      'gpu.process.1.processMemoryAllocatedBytes': 0,
    });
  });
});
