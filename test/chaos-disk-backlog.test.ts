// Issue 9 case 8: a backlog larger than the space freed on a full disk (a
// small tmpfs as the data dir). The daemon stores what fits and keeps the
// rest pending, finish() resolves within its deadline with a message, and
// once enough space is back every row is stored exactly once.
import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { execa } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, startDaemon, script, waitUntil, alive, exportJsonl, cliJson, type TestEnv } from './helpers.js';

let t: TestEnv;
let mounted: string | null = null;
afterEach(async () => {
  if (t) await t.cleanup().catch(() => {});
  if (mounted) await execa('umount', ['-l', mounted], { reject: false });
  mounted = null;
});

const ROWS = 150_000;
const FINISH_MS = 8000;

describe('issue 9 case 8: a backlog larger than the space freed', () => {
  it('stores what fits, keeps the rest pending, and finish() resolves within its deadline', async (ctx) => {
    t = makeEnv({ LOGD_SAMPLE_INTERVAL_MS: '0' });
    fs.mkdirSync(t.dataDir, { recursive: true });
    const m = await execa('mount', ['-t', 'tmpfs', '-o', 'size=8m', 'tmpfs', t.dataDir], { reject: false });
    if (m.exitCode !== 0) return ctx.skip(`cannot mount a tmpfs here (${m.stderr.trim() || `exit ${m.exitCode}`}); run as root where mount is permitted`);
    mounted = t.dataDir;
    const d = await startDaemon(t);
    const go = path.join(t.dir, 'go');
    const w = script(t, 'backlog.mjs', `
      import fs from 'node:fs';
      const run = await logd.init({ project: 'backlog' });
      console.log('run ' + run.id);
      while (!fs.existsSync(${JSON.stringify(go)})) await new Promise((r) => setTimeout(r, 10));
      for (let s = 0; s < ${ROWS}; s += 5000) {
        for (let step = s; step < s + 5000; step++) run.log({ v: step * 3 }, { step });
        await new Promise((r) => setTimeout(r, 5));
      }
      console.log('logged');
      const t0 = Date.now();
      try {
        const res = await run.finish({ timeoutMs: ${FINISH_MS} });
        console.log('finish ' + JSON.stringify({ ...res, ms: Date.now() - t0 }));
      } catch (e) {
        console.log('threw ' + JSON.stringify({ message: e.message, ms: Date.now() - t0 }));
      }
    `);
    const child = spawn(process.execPath, [w], { env: { ...t.env, LOGD_NO_AUTOSTART: '1' }, stdio: ['ignore', 'pipe', 'inherit'] });
    const out: string[] = [];
    child.stdout!.on('data', (b: Buffer) => out.push(...b.toString().split('\n').filter(Boolean)));
    await waitUntil(() => out.some((l) => l.startsWith('run ')), 30_000, 'the worker to create its run');
    const id = out.find((l) => l.startsWith('run '))!.slice(4);
    // Fill the disk, then log a backlog (150 000 rows, about 4.8 MB) that cannot be stored.
    const filler = path.join(t.dataDir, 'filler');
    const free = () => { const s = fs.statfsSync(t.dataDir); return s.bavail * s.bsize; };
    fs.writeFileSync(filler, Buffer.alloc(Math.max(0, free() - 16 * 1024)));
    fs.writeFileSync(go, '');
    await waitUntil(() => out.includes('logged') && /writer: cannot write to .*(ENOSPC|no space)/i.test(d.stderr()), 60_000, 'the backlog to be logged against a full disk');
    // Free 1 MB: less than the backlog. What fits is stored.
    fs.truncateSync(filler, fs.statSync(filler).size - 1024 * 1024);
    const stored = async () => (await exportJsonl(t, id, ['--raw'])).length;
    await waitUntil(async () => (await stored()) > 10_000, 20_000, 'the daemon to store the part of the backlog that fits');
    // Stored, not a write in flight that a failed round cuts back: it is still
    // there after several retry rounds (one every 500 ms).
    const part = await stored();
    await new Promise((r) => setTimeout(r, 1600));
    expect(await stored()).toBeGreaterThanOrEqual(part);
    expect(part).toBeLessThan(ROWS);
    // finish() resolves within its deadline, with a message, while the rest waits.
    await waitUntil(() => out.some((l) => l.startsWith('finish ') || l.startsWith('threw ')), FINISH_MS + 30_000, 'finish() to return');
    const done = out.find((l) => l.startsWith('finish ') || l.startsWith('threw '))!;
    expect(done).toMatch(/^finish /);
    const res = JSON.parse(done.slice(7));
    expect(res.ms).toBeLessThan(FINISH_MS + 1000);
    expect(res, JSON.stringify(res)).toMatchObject({ state: "finished", timedOut: true });
    console.log(`backlog: ${part} of ${ROWS} rows stored after 1 MB was freed; finish() returned in ${res.ms} ms (deadline ${FINISH_MS} ms)`);
    expect(res.message).toMatch(/arrived but are not stored yet: cannot write to .*(ENOSPC|no space).*stored once space is freed/i);
    expect(alive(d.pid)).toBe(true);
    // Space back: the rest of the backlog is stored, each row once.
    fs.rmSync(filler);
    await waitUntil(async () => (await exportJsonl(t, id, ['--raw'])).length === ROWS, 60_000, `all ${ROWS} rows to be stored`);
    const rows = await exportJsonl(t, id, ['--raw']);
    expect(rows.every((r, i) => r._step === i && r.v === i * 3)).toBe(true);
    await waitUntil(() => child.exitCode !== null, 20_000, 'the worker to exit');
    expect(child.exitCode).toBe(0);
    // The owner's finish went through: the run is finished, not crashed.
    expect(await cliJson(t, ['show', id])).toMatchObject({ state: 'finished', historyRows: ROWS });
  });
});
