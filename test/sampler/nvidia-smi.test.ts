import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  GPU_QUERY_FIELDS,
  parseComputeApps,
  parseGpuLine,
  parseNumber,
  resolveExecutable,
  type GpuReading,
} from '../../daemon/sampler/nvidia-smi.js';
import { FIXTURES, useFakePath } from './helpers.js';

const MiB = 1024 * 1024;
const fixture = (name: string): string => readFileSync(join(FIXTURES, name), 'utf8');
const lines = (name: string): string[] => fixture(name).split('\n').filter((l) => l.trim() !== '');
function readings(name: string): GpuReading[] {
  return lines(name).map((l) => {
    const r = parseGpuLine(l);
    if (!r.ok) throw new Error(r.reason);
    return r.value;
  });
}

// The H100 cases read real captures (test/fixtures/nvidia-smi/h100, one H100
// 80GB HBM3 SXM, driver 580.159.04, taken with exactly GPU_QUERY_FIELDS). The
// other GPUs' quirks ([Not Supported] on a vGPU, a fan on a consumer board, a
// short line) have no real capture here and keep their written fixtures.
const H100 = 'h100/';

describe('nvidia-smi query fields', () => {
  it('are exactly the list the fixtures were captured for', () => {
    expect(fixture('gpu-fields.txt').trim()).toBe(GPU_QUERY_FIELDS.join(','));
    // The real capture with a header names one column per field, in that order.
    const header = lines(`${H100}loaded-query-gpu-with-header.csv`)[0]!.split(', ');
    expect(header).toHaveLength(GPU_QUERY_FIELDS.length);
    expect(header[0]).toBe('index');
    expect(header.at(-1)).toBe('name');
  });
});

