// The node's system metrics over one run's lifetime, as the run sees them
// (its owner's process metrics unprefixed, other writers' as writer<idx>/…),
// gathered from the node's system log into one chunk of the system stream.
import { FrameType, decodeHistory, parseFrameJson } from '../store/format.js';
import { SystemMetrics, runWindow } from '../sampler/system-metrics.js';
import { systemLogIndex, StopRead, STOP_AFTER_S } from '../sampler/system-index.js';
import { scanFrames } from '../../src/frames.js';
import { ChunkBuilder, type Chunk } from './slice.js';
import type { RunRow } from '../store/index-db.js';

export interface SystemSlice {
  keys: Array<{ id: number; name: string }>;
  chunk: Chunk | null;
  rows: number;
}

export function readSystemSlice(systemLog: string, row: RunRow): SystemSlice {
  const meta = JSON.parse(row.metadata_json || '{}') as { pid?: number; writers?: Array<{ idx: number; pid: number }> };
  const w = runWindow({ createdAt: row.created_at, finishedAt: row.finished_at, ownerPid: meta.pid ?? -1, writers: meta.writers ?? [] });
  const names: string[] = [];
  const nameIds = new Map<string, number>();
  const map: number[] = []; // stored id -> the run's id, -1: not the run's
  let builder: ChunkBuilder | null = null;
  let rows = 0;
  const keys = (first: number, stored: string[]) => {
    stored.forEach((s, i) => {
      const name = SystemMetrics.runKey(s, w);
      if (name === null) return void (map[first + i] = -1);
      let id = nameIds.get(name);
      if (id === undefined) (id = names.length, names.push(name), nameIds.set(name, id));
      map[first + i] = id;
    });
  };
  // From the index's mark before the run's start to the first sample past its end (daemon/sampler/system-index.ts),
  // in 256 KB reads (not two reads a frame: a log of dense samples made that a million system calls a minute).
  const ix = systemLogIndex(systemLog);
  const start = ix.startFor(w.from);
  keys(0, start.names);
  const stopAt = ix.ordered ? w.to + STOP_AFTER_S : Infinity;
  try {
    scanFrames(systemLog, (type, p, offset) => {
      if (type === FrameType.KEYS) {
        const k = parseFrameJson<{ first: number; names: string[] }>(p);
        return void keys(k.first, k.names);
      }
      if (type !== FrameType.HISTORY) return;
      const b = decodeHistory(p);
      if (b.rows > 0 && b.times[0] > stopAt) throw new StopRead();
      if (b.rows === 0 || b.times[0] < w.from || b.times[0] > w.to) return;
      const ids: number[] = [];
      const vals: number[] = [];
      for (let i = 0; i < b.keyIds.length; i++) {
        const id = map[b.keyIds[i]];
        if (id !== undefined && id >= 0) (ids.push(id), vals.push(b.values[i]));
      }
      if (!ids.length) return;
      builder ??= new ChunkBuilder(0, offset);
      builder.add({ ...b, writerIdx: 0, counts: new Uint32Array([ids.length]), keyIds: new Uint32Array(ids), values: new Float64Array(vals) });
      rows++;
    }, 256 * 1024, start.offset);
  } catch (e) {
    if (!(e instanceof StopRead)) throw e;
  }
  const chunk = builder ? (builder as ChunkBuilder).build() : null;
  const used = new Set(chunk?.keys.map((k) => k.keyId) ?? []);
  return { keys: names.map((name, id) => ({ id, name })).filter((k) => used.has(k.id)), chunk, rows };
}
