// Chaos under load: 64 writer processes against one daemon on a 2-core box
// (no hang, no loss, the time recorded), and one client flooding while
// others log (they still progress; the flood is slowed, not dropped).
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, startDaemon, spawnScript, script, waitUntil, alive, cliJson, exportJsonl, type TestEnv } from './helpers.js';
import { SOAK, TEST_MS, chaosWorker, runIdOf, expectExactlyOnce } from './chaos-helpers.js';

let t: TestEnv;
afterEach(async () => t && (await t.cleanup()));

async function inBatches<X>(xs: X[], n: number, fn: (x: X, i: number) => Promise<void>): Promise<void> {
  for (let i = 0; i < xs.length; i += n) await Promise.all(xs.slice(i, i + n).map((x, j) => fn(x, i + j)));
}

export const loadFigures: Record<string, unknown> = {};

describe('many at once', () => {
  const WRITERS = 64;
  const STEPS = Number(process.env.LOGD_LOAD_STEPS ?? (SOAK ? 100_000 : 10_000));
  it(`${WRITERS} writer processes x ${STEPS} steps x 10 metrics against one daemon: no hang, no loss`, async () => {
    t = makeEnv({ LOGD_SAMPLE_INTERVAL_MS: '2000' });
    const d = await startDaemon(t);
    const go = path.join(t.dir, 'go');
    const worker = chaosWorker(t, { chunk: 1000, pauseMs: 0 });
    const t0 = Date.now();
    const workers = Array.from({ length: WRITERS }, (_, r) => spawnScript(t, worker, [String(r), String(STEPS), go], { LOGD_NO_AUTOSTART: '1', CHAOS_FINISH_MS: '240000' }));
    await waitUntil(() => workers.every((w) => runIdOf(w.lines) || w.exitCode !== null), 180_000, 'every writer to create its run');
    expect(workers.filter((w) => !runIdOf(w.lines)).length).toBe(0);
    const started = Date.now();
    fs.writeFileSync(go, '');
    await waitUntil(() => workers.every((w) => w.lines.some((l) => l.startsWith('finished')) || w.exitCode !== null), 300_000, 'every writer to finish');
    const ms = Date.now() - started;
    const bad = workers.filter((w) => !w.lines.some((l) => /^finished finished/.test(l))).map((w) => ({ pid: w.pid, code: w.exitCode, signal: w.signalCode, last: w.lines.slice(-4) }));
    expect(bad).toEqual([]);
    expect(alive(d.pid)).toBe(true);
    const worstLog = Math.max(...workers.map((w) => JSON.parse(w.lines.find((l) => l.startsWith('logged '))!.slice(7)).worstLog));
    // Every run: row count exact; values of every row checked exactly.
    await inBatches(workers, 4, (w, rank) => expectExactlyOnce(t, runIdOf(w.lines)!, rank, STEPS));
    const points = WRITERS * STEPS * 10;
    Object.assign(loadFigures, { writers: WRITERS, steps: STEPS, points, startMs: started - t0, logToFinishMs: ms, pointsPerSec: Math.round(points / (ms / 1000)), worstLogMs: worstLog });
    console.log(`load: ${WRITERS} writers x ${STEPS} steps x 10 metrics = ${points} points; start of 64 processes ${started - t0} ms; first log to last finish ${ms} ms (${Math.round(points / (ms / 1000))} points/s); worst log() ${worstLog.toFixed(2)} ms; 0 lost, 0 duplicated`);
  }, TEST_MS);
});

describe('one client flooding', () => {
  it('the other clients still make progress, and the flooding client is slowed by backpressure, not dropped', async () => {
    t = makeEnv({ LOGD_SAMPLE_INTERVAL_MS: '0' });
    const d = await startDaemon(t);
    const SECONDS = SOAK ? 60 : 12;
    const flood = script(t, 'flood.mjs', `
      const run = await logd.init({ project: 'fair', name: 'flood' });
      console.log('run ' + run.id);
      const end = Date.now() + ${SECONDS} * 1000;
      let step = 0, sawProblem = '';
      const row = {};
      while (Date.now() < end) {
        for (let i = 0; i < 2000; i++) {
          for (let m = 0; m < 50; m++) row['f' + m] = step * 64 + m;
          run.log(row, { step: step++ });
        }
        if (run.problem && !sawProblem) sawProblem = run.problem;
        await new Promise((r) => setImmediate(r));
      }
      console.log('logged ' + JSON.stringify({ steps: step, sawProblem }));
      const res = await run.finish({ timeoutMs: 240000 });
      console.log('finished ' + res.state + ' ' + res.message);
    `);
    const polite = script(t, 'polite.mjs', `
      const run = await logd.init({ project: 'fair', name: 'polite' + process.argv[2] });
      console.log('run ' + run.id);
      const end = Date.now() + ${SECONDS} * 1000;
      let step = 0, worstFlush = 0, flushes = 0;
      while (Date.now() < end) {
        for (let i = 0; i < 50; i++, step++) run.log({ loss: step, acc: step / 2 }, { step });
        const t0 = performance.now();
        const ok = await run.flush(60000);
        worstFlush = Math.max(worstFlush, performance.now() - t0);
        if (ok) flushes++;
        await new Promise((r) => setTimeout(r, 100));
      }
      const res = await run.finish({ timeoutMs: 120000 });
      console.log('done ' + JSON.stringify({ steps: step, worstFlush, flushes, state: res.state }));
    `);
    const env = { LOGD_NO_AUTOSTART: '1', LOGD_MAX_BUFFER_MB: '16' };
    const flooder = spawnScript(t, flood, [], env);
    await waitUntil(() => !!runIdOf(flooder.lines), 30_000, 'the flooder to start');
    await new Promise((r) => setTimeout(r, 1000)); // the flood is on
    const others = [0, 1, 2].map((i) => spawnScript(t, polite, [String(i)], env));
    await waitUntil(() => others.every((o) => o.lines.some((l) => l.startsWith('done'))), 240_000, 'the polite clients to finish');
    await waitUntil(() => flooder.lines.some((l) => l.startsWith('finished')), 240_000, 'the flooder to finish');
    expect(alive(d.pid)).toBe(true);
    const figures: Record<string, unknown> = {};
    for (const [i, o] of others.entries()) {
      const done = JSON.parse(o.lines.find((l) => l.startsWith('done'))!.slice(5));
      expect(done.state).toBe('finished');
      // Progress during the flood: most flushes came back, none took longer than 10 s.
      expect(done.flushes).toBeGreaterThan(0);
      expect(done.worstFlush).toBeLessThan(10_000);
      const rows = await exportJsonl(t, runIdOf(o.lines)!);
      expect(rows).toHaveLength(done.steps);
      rows.forEach((r, s) => expect(r).toMatchObject({ _step: s, loss: s, acc: s / 2 }));
      figures[`polite${i}`] = { steps: done.steps, worstFlushMs: Math.round(done.worstFlush), flushes: done.flushes };
    }
    const flooded = JSON.parse(flooder.lines.find((l) => l.startsWith('logged '))!.slice(7));
    expect(flooder.lines.find((l) => l.startsWith('finished'))).toMatch(/^finished finished/);
    const info = await cliJson(t, ['show', runIdOf(flooder.lines)!]);
    expect(info.historyRows).toBe(flooded.steps); // slowed, never dropped
    expect(info.summary.f49).toBe((flooded.steps - 1) * 64 + 49);
    figures.flood = { steps: flooded.steps, points: flooded.steps * 50, backpressure: flooded.sawProblem || '(none reported)' };
    console.log(`fairness: ${JSON.stringify(figures)}`);
  }, TEST_MS);
});
