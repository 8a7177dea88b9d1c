// Chaos: the data dir's filesystem fills up (a small tmpfs). Writers are
// told (a warning line, and the problem on the run), the daemon logs it and
// stays up, nothing already stored is damaged, and once space is freed every
// record arrives exactly once.
import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { execa } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, startDaemon, waitUntil, alive, cliJson, exportJsonl, script, type TestEnv } from './helpers.js';
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

  it('issue 9 case 7: with the client buffer full too, rows are dropped with an exact count, and nothing throws into training', async (ctx) => {
    t = makeEnv({ LOGD_MAX_BUFFER_MB: '1', LOGD_SAMPLE_INTERVAL_MS: '0' });
    const why = await mountTmpfs(t.dataDir, '8m');
    if (why) return ctx.skip(why);
    mounted = t.dataDir;
    const d = await startDaemon(t);
    const STEPS = 60_000;
    const worker = script(t, 'full.mjs', `
      import fs from 'node:fs';
      process.on('uncaughtException', (e) => { console.log('uncaught ' + e.message); process.exit(9); });
      const run = await logd.init({ project: 'full' });
      console.log('run ' + run.id);
      while (!fs.existsSync(process.argv[2])) await new Promise((r) => setTimeout(r, 10));
      let threw = 0;
      for (let s = 0; s < ${STEPS}; s++) {
        const row = {};
        for (let m = 0; m < 10; m++) row['m' + m] = s * 16 + m;
        try { run.log(row, { step: s }); } catch (e) { if (threw++ === 0) console.log('threw ' + e.message); }
        if (s % 500 === 499) await new Promise((r) => setTimeout(r, 2));
      }
      console.log('logged ' + JSON.stringify({ threw, problem: run.problem }));
      while (!fs.existsSync(process.argv[3])) await new Promise((r) => setTimeout(r, 10));
      const res = await run.finish({ timeoutMs: 60000 });
      console.log('finished ' + JSON.stringify({ state: res.state, problem: run.problem }));
    `);
    const go = path.join(t.dir, 'go');
    const freed = path.join(t.dir, 'freed');
    const child = spawn(process.execPath, [worker, go, freed], { env: { ...t.env, LOGD_NO_AUTOSTART: '1' }, stdio: ['ignore', 'pipe', 'pipe'] });
    const out: string[] = [];
    let err = '';
    child.stdout!.on('data', (b: Buffer) => out.push(...b.toString().split('\n').filter(Boolean)));
    child.stderr!.on('data', (b: Buffer) => (err += b.toString()));
    const exited = new Promise<number | null>((r) => child.on('exit', (c) => r(c)));
    await waitUntil(() => !!runIdOf(out), 30_000, 'the writer to create its run');
    const id = runIdOf(out)!;
    const filler = path.join(t.dataDir, 'filler');
    const free = () => { const s = fs.statfsSync(t.dataDir); return s.bavail * s.bsize; };
    fs.writeFileSync(filler, Buffer.alloc(Math.max(0, free() - 512 * 1024)));
    fs.writeFileSync(go, '');
    await waitUntil(() => out.some((l) => l.startsWith('logged ')), 60_000, 'the writer to log every row with memory and disk full');
    const logged = JSON.parse(out.find((l) => l.startsWith('logged '))!.slice(7));
    expect(logged.threw).toBe(0);
    expect(logged.problem).toMatch(/^\d+ rows dropped: .*ENOSPC/);
    fs.rmSync(filler);
    fs.writeFileSync(freed, '');
    expect(await exited).toBe(0);
    const finished = JSON.parse(out.find((l) => l.startsWith('finished '))!.slice(9));
    expect(finished.state).toBe('finished');
    const info = await cliJson(t, ['show', id]);
    const dropped = info.metadata.droppedRows as number;
    expect(dropped).toBeGreaterThan(0);
    expect(info.historyRows + dropped).toBe(STEPS); // every row is stored or counted as dropped
    expect(finished.problem).toMatch(new RegExp(`^${dropped} rows dropped`));
    expect(err.match(/rows dropped/g)).toHaveLength(1); // stderr once
    const rows = await exportJsonl(t, id);
    expect(rows).toHaveLength(info.historyRows);
    for (const r of rows) for (let m = 0; m < 10; m++) expect(r[`m${m}`]).toBe((r._step as number) * 16 + m);
    const leftovers = fs.readdirSync(t.dataDir, { recursive: true }).map(String).filter((f) => /\.(tmp|overflow|spill)$/.test(f));
    expect(leftovers).toEqual([]);
    expect(alive(d.pid)).toBe(true);
    console.log(`chaos: disk full and a 1 MB client buffer: ${info.historyRows} of ${STEPS} rows stored, ${dropped} dropped and counted, 0 thrown`);
  });
});
