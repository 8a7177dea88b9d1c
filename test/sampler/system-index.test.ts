// A run's system metrics are read from the system log's index (daemon/sampler/system-index.ts): from the mark
// before the run's start to a little past its end, not from the log's first byte. The same samples as a read of
// the whole log, for runs early, late and running, process keys named long before, after the log grew, after
// the clock went back, and after the log was replaced.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SystemMetrics, runWindow, type RunWindow } from '../../daemon/sampler/system-metrics.js';
import { systemLogIndex } from '../../daemon/sampler/system-index.js';
import { readSystemSlice } from '../../daemon/upload/system-slice.js';
import { scanFrames } from '../../src/frames.js';
import { FrameType, decodeHistory, parseFrameJson } from '../../daemon/store/format.js';
import type { RunRow } from '../../daemon/store/index-db.js';

const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));

type Rows = Array<[number, Record<string, number>]>;

/** The samples of a window as a read of the whole log gives them (what both readers did before the index). */
function reference(file: string, w: RunWindow): Rows {
  const names: string[] = [];
  const out: Rows = [];
  scanFrames(file, (type, p) => {
    if (type === FrameType.KEYS) {
      const k = parseFrameJson<{ first: number; names: string[] }>(p);
      k.names.forEach((n, i) => (names[k.first + i] = n));
      return;
    }
    if (type !== FrameType.HISTORY) return;
    const b = decodeHistory(p);
    if (b.times[0] < w.from || b.times[0] > w.to) return;
    const row: Record<string, number> = {};
    for (let i = 0; i < b.keyIds.length; i++) {
      const name = SystemMetrics.runKey(names[b.keyIds[i]], w);
      if (name !== null) row[name] = b.values[i];
    }
    if (Object.keys(row).length) out.push([b.times[0], row]);
  });
  return out;
}

function viaDaemon(sm: SystemMetrics, w: RunWindow): Rows {
  const names: string[] = [];
  const out: Rows = [];
  sm.readForRun(w, new Set(), (b, added) => {
    names.push(...added);
    const row: Record<string, number> = {};
    for (let i = 0; i < b.keyIds.length; i++) row[names[b.keyIds[i]]] = b.values[i];
    out.push([b.times[0], row]);
  });
  return out;
}

function viaUpload(file: string, span: { createdAt: number; finishedAt: number; pid: number }): Rows {
  const row = { id: 'r', created_at: span.createdAt, finished_at: span.finishedAt, metadata_json: JSON.stringify({ pid: span.pid, writers: [] }) } as RunRow;
  const s = readSystemSlice(file, row);
  if (!s.chunk) return [];
  const name = new Map(s.keys.map((k) => [k.id, k.name]));
  const out: Rows = Array.from(s.chunk.times, (t) => [t, {}] as [number, Record<string, number>]);
  for (const k of s.chunk.keys) {
    for (let j = 0; j < k.vals.length; j++) out[k.idx ? k.idx[j] : j][1][name.get(k.keyId)!] = k.vals[j];
  }
  return out;
}

describe('the system log read by time (its index)', () => {
  it('gives a run exactly the samples of a whole-log read, early, late, running, after growth, a clock set back and a new log', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'logd-sysidx-'));
    dirs.push(dir);
    const file = path.join(dir, 'system', 'records.log');
    let sm = new SystemMetrics(dir, 0, () => {});
    const record = (t: number, pids: number[]) => (sm as unknown as { record(s: unknown): void }).record({
      time: t, node: { cpu: t % 97, 'mem.used': t * 2 }, processes: new Map(pids.map((p) => [p, { 'proc.cpu.percent': p + t / 1000 }])),
    });
    const sync = () => (sm as unknown as { log: { sync(): Promise<void> } }).log.sync();
    // 30 000 samples a second apart; process 7 watched throughout, process 100 + k for a while around k * 1000 s.
    // Every 7th sample is written 20 ms late, after a newer one (as a run's start sample can be).
    for (let i = 0; i < 30_000; i++) {
      const k = Math.floor(i / 1000);
      record(1000 + i, i % 1000 < 300 ? [7, 100 + k] : [7]);
      if (i % 7 === 3) record(1000 + i - 0.02, [7]);
    }
    await sync();
    expect(fs.statSync(file).size).toBeGreaterThan(4 * 256 * 1024); // several marks
    const check = (createdAt: number, finishedAt: number, pid: number, atLeast: number) => {
      const w = runWindow({ createdAt, finishedAt, ownerPid: pid, writers: [] });
      const want = reference(file, w);
      expect(want.length).toBeGreaterThanOrEqual(atLeast);
      expect(viaDaemon(sm, w)).toEqual(want);
      expect(viaUpload(file, { createdAt, finishedAt, pid })).toEqual(want);
    };
    expect(systemLogIndex(file).startFor(0).offset).toBe(0);
    expect(systemLogIndex(file).ordered).toBe(true); // 20 ms out of order is within the index's tolerance
    check(1000, 1010, 7, 10); // before the first mark
    check(16_003.97, 16_003.99, 7, 1); // only a late-written sample
    check(16_000, 16_100, 116, 100); // the middle: process 116's keys, named at 16 000 s
    check(16_000, 16_100, 7, 100); // process 7, named at the log's start
    // And read from the middle, not from the first byte: the mark before 16 000 s is about half way in.
    const mid = systemLogIndex(file).startFor(16_000).offset;
    expect(mid).toBeGreaterThan(fs.statSync(file).size * 0.4);
    expect(mid).toBeLessThan(fs.statSync(file).size * 0.55);
    check(29_500, 0, 7, 499); // running: to the end
    check(40_000, 40_100, 7, 0); // after every sample
    // Grown: the index reads only what was added.
    for (let i = 30_000; i < 31_000; i++) record(1000 + i, [7, 555]);
    await sync();
    check(30_900, 31_100, 555, 99);
    check(16_000, 16_100, 116, 100);
    // A daemon's start: its opening scan of the log builds the index too (its first read scans nothing more).
    sm.close();
    sm = new SystemMetrics(dir, 0, () => {});
    expect((systemLogIndex(file) as unknown as { scanned: number }).scanned).toBe(fs.statSync(file).size);
    expect(systemLogIndex(file).startFor(16_000).offset).toBe(mid);
    check(16_000, 16_100, 116, 100);
    check(29_500, 0, 7, 499);
    // The clock set back: a sample much older than the last. Reads then take the whole log, and still agree.
    record(20_000.5, [7]);
    await sync();
    check(20_000, 20_001, 7, 3);
    expect(systemLogIndex(file).ordered).toBe(false);
    // A new log in the same place (the old one removed): indexed afresh.
    sm.close();
    fs.rmSync(file);
    sm = new SystemMetrics(dir, 0, () => {});
    for (let i = 0; i < 500; i++) record(100_000 + i, [9]);
    await sync();
    check(100_100, 100_200, 9, 100);
    expect(systemLogIndex(file).ordered).toBe(true);
    sm.close();
  }, 60_000);
});
