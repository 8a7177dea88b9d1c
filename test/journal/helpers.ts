// What the crash journal's tests share (test/journal/kill.test.ts,
// records.test.ts): a trainer that logs at full speed, and checks that a run
// holds every step a killed writer printed, exactly once.
import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'vitest';
import { script, cliJson, exportJsonl, waitUntil, ROOT, type TestEnv } from '../helpers.js';

export const distJournal = path.join(ROOT, 'dist', 'client', 'journal.js');
export const distReader = path.join(ROOT, 'dist', 'daemon', 'runs', 'journal.js');
const addon = path.join(ROOT, 'dist', 'addon', 'logd_addon.node');
export const NO_ADDON = !fs.existsSync(addon) ? `skipped: ${addon} is not built (make build needs a C compiler)` : '';

/** A trainer that logs at full speed and prints, synchronously, the last step whose log() returned. */
export function trainer(env: TestEnv, name = 'trainer.mjs'): string {
  return script(env, name, `
    import fs from 'node:fs';
    const run = await logd.init({ project: 'journal', name: process.argv[2] ?? 'w', group: 'chaos' });
    fs.writeSync(1, 'run ' + run.id + '\\n');
    const how = process.argv[3] ?? 'wait';
    let step = 0;
    for (;;) {
      run.log({ loss: step, acc: step / 2, lr: { g0: 0.1, g1: 0.2 }, tokens: step * 8 }, { step });
      if (step % 97 === 0) fs.writeSync(1, 'logged ' + step + '\\n');
      step++;
      if (how === 'abort' && step === 3000) { fs.writeSync(1, 'logged ' + (step - 1) + '\\n'); process.abort(); }
      if (how === 'segv' && step === 3000) { fs.writeSync(1, 'logged ' + (step - 1) + '\\n'); process.kill(process.pid, 'SIGSEGV'); await new Promise((r) => setTimeout(r, 1000)); }
      if (how === 'oom' && step === 3000) {
        fs.writeSync(1, 'logged ' + (step - 1) + '\\n');
        const hog = [];
        for (;;) hog.push(Buffer.alloc(16 << 20, 1));
      }
      if (step % 400 === 0) await new Promise((r) => setImmediate(r)); // the event loop sends batches and takes acks
    }
  `);
}

export function lastLogged(lines: string[]): number {
  let last = -1;
  for (const l of lines) if (l.startsWith('logged ')) last = Math.max(last, Number(l.slice(7)));
  return last;
}

/**
 * The run's stored steps are exactly 0..n-1 (no gap, no duplicate), and n covers every printed step; or, where the
 * writer outran the daemon by more than its journal, every step missing up to the last printed or stored one is
 * counted by the run as beyond the journal's bound.
 */
export async function expectWhole(env: TestEnv, runId: string, printed: number): Promise<number> {
  const rows = await exportJsonl(env, runId, ['--raw', '--keys', 'loss']);
  const steps = rows.map((r) => Number(r._step));
  expect(new Set(steps).size, `run ${runId}: a step stored twice`).toBe(steps.length);
  const sorted = [...steps].sort((a, b) => a - b);
  const last = Math.max(sorted[sorted.length - 1] ?? -1, printed);
  const missing = last + 1 - sorted.length;
  if (missing > 0) {
    // The journal is bounded (LOGD_JOURNAL_MB): a trainer that outruns a lagging daemon (8 writers flat out on 2
    // cores) by more than the ring keeps the excess in memory only, and a kill loses what the daemon had not
    // received, in the middle or at the end. That is never silent: the run counts those rows, and they must account
    // for every missing step.
    const info = await cliJson(env, ['show', runId]);
    const counted = ((info.metadata?.journal?.problems ?? []) as string[])
      .map((p) => Number(/: (\d+) row\(s\) did not fit the journal/.exec(p)?.[1] ?? 0)).reduce((a, b) => a + b, 0);
    expect(counted, `run ${runId}: printed ${printed} as logged, ${sorted.length} step(s) stored up to ${sorted[sorted.length - 1] ?? -1}: ${missing} missing, and only ${counted} counted as beyond the journal's bound`).toBeGreaterThanOrEqual(missing);
    process.stderr.write(`journal test: run ${runId}: ${missing} rows were beyond the journal's bound (counted by the run)\n`);
  } else {
    expect(sorted, `run ${runId}: a gap`).toEqual(Array.from({ length: sorted.length }, (_, i) => i));
  }
  return sorted.length;
}

/** Every step 0..upTo is stored exactly once (rows past the journal's bound may be missing above it). */
export async function expectPrefixWhole(env: TestEnv, runId: string, upTo: number): Promise<boolean> {
  const rows = await exportJsonl(env, runId, ['--raw', '--keys', 'loss']);
  const steps = rows.map((r) => Number(r._step));
  expect(new Set(steps).size, `run ${runId}: a step stored twice`).toBe(steps.length);
  const have = new Set(steps);
  const missing: number[] = [];
  for (let s = 0; s <= upTo && missing.length < 10; s++) if (!have.has(s)) missing.push(s);
  expect(missing, `run ${runId}: steps up to ${upTo} missing`).toEqual([]);
  return steps.reduce((m, s) => Math.max(m, s), -1) + 1 !== steps.length; // a gap above upTo
}

export async function waitFinal(env: TestEnv, runId: string): Promise<any> {
  let info: any;
  await waitUntil(async () => {
    info = await cliJson(env, ['show', runId]);
    return ['crashed', 'finished', 'killed'].includes(info.state);
  }, 30_000, `run ${runId} to be final`);
  return info;
}