describe('parseGpuLine', () => {
  it('reads every metric of a real loaded H100, leaving out its [N/A] fan speed', () => {
    const [g] = readings(`${H100}loaded-query-gpu.csv`);
    expect(g).toMatchObject({
      index: 0,
      uuid: 'GPU-476d9bb0-d0c4-e9ad-d81b-95e494810aff',
      name: 'NVIDIA H100 80GB HBM3',
      driverVersion: '580.159.04',
      memoryTotalBytes: 81559 * MiB,
    });
    expect(g!.metrics).toEqual({
      gpu: 99,
      memory: 30,
      memoryAllocatedBytes: 3277 * MiB,
      memoryAllocated: expect.closeTo((3277 / 81559) * 100, 9),
      temp: 50,
      powerWatts: 710.04,
      enforcedPowerLimitWatts: 700,
      powerPercent: expect.closeTo((710.04 / 700) * 100, 9),
      smClock: 1350,
      memoryClock: 2619,
      pcieLinkGen: 5,
      pcieLinkWidth: 16,
      correctedMemoryErrors: 0,
      uncorrectedMemoryErrors: 0,
    });
    expect(g!.metrics).not.toHaveProperty('fanSpeed');
  });

  it('keeps a power draw above the enforced limit as it is (percent over 100), frame after frame of the -lms loop', () => {
    const loop = readings(`${H100}loaded-query-gpu-loop-lms500.csv`);
    expect(loop).toHaveLength(6);
    expect(loop.every((r) => r.index === 0 && r.name === 'NVIDIA H100 80GB HBM3')).toBe(true);
    expect(loop[0]!.metrics.powerWatts).toBe(709.75);
    expect(loop[0]!.metrics.powerPercent).toBeGreaterThan(100);
    expect(loop.some((r) => r.metrics.powerPercent! < 100)).toBe(true);
    expect(loop.every((r) => r.metrics.fanSpeed === undefined)).toBe(true);
  });

  it('reads an idle H100: 0 MiB used is a real 0, not absent', () => {
    const [once] = readings(`${H100}idle-query-gpu.csv`);
    expect(once!.metrics.memoryAllocatedBytes).toBe(0);
    expect(once!.metrics.memoryAllocated).toBe(0);
    expect(once!.metrics.gpu).toBe(0);
    // The idle loop wobbles: one frame reports 1 MiB used with nothing running.
    const loop = readings(`${H100}idle-query-gpu-loop-lms500.csv`);
    expect(loop.map((r) => r.metrics.memoryAllocatedBytes)).toEqual([0, 0, 0, 0, MiB, 0]);
    expect(loop.every((r) => r.metrics.powerPercent! < 11)).toBe(true);
  });

  it('reads a real H200 (driver 580): power-capped under load, idle at 345 MHz', () => {
    const [g] = readings('h200/loaded-query-gpu.csv');
    expect(g).toMatchObject({ index: 0, name: 'NVIDIA H200', driverVersion: '580.159.04', memoryTotalBytes: 143771 * MiB });
    expect(g!.metrics).toMatchObject({ gpu: 98, memoryAllocatedBytes: 2853 * MiB, powerWatts: 695.7, enforcedPowerLimitWatts: 700, smClock: 1470 });
    expect(g!.metrics).not.toHaveProperty('fanSpeed');
    const loop = readings('h200/loaded-query-gpu-loop-lms500.csv');
    expect(loop).toHaveLength(6);
    expect(loop.every((r) => r.metrics.powerPercent! > 98 && r.metrics.smClock! < 1980)).toBe(true);
    const idle = readings('h200/idle-query-gpu-loop-lms500.csv');
    expect(idle.every((r) => r.metrics.gpu === 0 && r.metrics.memoryAllocatedBytes === 0 && r.metrics.smClock === 345)).toBe(true);
    expect(parseComputeApps(fixture('h200/loaded-compute-apps.csv'))).toEqual([
      { pid: 560, gpuUuid: 'GPU-10385aac-5d43-1a92-ae79-c7447fef14d2', usedMemoryBytes: 2844 * MiB },
    ]);
    expect(fixture('h200/idle-compute-apps.csv')).toBe('');
  });

  it('reads an 8-GPU frame (written fixture: frames, index order, a throttled clock)', () => {
    const all = readings('h100x8.csv');
    expect(all.map((r) => r.index)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7]);
    expect(all[11]!.metrics.smClock).toBe(1755); // GPU 3 throttled in the second frame
  });

  it('reads a 1-GPU consumer node: fan speed present, ECC [N/A] absent', () => {
    const [g] = readings('gpu1-rtx4090.csv');
    expect(g!.name).toBe('NVIDIA GeForce RTX 4090');
    expect(g!.metrics.fanSpeed).toBe(54);
    expect(g!.metrics.pcieLinkGen).toBe(4);
    expect(g!.metrics.powerPercent).toBeCloseTo((391.25 / 450) * 100, 9);
    expect(g!.metrics).not.toHaveProperty('correctedMemoryErrors');
    expect(g!.metrics).not.toHaveProperty('uncorrectedMemoryErrors');
  });

  it('leaves out [Not Supported], [N/A] and [Unknown Error] fields and what derives from them', () => {
    const [vgpu, broken] = readings('not-supported.csv');
    expect(vgpu!.metrics).toEqual({
      gpu: 23,
      memoryAllocatedBytes: 4096 * MiB,
      memoryAllocated: expect.closeTo((4096 / 15360) * 100, 9),
      smClock: 1590,
      memoryClock: 5000,
      correctedMemoryErrors: 0,
      uncorrectedMemoryErrors: 0,
    });
    expect(broken!.metrics).toEqual({});
    expect(broken!.memoryTotalBytes).toBe(15360 * MiB);
    expect(broken!.name).toBe('GRID T4-16Q');
  });

  it('keeps the leading columns of a line with missing columns', () => {
    const [, short] = readings('missing-column.csv');
    expect(short!.index).toBe(1);
    expect(short!.metrics).toEqual({
      gpu: 57,
      memory: 31,
      temp: 49,
      memoryAllocatedBytes: 40958 * MiB,
      memoryAllocated: expect.closeTo((40958 / 81559) * 100, 9),
    });
    expect(short!.name).toBeNull();
  });

  it('rejects the driver error line and other non-GPU lines with the line as reason', () => {
    const r = parseGpuLine(lines('driver-error.txt')[0]!);
    expect(r.ok).toBe(false);
    expect(!r.ok && r.reason).toContain("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver");
    const [lost, ok] = lines('gpu-lost.txt').map((l) => parseGpuLine(l));
    expect(lost!.ok).toBe(false);
    expect(ok!.ok).toBe(true);
    expect(parseGpuLine('').ok).toBe(false);
    expect(parseGpuLine('1.5, GPU-x, 1').ok).toBe(false);
  });

  it('re-joins a GPU name that contains a comma (name is the last field)', () => {
    const line = lines('h100x8.csv')[0]!.replace('NVIDIA H100 80GB HBM3', 'Acme, Inc. X1');
    const r = parseGpuLine(line);
    expect(r.ok && r.value.name).toBe('Acme, Inc. X1');
    expect(r.ok && r.value.metrics.gpu).toBe(98);
  });

  it('parses with a reduced field list (a field this driver lacks was dropped)', () => {
    const fields = ['index', 'uuid', 'utilization.gpu', 'name'];
    const r = parseGpuLine('2, GPU-abc, 77, NVIDIA A100-SXM4-40GB', fields);
    expect(r.ok && r.value).toMatchObject({ index: 2, uuid: 'GPU-abc', name: 'NVIDIA A100-SXM4-40GB', metrics: { gpu: 77 } });
  });
});

