// Chaos: the data dir's filesystem fills up (a small tmpfs). Writers are
// told (a warning line, and the problem on the run), the daemon logs it and
// stays up, nothing already stored is damaged, and once space is freed every
// record arrives exactly once.
import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { execa } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, startDaemon, waitUntil, alive, cliJson, type TestEnv } from './helpers.js';
import { chaosWorker, runIdOf, expectExactlyOnce } from './chaos-helpers.js';

let t: TestEnv;
let mounted: string | null = null;
afterEach(async () => {
  if (t) await t.cleanup().catch(() => {});
  if (mounted) await execa('umount', ['-l', mounted], { reject: false });
  mounted = null;
});

async function mountTmpfs(dir: string, size: string): Promise<string | null> {
  fs.mkdirSync(dir, { recursive: true });
  const r = await execa('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', dir], { reject: false });
  return r.exitCode === 0 ? null : `cannot mount a tmpfs here (${r.stderr.trim() || `exit ${r.exitCode}`}); run as root where mount is permitted`;
}

describe('a full disk', () => {
  it('writers are told, the daemon stays up, stored data is intact, and logging resumes when space is freed', async (ctx) => {
    t = makeEnv({ LOGD_SAMPLE_INTERVAL_MS: '300' });
    const why = await mountTmpfs(t.dataDir, '8m');
    if (why) return ctx.skip(why);
    mounted = t.dataDir;
    const d = await startDaemon(t);
    const STEPS = 40_000;
    const worker = chaosWorker(t, { chunk: 500, pauseMs: 2 });
    const go = path.join(t.dir, 'go');
    const child = spawn(process.execPath, [worker, '5', String(STEPS), go], { env: { ...t.env, LOGD_NO_AUTOSTART: '1' }, stdio: ['ignore', 'pipe', 'pipe'] });
    const out: string[] = [];
    const err: string[] = [];
    child.stdout!.on('data', (b: Buffer) => out.push(...b.toString().split('\n').filter(Boolean)));
    child.stderr!.on('data', (b: Buffer) => err.push(...b.toString().split('\n').filter(Boolean)));
    await waitUntil(() => !!runIdOf(out), 30_000, 'the writer to create its run');
    const id = runIdOf(out)!;
    // Leave about 1 MB: the run's log (~7 MB for 40 000 rows) cannot fit.
    const filler = path.join(t.dataDir, 'filler');
    const free = () => { const s = fs.statfsSync(t.dataDir); return s.bavail * s.bsize; };
    fs.writeFileSync(filler, Buffer.alloc(Math.max(0, free() - 1024 * 1024)));
    const sizeBefore = fs.statSync(path.join(t.dataDir, 'runs', id, 'records.log')).size;
    fs.writeFileSync(go, '');
    await waitUntil(() => /writer: cannot write to .*(ENOSPC|no space)/i.test(d.stderr()), 60_000, 'the daemon to log that the disk is full');
    await waitUntil(() => err.some((l) => /logd: daemon: cannot write to .*(ENOSPC|no space)/i.test(l)), 30_000, 'the writer to be told on stderr');
    await waitUntil(() => out.some((l) => /^problem cannot write to .*(ENOSPC|no space)/i.test(l)), 30_000, 'the writer to see it in run.problem');
    await waitUntil(() => out.some((l) => l.startsWith('logged ')), 60_000, 'the writer to log every step with the disk full');
    expect(alive(d.pid)).toBe(true);
    const stats = JSON.parse(out.find((l) => l.startsWith('logged '))!.slice(7));
    expect(stats.worstLog).toBeLessThan(250); // training did not block on the full disk
    // The daemon still answers, and what was stored before is readable.
    const during = await cliJson(t, ['status']);
    expect(during.storageProblem).toMatch(/ENOSPC|no space/i);
    expect(fs.statSync(path.join(t.dataDir, 'runs', id, 'records.log')).size).toBeGreaterThanOrEqual(sizeBefore);
    fs.rmSync(filler);
    await waitUntil(() => out.some((l) => l.startsWith('finished')), 60_000, 'the writer to finish once space is back');
    expect(out.find((l) => l.startsWith('finished'))).toMatch(/^finished finished/);
    expect(d.stderr()).toMatch(/writer: storage works again/);
    expect((await cliJson(t, ['status'])).storageProblem).toBe('');
    expect(out.filter((l) => l.startsWith('problem ')).length).toBeGreaterThanOrEqual(1);
    await expectExactlyOnce(t, id, 5, STEPS);
    expect(alive(d.pid)).toBe(true);
  });
});
