// The real SystemSampler against the fake nvidia-smi (real processes, real /proc).
import { spawn } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SystemSampler, type SystemSample, type SystemSamplerOptions } from '../../daemon/sampler/sampler.js';
import { isAlive, useFakePath, waitFor } from './helpers.js';
import { spawnBusyFamily } from './family.js';

const MiB = 1024 * 1024;

interface Harness {
  sampler: SystemSampler;
  samples: SystemSample[];
  logs: string[];
  spawns: () => Array<{ at: number; pid: number; mode: string; kind: 'loop' | 'once'; query: string }>;
  dir: string;
}

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A started-later sampler on a PATH holding the fake (or nothing), with fast timings. */
function harness(env: Record<string, string>, opts: SystemSamplerOptions = {}, withFake = true): Harness {
  const path = useFakePath(withFake);
  const spawnLog = join(path.dir, 'spawns.log');
  writeFileSync(spawnLog, '');
  Object.assign(process.env, { FAKE_NVSMI_SPAWN_LOG: spawnLog }, env);
  const logs: string[] = [];
  const sampler = new SystemSampler({
    intervalMs: 200,
    gpuHangTimeoutMs: 1000,
    gpuInitialBackoffMs: 100,
    gpuMaxBackoffMs: 10_000,
    queryDeadlineMs: 3000,
    computeAppsIntervalMs: 200,
    log: (l) => logs.push(l),
    ...opts,
  });
  const samples: SystemSample[] = [];
  sampler.onSample((s) => samples.push(s));
  cleanups.push(() => path.restore());
  cleanups.push(() => sampler.stop());
  const spawns = (): ReturnType<Harness['spawns']> =>
    readFileSync(spawnLog, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => {
        const [at, pid, mode, kind, query] = l.split(' ');
        return { at: Number(at), pid: Number(pid), mode: mode!, kind: kind as 'loop' | 'once', query: query! };
      });
  return { sampler, samples, logs, spawns, dir: path.dir };
}

const withGpu = (s: SystemSample, index = 0): boolean => s.node[`gpu.${index}.gpu`] !== undefined;

