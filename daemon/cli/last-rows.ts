// `logd show`'s last rows, merged by step, read from the tail of the log only.
// A shared run's writers log the same steps at different moments, so the last
// rows of the log need not hold every writer's part of the last steps: the
// tail grows until each writer's rows reach back before the steps shown (or
// the whole log is read), and a step the tail cuts through is left out.
import { mergeBySteps, rowObject, type History } from '../../client/history.js';
import type { QuerySource } from '../query/index.js';

/** Rows read at most for the last rows (the tail grows x4 up to this). */
const MAX_TAIL = 1 << 20;

export async function lastRows(src: QuerySource, id: string, rows: number, historyRows: number, writerIdx: number[]): Promise<Array<Record<string, unknown>>> {
  if (rows <= 0 || historyRows <= 0) return [];
  let tail = rows * 8 * Math.max(1, writerIdx.length);
  for (;;) {
    const h = await src.history(id, { tailRows: tail });
    const whole = h.rows < tail || h.rows >= historyRows;
    const merged = mergeBySteps(h);
    const shown = whole ? merged : withoutFirstStep(h, merged);
    const last = shown.slice(-rows);
    if (whole || tail >= MAX_TAIL || last.length === 0 || reachesBack(h, writerIdx, h.steps[last[0][0]])) {
      return last.map((g) => rowObject(h, g, false));
    }
    tail = Math.min(MAX_TAIL, tail * 4);
  }
}

/** The first step of a cut tail may lack rows that lie before the cut. */
function withoutFirstStep(h: History, merged: number[][]): number[][] {
  if (merged.length === 0) return merged;
  const first = h.steps[merged[0][0]];
  return merged.filter((g) => h.steps[g[0]] !== first);
}

/** Every writer has a row in the tail before `step`: its rows of the steps from `step` on are all there. */
function reachesBack(h: History, writerIdx: number[], step: number): boolean {
  const earliest = new Map<number, number>();
  for (let r = 0; r < h.rows; r++) {
    const w = h.writers[r];
    const e = earliest.get(w);
    if (e === undefined || h.steps[r] < e) earliest.set(w, h.steps[r]);
  }
  return writerIdx.every((w) => (earliest.get(w) ?? Infinity) < step);
}
