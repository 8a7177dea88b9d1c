// Shared pieces of the chaos suites: a trainer-like worker whose every value
// is a function of (rank, step, metric), so stored data can be checked
// exactly, and the checks themselves.
import { expect } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { script, cli, cliJson, type TestEnv } from './helpers.js';

/** Longer variants run with LOGD_SOAK=1 (`LOGD_SOAK=1 npx vitest run test/chaos-*.test.ts`). */
export const SOAK = process.env.LOGD_SOAK === '1';
/** Per-test timeout: 5 min, or 30 min for a soak. */
export const TEST_MS = SOAK ? 1_800_000 : 300_000;

export const METRICS = 10;
export const value = (rank: number, step: number, m: number) => rank * 1e7 + step * 16 + m;

/**
 * Worker: `node worker.mjs RANK STEPS [GO_FILE]`. Logs STEPS rows of METRICS
 * values in chunks (yielding between them, as a training loop would), prints
 * `run ID`, `acked N` after each successful flush when asked, the worst log()
 * and chunk latency, and `finished STATE` at the end.
 */
export function chaosWorker(t: TestEnv, opts: { flushEvery?: number; chunk?: number; pauseMs?: number } = {}): string {
  const flushEvery = opts.flushEvery ?? 0;
  const chunk = opts.chunk ?? 200;
  const pauseMs = opts.pauseMs ?? 1;
  return script(t, 'chaos-worker.mjs', `
    import fs from 'node:fs';
    const rank = Number(process.argv[2]);
    const steps = Number(process.argv[3]);
    const go = process.argv[4];
    const run = await logd.init({ project: 'chaos', name: 'rank' + rank, group: 'chaos' });
    console.log('run ' + run.id);
    if (go) while (!fs.existsSync(go)) await new Promise((r) => setTimeout(r, 10));
    let worstLog = 0, worstChunk = 0, lastProblem = null;
    for (let s = 0; s < steps; s += ${chunk}) {
      const c0 = performance.now();
      for (let step = s; step < Math.min(steps, s + ${chunk}); step++) {
        const row = {};
        for (let m = 0; m < ${METRICS}; m++) row['m' + m] = rank * 1e7 + step * 16 + m;
        const t0 = performance.now();
        run.log(row, { step });
        worstLog = Math.max(worstLog, performance.now() - t0);
      }
      worstChunk = Math.max(worstChunk, performance.now() - c0);
      if (run.problem && run.problem !== lastProblem) console.log('problem ' + run.problem);
      lastProblem = run.problem;
      if (${flushEvery} > 0 && (s / ${chunk}) % ${flushEvery} === ${flushEvery} - 1) {
        const upTo = Math.min(steps, s + ${chunk});
        if (await run.flush(2000)) console.log('acked ' + upTo);
      } else await new Promise((r) => setTimeout(r, ${pauseMs}));
    }
    console.log('logged ' + JSON.stringify({ worstLog, worstChunk }));
    const res = await run.finish({ timeoutMs: Number(process.env.CHAOS_FINISH_MS ?? 60000) });
    console.log('finished ' + res.state + ' ' + res.message);
  `);
}

export function runIdOf(lines: string[]): string | undefined {
  return lines.find((l) => l.startsWith('run '))?.slice(4);
}

export function lastAcked(lines: string[]): number {
  let n = 0;
  for (const l of lines) if (l.startsWith('acked ')) n = Math.max(n, Number(l.slice(6)));
  return n;
}

/** Every step 0..steps-1 stored exactly once with exactly the worker's values (read through a file: soak runs export GBs). */
export async function expectExactlyOnce(t: TestEnv, runId: string, rank: number, steps: number): Promise<void> {
  const info = await cliJson(t, ['show', runId]);
  const file = path.join(t.dir, `export-${runId}.jsonl`);
  await cli(t, ['export', runId, '--format', 'jsonl', '--raw', '--output', file, '--force'], { timeout: 600_000 });
  const seen = new Uint8Array(steps);
  const dups: number[] = [];
  let rows = 0;
  let outside = 0;
  for await (const line of readline.createInterface({ input: fs.createReadStream(file) })) {
    if (!line) continue;
    const r = JSON.parse(line) as Record<string, number>;
    rows++;
    const s = r._step;
    if (!(s >= 0 && s < steps)) outside++;
    else if (seen[s]++) dups.push(s);
    for (let m = 0; m < METRICS; m++) if (r[`m${m}`] !== value(rank, s, m)) throw new Error(`run ${runId} step ${s} m${m} is ${r[`m${m}`]}, not ${value(rank, s, m)}`);
  }
  fs.rmSync(file, { force: true });
  const missing: number[] = [];
  for (let s = 0; s < steps && missing.length < 10; s++) if (!seen[s]) missing.push(s);
  expect({ run: runId, dups: dups.slice(0, 10), missing, outside }).toEqual({ run: runId, dups: [], missing: [], outside: 0 });
  expect(rows).toBe(steps);
  expect(info.historyRows).toBe(steps);
}