describe('parseNumber', () => {
  it('accepts plain numbers and a stray unit, refuses every non-value', () => {
    expect(parseNumber(' 612.37 ')).toBe(612.37);
    expect(parseNumber('35 %')).toBe(35);
    expect(parseNumber('700.00 W')).toBe(700);
    expect(parseNumber('-3')).toBe(-3);
    for (const bad of ['[N/A]', 'N/A', '[Not Supported]', '[Unknown Error]', '[GPU is lost]', '', '  ', 'abc', undefined]) {
      expect(parseNumber(bad)).toBeUndefined();
    }
  });
});

describe('parseComputeApps', () => {
  it('reads a real H100 capture: one process, and an empty answer (0 bytes) when idle', () => {
    expect(parseComputeApps(fixture(`${H100}loaded-compute-apps.csv`))).toEqual([
      { pid: 836, gpuUuid: 'GPU-476d9bb0-d0c4-e9ad-d81b-95e494810aff', usedMemoryBytes: 3268 * MiB },
    ]);
    expect(fixture(`${H100}idle-compute-apps.csv`)).toBe('');
    expect(parseComputeApps(fixture(`${H100}idle-compute-apps.csv`))).toEqual([]);
  });

  it('maps every process to its GPU memory, one row per (pid, GPU)', () => {
    const apps = parseComputeApps(fixture('compute-apps-h100x8.csv'));
    expect(apps).toHaveLength(9);
    expect(apps.filter((a) => a.pid === 412873).map((a) => a.usedMemoryBytes)).toEqual([71920 * MiB, 494 * MiB]);
    expect(apps[7]).toEqual({ pid: 412880, gpuUuid: 'GPU-d4c3b2a1-1234-4abc-9def-0123456789ab', usedMemoryBytes: 71918 * MiB });
  });

  it('keeps a process whose memory is [N/A] with null bytes, and ignores "No running processes found"', () => {
    expect(parseComputeApps(fixture('compute-apps-na.csv'))).toEqual([
      { pid: 23817, gpuUuid: 'GPU-3f1b2c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d', usedMemoryBytes: null },
      { pid: 23818, gpuUuid: 'GPU-3f1b2c4d-5e6f-7a8b-9c0d-1e2f3a4b5c6d', usedMemoryBytes: 3712 * MiB },
    ]);
    expect(parseComputeApps(fixture('compute-apps-none.txt'))).toEqual([]);
    expect(parseComputeApps(fixture('driver-error.txt'))).toEqual([]);
  });
});

describe('resolveExecutable', () => {
  it('finds nvidia-smi through PATH and reports its absence as null', () => {
    const withFake = useFakePath(true);
    try {
      expect(resolveExecutable('nvidia-smi')).toBe(join(withFake.dir, 'nvidia-smi'));
    } finally {
      withFake.restore();
    }
    const without = useFakePath(false);
    try {
      expect(resolveExecutable('nvidia-smi')).toBeNull();
      expect(resolveExecutable('/nonexistent/nvidia-smi')).toBeNull();
    } finally {
      without.restore();
    }
  });
});