describe('SystemSampler with nvidia-smi', () => {
  it('reports all 8 GPUs of an H100 node under wandb-style names from ONE long-lived nvidia-smi', async () => {
    const h = harness({});
    await h.sampler.start();
    expect(h.sampler.gpus()).toHaveLength(8);
    expect(h.sampler.gpus()[3]).toEqual({
      index: 3,
      name: 'NVIDIA H100 80GB HBM3',
      uuid: 'GPU-f3e2d1c0-b9a8-4776-8554-433221100fed',
      driverVersion: '550.54.15',
      memoryTotalBytes: 81559 * MiB,
    });
    await waitFor('10 samples', 10_000, () => h.samples.length >= 10);
    const s = h.samples.filter((x) => withGpu(x, 7)).at(-1)!;
    expect(s).toBeDefined();
    for (let i = 0; i < 8; i++) {
      for (const key of ['gpu', 'memory', 'memoryAllocated', 'memoryAllocatedBytes', 'temp', 'powerWatts', 'enforcedPowerLimitWatts', 'powerPercent', 'smClock', 'memoryClock', 'pcieLinkGen', 'pcieLinkWidth', 'correctedMemoryErrors', 'uncorrectedMemoryErrors']) {
        expect(s.node, `gpu.${i}.${key}`).toHaveProperty([`gpu.${i}.${key}`]);
      }
      expect(s.node).not.toHaveProperty([`gpu.${i}.fanSpeed`]); // [N/A] on SXM boards
    }
    expect([72415 * MiB, 72417 * MiB]).toContain(s.node['gpu.0.memoryAllocatedBytes']);
    expect(s.node['gpu.0.enforcedPowerLimitWatts']).toBe(700);
    expect(s.node['gpu.0.pcieLinkGen']).toBe(5);
    expect(s.node).not.toHaveProperty(['gpu.8.gpu']);
    // Both fixture frames were replayed, so readings come from the loop, not the probe.
    expect(new Set(h.samples.filter((x) => withGpu(x, 3)).map((x) => x.node['gpu.3.smClock']))).toEqual(new Set([1980, 1755]));
    // Everything else from /proc and statfs.
    expect(s.node.cpu).toBeGreaterThanOrEqual(0);
    expect(s.node.cpu).toBeLessThanOrEqual(100);
    expect(s.node.memory_percent).toBeGreaterThan(0);
    expect(s.node.memory_percent).toBeLessThan(100);
    expect(s.node['disk./.usagePercent']).toBeGreaterThan(0);
    for (const key of ['disk.in', 'disk.out', 'network.sent', 'network.recv', 'proc.memory.availableMB']) expect(s.node[key]).toBeGreaterThanOrEqual(0);
    expect(s.time).toBeCloseTo(Date.now() / 1000, -1);
    // One probe and one loop process for ≥10 samples, one info line.
    expect(h.spawns().map((x) => x.kind)).toEqual(['once', 'loop']);
    expect(h.logs).toEqual(['sampler: 8 GPU(s) (NVIDIA H100 80GB HBM3), driver 550.54.15']);
  });

  it('drops a field an older nvidia-smi does not know, says so once, and reports the rest', async () => {
    const h = harness({ FAKE_NVSMI_UNKNOWN_FIELD: 'pcie.link.gen.current' });
    await h.sampler.start();
    const s = await waitFor('a GPU sample', 10_000, () => h.samples.find((x) => withGpu(x, 7)));
    expect(s.node).not.toHaveProperty(['gpu.0.pcieLinkGen']);
    expect(s.node['gpu.0.pcieLinkWidth']).toBe(16); // the columns after it did not shift
    expect(s.node['gpu.0.enforcedPowerLimitWatts']).toBe(700);
    expect(h.logs).toEqual(['sampler: 8 GPU(s) (NVIDIA H100 80GB HBM3), driver 550.54.15; this nvidia-smi lacks pcie.link.gen.current']);
    expect(h.spawns().map((x) => x.kind)).toEqual(['once', 'once', 'loop']);
  });

  it('reports a 1-GPU node, fan speed included', async () => {
    const h = harness({ FAKE_NVSMI_FIXTURE: 'gpu1-rtx4090.csv' });
    await h.sampler.start();
    const s = await waitFor('a GPU sample', 10_000, () => h.samples.find((x) => withGpu(x)));
    expect([54, 56]).toContain(s.node['gpu.0.fanSpeed']);
    expect(Object.keys(s.node).filter((k) => k.startsWith('gpu.1.'))).toEqual([]);
    expect(h.sampler.gpus().map((g) => g.name)).toEqual(['NVIDIA GeForce RTX 4090']);
  });

  it('restarts a dying nvidia-smi with growing backoff, logs the streak once, and logs its recovery', async () => {
    const h = harness({ FAKE_NVSMI_MODE: 'die', FAKE_NVSMI_AFTER: '8' });
    await h.sampler.start();
    const loops = await waitFor('5 loop starts', 20_000, () => {
      const l = h.spawns().filter((x) => x.kind === 'loop');
      return l.length >= 5 && l;
    });
    const gaps = loops.slice(1).map((x, i) => x.at - loops[i]!.at);
    // Each gap is the tool's short life plus a backoff of 100, 200, 400, 800 ms.
    gaps.forEach((gap, i) => expect(gap, `gap ${i}`).toBeGreaterThanOrEqual(100 * 2 ** i - 20));
    expect(h.sampler.diagnostics().gpuToolRestarts).toBeGreaterThanOrEqual(4);
    const failures = h.logs.filter((l) => l.includes('nvidia-smi exited'));
    expect(failures).toEqual([expect.stringMatching(/^sampler: nvidia-smi exited \(exit 1\); restarting in 100 ms/)]);
    expect(h.logs.some((l) => l.includes('reporting again'))).toBe(false);

    process.env.FAKE_NVSMI_MODE = 'normal'; // the next start stays up
    await waitFor('the recovery line', 15_000, () => h.logs.some((l) => l.includes('nvidia-smi is reporting again')));
    const n = h.samples.length;
    await waitFor('GPU samples after recovery', 5000, () => h.samples.slice(n).filter((x) => withGpu(x, 7)).length >= 3);
    expect(h.logs.filter((l) => l.includes('nvidia-smi exited'))).toHaveLength(1);
  });

  it('kills a hung nvidia-smi (no output for the hang timeout) and starts a new one', async () => {
    const h = harness({ FAKE_NVSMI_MODE: 'hang-after' }); // one frame, then silence
    await h.sampler.start();
    const [first, second] = await waitFor('a second loop start', 10_000, () => {
      const l = h.spawns().filter((x) => x.kind === 'loop');
      return l.length >= 2 && l;
    });
    expect(second!.at - first!.at).toBeGreaterThanOrEqual(1000); // not before the hang timeout
    expect(second!.at - first!.at).toBeLessThan(6000);
    await waitFor('the hung process to be gone', 3000, () => !isAlive(first!.pid));
    expect(h.logs.filter((l) => l.includes('printed nothing for'))).toHaveLength(1);
    // While it hangs, old readings age out instead of being reported as current.
    await waitFor('a sample without GPU metrics', 10_000, () => h.samples.some((s) => !withGpu(s)));
  });

  it('treats a tool that keeps printing only error lines as hung: killed and replaced', async () => {
    const h = harness({ FAKE_NVSMI_FIXTURE: 'gpu-lost-only.txt' });
    await h.sampler.start();
    const loops = await waitFor('a second loop start', 10_000, () => {
      const l = h.spawns().filter((x) => x.kind === 'loop');
      return l.length >= 2 && l;
    });
    expect(loops[1]!.at - loops[0]!.at).toBeGreaterThanOrEqual(1000);
    await waitFor('the first loop process to be gone', 3000, () => !isAlive(loops[0]!.pid));
    // The probe already said why, once; the replacements are quiet.
    expect(h.logs).toEqual([expect.stringMatching(/failed \(no GPU lines: Unable to determine the device handle for GPU0000:3B:00.0: Unknown Error\)/)]);
    expect(h.samples.every((s) => !withGpu(s))).toBe(true);
  });

  it('bounds start() and stop() when nvidia-smi hangs and ignores SIGTERM (SIGKILL follows)', async () => {
    const h = harness({ FAKE_NVSMI_MODE: 'hang', FAKE_NVSMI_IGNORE_TERM: '1' }, { queryDeadlineMs: 1000 });
    const t0 = Date.now();
    await h.sampler.start();
    expect(Date.now() - t0).toBeLessThan(3500); // deadline + kill grace + margin
    expect(h.logs).toEqual([expect.stringMatching(/failed \(timed out after 1000 ms\); GPU metrics are off until it works/)]);
    const probe = h.spawns()[0]!;
    expect(probe.kind).toBe('once');
    await waitFor('the probe to be SIGKILLed', 3000, () => !isAlive(probe.pid));
    const loop = await waitFor('the hung loop to be replaced', 10_000, () => h.spawns().filter((x) => x.kind === 'loop').length >= 2 && h.spawns());
    await waitFor('the SIGTERM-ignoring loop process to be SIGKILLed', 3000, () => !isAlive(loop[1]!.pid));
    expect(h.samples.length).toBeGreaterThan(0);
    expect(h.samples.every((s) => !withGpu(s) && s.node.memory_percent !== undefined)).toBe(true);
    const t1 = Date.now();
    await h.sampler.stop();
    expect(Date.now() - t1).toBeLessThan(3100);
    const pids = h.spawns().map((x) => x.pid);
    await waitFor('every nvidia-smi to be gone', 3000, () => pids.every((p) => !isAlive(p)));
    expect(h.logs).toHaveLength(1); // silent while failing
  });

  it('stop() during a hanging start-up probe cancels it at once, quietly', async () => {
    const h = harness({ FAKE_NVSMI_MODE: 'hang' }, { queryDeadlineMs: 30_000 });
    const starting = h.sampler.start();
    const probe = await waitFor('the probe to start', 5000, () => h.spawns()[0]);
    const t0 = Date.now();
    await h.sampler.stop();
    await starting;
    expect(Date.now() - t0).toBeLessThan(2500);
    await waitFor('the probe to be killed', 3000, () => !isAlive(probe.pid));
    expect(h.spawns()).toHaveLength(1); // no loop was started
    expect(h.logs).toEqual([]);
  });

  it('with a driver error: one line, no GPU metrics, retries with backoff, CPU and memory still arrive', async () => {
    const h = harness({ FAKE_NVSMI_MODE: 'error' });
    await h.sampler.start();
    await waitFor('3 loop attempts', 10_000, () => h.spawns().filter((x) => x.kind === 'loop').length >= 3);
    await waitFor('5 samples', 5000, () => h.samples.length >= 5);
    expect(h.logs).toEqual([
      expect.stringMatching(/^sampler: \S+nvidia-smi failed \(exit 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver/),
    ]);
    expect(h.sampler.gpus()).toEqual([]);
    for (const s of h.samples) {
      expect(Object.keys(s.node).filter((k) => k.startsWith('gpu.'))).toEqual([]);
      expect(s.node.memory_percent).toBeGreaterThan(0);
    }
    expect(h.samples.at(-1)!.node.cpu).toBeGreaterThanOrEqual(0);
  });

  it('without nvidia-smi on PATH: exactly one info line, and CPU/memory/disk/network still arrive', async () => {
    const h = harness({}, { perCoreCpu: true, diskPath: tmpdir() }, false);
    let throws = 0;
    h.sampler.onSample(() => {
      throws++;
      throw new Error('a broken subscriber');
    });
    await h.sampler.start();
    await waitFor('5 samples', 5000, () => h.samples.length >= 5);
    expect(throws).toBeGreaterThanOrEqual(5); // a throwing subscriber neither stops sampling nor the others
    expect(h.logs).toEqual([
      'sampler: no nvidia-smi found on PATH; GPU metrics are off',
      'sampler: a sample subscriber threw (Error: a broken subscriber); further throws are not logged',
    ]);
    expect(h.sampler.diagnostics().gpuEnabled).toBe(false);
    const s = h.samples.at(-1)!;
    for (const key of ['cpu', 'cpu.0.cpu_percent', 'cpu.1.cpu_percent', 'memory_percent', `disk.${tmpdir()}.usagePercent`, 'disk.in', 'network.recv']) {
      expect(s.node).toHaveProperty([key]);
    }
    expect(Object.keys(s.node).some((k) => k.startsWith('gpu.'))).toBe(false);
  });

  it('attributes CPU, RSS and compute-apps GPU memory to a watched process tree', async () => {
    const fam = await spawnBusyFamily(cleanups);
    const uuid2 = 'GPU-0c9d8e7f-6a5b-4c3d-9e2f-1a0b9c8d7e6f';
    const apps = join(process.env.TMPDIR ?? '/tmp', `logd-apps-${process.pid}.csv`);
    cleanups.push(() => rmSync(apps, { force: true }));
    writeFileSync(apps, `${fam.child}, ${uuid2}, 30000\n${fam.grandchild}, ${uuid2}, 1024\n999999, GPU-5b4a1c3e-8f2d-4e6a-9b1c-2d3e4f5a6b7c, 70000\n`);
    const h = harness({ FAKE_NVSMI_APPS_FILE: apps });
    await h.sampler.start();
    h.sampler.watch(fam.child);
    h.sampler.watch(process.pid);
    const idle = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'], { stdio: 'ignore' });
    cleanups.push(() => void idle.kill('SIGKILL'));
    h.sampler.watch(idle.pid!);
    const s = await waitFor('GPU memory on the child', 10_000, () =>
      h.samples.find((x) => x.processes.get(fam.child)?.['gpu.process.memoryAllocatedBytes'] !== undefined && x.processes.has(idle.pid!) && withGpu(x, 2)),
    );
    const child = s.processes.get(fam.child)!;
    expect(child['gpu.process.memoryAllocatedBytes']).toBe(31024 * MiB);
    expect(child['gpu.process.gpus']).toBe(1);
    expect(child['gpu.process.2.processMemoryAllocatedBytes']).toBe(31024 * MiB);
    expect(child['gpu.process.2.gpu']).toBe(s.node['gpu.2.gpu']);
    expect(child).not.toHaveProperty(['gpu.process.0.gpu']);
    expect(child['proc.count']).toBe(2);
    expect(child['proc.memory.rssMB']).toBeGreaterThan(20);
    expect(child['proc.cpu.percent']).toBeGreaterThan(5); // the child busy-loops; an idle one shows ~0 (low bar: shared, loaded CI cores)
    // This test process is an ancestor of the family, so its tree holds the same memory;
    // an unrelated process holds none.
    expect(s.processes.get(process.pid)!['gpu.process.memoryAllocatedBytes']).toBe(31024 * MiB);
    expect(s.processes.get(idle.pid!)!['gpu.process.memoryAllocatedBytes']).toBe(0);
    expect(s.processes.get(idle.pid!)!['gpu.process.gpus']).toBe(0);
    // Compute-apps is polled, not looped: one short process per poll.
    expect(h.spawns().filter((x) => x.query === 'apps' && x.kind === 'once').length).toBeGreaterThan(0);

    h.sampler.unwatch(process.pid);
    const n = h.samples.length;
    await waitFor('a sample without the unwatched pid', 5000, () => h.samples.slice(n).some((x) => !x.processes.has(process.pid)));
    await fam.kill();
    const m = h.samples.length;
    await waitFor('a sample without the dead tree', 5000, () => h.samples.slice(m + 1).some((x) => !x.processes.has(fam.child)));
  });

  it('polls compute-apps when a pid is watched and when GPU memory moves, not every interval', async () => {
    const steady = harness({}, { computeAppsIntervalMs: 200 });
    await steady.sampler.start();
    // Once the loop has reported (a GPU first seen after a poll is itself a reason to poll).
    await waitFor('a GPU sample', 10_000, () => steady.samples.some((x) => withGpu(x, 7)));
    steady.sampler.watch(process.pid);
    const n = steady.samples.length;
    await waitFor('10 samples', 10_000, () => steady.samples.length >= n + 10);
    // Memory in h100x8.csv moves by 2 MiB between frames, far below 1 % of 80 GB: one poll (the watch).
    expect(steady.spawns().filter((x) => x.query === 'apps')).toHaveLength(1);
    expect(steady.sampler.diagnostics().computeAppsPolls).toBe(1);
    await steady.sampler.stop();

    const moving = harness({ FAKE_NVSMI_FIXTURE: 'h100x8-alloc.csv' }, { computeAppsIntervalMs: 400 });
    await moving.sampler.start();
    const watchedAt = Date.now();
    moving.sampler.watch(process.pid);
    await waitFor('3 polls', 10_000, () => moving.spawns().filter((x) => x.query === 'apps').length >= 3 && true);
    await new Promise((r) => setTimeout(r, 1000));
    // Memory moves every 200 ms, but polls start at most every 400 ms.
    const polls = moving.sampler.diagnostics().computeAppsPolls;
    expect(polls).toBeLessThanOrEqual(Math.floor((Date.now() - watchedAt) / 400) + 1);
  });

  it('kills a compute-apps query that hangs at its deadline, quietly, and keeps sampling', async () => {
    const h = harness({ FAKE_NVSMI_APPS_MODE: 'hang', FAKE_NVSMI_IGNORE_TERM: '1' }, { queryDeadlineMs: 800 });
    await h.sampler.start();
    h.sampler.watch(process.pid);
    const query = await waitFor('a compute-apps query', 5000, () => h.spawns().find((x) => x.query === 'apps'));
    await waitFor('the hung query to be SIGKILLed', 4000, () => !isAlive(query.pid));
    const n = h.samples.length;
    await waitFor('more samples', 5000, () => h.samples.length >= n + 3);
    const s = h.samples.at(-1)!;
    expect(withGpu(s, 7)).toBe(true);
    expect(s.processes.get(process.pid)).toHaveProperty(['proc.memory.rssMB']);
    expect(s.processes.get(process.pid)).not.toHaveProperty(['gpu.process.memoryAllocatedBytes']); // unknown, not 0
    expect(h.logs).toEqual(['sampler: 8 GPU(s) (NVIDIA H100 80GB HBM3), driver 550.54.15']);
  });

  it('stop({ finalSample }) emits one last sample, kills nvidia-smi, and ends sampling', async () => {
    const h = harness({});
    await h.sampler.start();
    await waitFor('a GPU sample', 10_000, () => h.samples.some((x) => withGpu(x)));
    const loopPid = h.sampler.diagnostics().gpuToolPid!;
    expect(isAlive(loopPid)).toBe(true);
    const before = h.samples.length;
    await h.sampler.stop({ finalSample: true });
    expect(h.samples.length).toBe(before + 1);
    await waitFor('the loop process to be gone', 3000, () => !isAlive(loopPid));
    await new Promise((r) => setTimeout(r, 500));
    expect(h.samples.length).toBe(before + 1);
    const now = await h.sampler.sampleNow(); // still answers on request
    expect(now.node.memory_percent).toBeGreaterThan(0);
  });

  // Issue 9 (the flaky system test): two runs finishing together each take a
  // sample at finish, a few ms apart. /proc/stat moves in 10 ms ticks, so the
  // second one used to come without `cpu`, and so did that run's last row.
  it('samples taken back to back (runs finishing together) all carry cpu', async () => {
    const h = harness({}, {}, false);
    await h.sampler.start();
    await waitFor('a first sample', 5000, () => h.samples.length >= 1);
    const burst = await Promise.all([h.sampler.sampleNow(), h.sampler.sampleNow(), h.sampler.sampleNow()]);
    for (let i = 0; i < 20; i++) burst.push(await h.sampler.sampleNow());
    for (const s of burst) {
      expect(s.node.cpu).toBeGreaterThanOrEqual(0);
      expect(s.node.cpu).toBeLessThanOrEqual(100);
    }
  });

  it('a sampler just started says when its first sample can carry cpu, and a sample then does (a run\'s start sample)', async () => {
    for (let i = 0; i < 10; i++) {
      const h = harness({}, { intervalMs: 60_000 }, false);
      void h.sampler.start();
      const at = h.sampler.cpuMeasurableAt();
      expect(at).toBeGreaterThan(Date.now() - 5);
      expect(at - Date.now()).toBeLessThanOrEqual(1000); // 10 ticks: 100 ms on one CPU at most
      await new Promise((r) => setTimeout(r, Math.max(0, at - Date.now())));
      const s = await h.sampler.sampleNow();
      expect(s.node.cpu, `sample ${i}`).toBeGreaterThanOrEqual(0);
      expect(h.sampler.cpuMeasurableAt()).toBe(0); // a figure is known: now
      await h.sampler.stop();
    }
  });
});
