// The shared store's rows of a rewound run, as the local daemon gives them:
// the latest timeline (rows a later attempt's resume_from superseded left
// out), or every attempt's rows marked. The shared store keeps rows by writer,
// not by attempt, so a writer's attempt comes from the run's metadata: the
// last attempt that started before the writer joined (a writer joins its
// attempt right after the attempt's ATTEMPT frame; store/timeline.ts).
import type { History } from '../../client/history.js';
import { Timeline } from '../store/timeline.js';

interface Meta {
  attempts?: Array<{ n: number; startedAt: number; resumedFromStep?: number }>;
  writers?: Array<{ idx: number; joinedAt: number }>;
}

/** `h` as a reader asked for it: unchanged for a run never rewound (and `all` not asked). */
export function latestTimeline(h: History, metadataJson: string, all: boolean): History {
  let meta: Meta;
  try {
    meta = JSON.parse(metadataJson || '{}') as Meta;
  } catch {
    return h;
  }
  const attempts = meta.attempts ?? [];
  const timeline = Timeline.of(attempts, all);
  if (!timeline) return h;
  const byStart = [...attempts].sort((a, b) => a.startedAt - b.startedAt);
  const writerAttempt: number[] = [];
  for (const w of meta.writers ?? []) writerAttempt[w.idx] = byStart.filter((a) => a.startedAt <= w.joinedAt).pop()?.n ?? 1;
  const attemptOf = new Uint32Array(h.rows);
  const superseded = new Uint8Array(h.rows);
  let kept = 0;
  for (let r = 0; r < h.rows; r++) {
    attemptOf[r] = writerAttempt[h.writers[r]] ?? 1;
    superseded[r] = h.steps[r] > timeline.cutoffOf(attemptOf[r]) ? 1 : 0;
    if (!superseded[r]) kept++;
  }
  if (all) return { ...h, attempts: attemptOf, superseded };
  if (kept === h.rows) return h;
  const rows: number[] = [];
  for (let r = 0; r < h.rows; r++) if (!superseded[r]) rows.push(r);
  return pickRows(h, rows);
}

/** The history with only these rows, in order (also the dashboard's superseded rows, daemon/ui/superseded.ts). */
export function pickRows(h: History, rows: number[]): History {
  let pairs = 0;
  for (const r of rows) pairs += h.start[r + 1] - h.start[r];
  const out: History = {
    keys: h.keys, rows: rows.length, steps: new Float64Array(rows.length), times: new Float64Array(rows.length), writers: new Uint32Array(rows.length),
    start: new Uint32Array(rows.length + 1), keyIds: new Uint32Array(pairs), values: new Float64Array(pairs),
  };
  let p = 0;
  rows.forEach((r, i) => {
    out.steps[i] = h.steps[r];
    out.times[i] = h.times[r];
    out.writers[i] = h.writers[r];
    out.start[i] = p;
    out.keyIds.set(h.keyIds.subarray(h.start[r], h.start[r + 1]), p);
    out.values.set(h.values.subarray(h.start[r], h.start[r + 1]), p);
    p += h.start[r + 1] - h.start[r];
  });
  out.start[rows.length] = p;
  return out;
}
