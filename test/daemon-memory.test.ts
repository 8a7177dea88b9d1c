// Issue 13 case 3: the daemon's memory is bounded under a flood of streams
// and given back afterwards. Real processes: a standalone daemon and four
// flooding clients (bench/flood.ts) that write without waiting for
// acknowledgements. RSS is a resource limit, so the bounds carry a margin;
// the headline figures (500 streams) are in bench/RESULTS.md.
import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, startDaemon, serviceFile, cliJson, waitUntil, ROOT, type TestEnv } from './helpers.js';

let t: TestEnv;
afterEach(async () => t && (await t.cleanup()));

const FLOOD = path.join(ROOT, 'dist', 'bench', 'flood.js');
const rssMb = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

const PROCS = 4;
const STREAMS_PER_PROC = 25;
const BATCHES = 400;
const ROWS = 20;
/** Growth above the idle daemon allowed at the peak, and what may remain a minute after the flood. */
const PEAK_GROWTH_MB = 150;
const AFTER_GROWTH_MB = 80;

describe('daemon memory', () => {
  it(`issue 13 case 3: ${PROCS * STREAMS_PER_PROC} flooding streams x ${BATCHES} batches: bounded RSS under load, most of it returned within a minute`, async () => {
    const trim = path.join(ROOT, 'dist', 'addon', 'logd_addon.node');
    expect(fs.existsSync(trim), `${trim} is missing: build it with \`make build\` (scripts/build-addon.mjs needs cc)`).toBe(true);
    t = makeEnv({ LOGD_SAMPLE_INTERVAL_MS: '0' });
    const d = await startDaemon(t);
    const svc = serviceFile(t.runtimeDir)!;
    await new Promise((r) => setTimeout(r, 1000)); // let start-up allocation settle
    const idle = rssMb(d.pid);
    let peak = idle;
    const sampler = setInterval(() => (peak = Math.max(peak, rssMb(d.pid))), 100);
    try {
      const clients = Array.from({ length: PROCS }, () => new Promise<number | null>((resolve) => {
        const p = spawn(process.execPath, [FLOOD, String(STREAMS_PER_PROC), String(BATCHES), String(ROWS)], {
          env: { ...t.env, LOGD_SERVICE: `${svc.socket}#${svc.token}` }, stdio: ['ignore', 'ignore', 'inherit'],
        });
        const killer = setTimeout(() => p.kill('SIGKILL'), 240_000);
        p.on('exit', (code) => (clearTimeout(killer), resolve(code)));
      }));
      expect(await Promise.all(clients)).toEqual(Array(PROCS).fill(0));
    } finally {
      clearInterval(sampler);
    }
    // Every batch was stored: backpressure slows clients down, it drops nothing.
    const runs = await cliJson<Array<{ historyRows: number; state: string }>>(t, ['runs', '--project', 'flood', '--limit', '1000']);
    expect(runs).toHaveLength(PROCS * STREAMS_PER_PROC);
    for (const r of runs) expect(r).toMatchObject({ historyRows: BATCHES * ROWS, state: 'finished' });

    console.log(`daemon RSS: idle ${idle.toFixed(0)} MB, peak ${peak.toFixed(0)} MB`);
    expect(peak - idle).toBeLessThanOrEqual(PEAK_GROWTH_MB);
    const after = Date.now();
    await waitUntil(() => rssMb(d.pid) - idle <= AFTER_GROWTH_MB, 60_000, `daemon RSS back within ${AFTER_GROWTH_MB} MB of idle (${idle.toFixed(0)} MB); now ${rssMb(d.pid).toFixed(0)} MB`);
    console.log(`daemon RSS back to ${rssMb(d.pid).toFixed(0)} MB ${((Date.now() - after) / 1000).toFixed(1)} s after the flood`);
  });
});
