// Issue 22: nothing lost when a trainer dies. Every row whose log() returned
// is in the writer's crash journal (client/journal.ts) until the daemon
// acknowledged it, and the daemon recovers it (daemon/runs/journal.ts) when
// the writer dies in any way: SIGKILL at random moments, abort(), a
// segfault, the OOM killer, the daemon killed with it. Real processes only.
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, script, spawnScript, cliJson, exportJsonl, waitUntil, startDaemon, killDaemon, daemonPids, alive, type TestEnv } from '../helpers.js';
import { NO_ADDON, trainer, lastLogged, expectWhole, expectPrefixWhole, waitFinal } from './helpers.js';

let t: TestEnv;
afterEach(async () => t && (await t.cleanup()));

describe.skipIf(!!NO_ADDON)(`crash journal: real SIGKILL at random moments${NO_ADDON ? ` — ${NO_ADDON}` : ''}`, () => {
  it('8 writers killed at 200 random moments while logging at full speed: every printed step is stored exactly once', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    await startDaemon(t);
    const file = trainer(t);
    const rounds = Number(process.env.LOGD_JOURNAL_KILL_ROUNDS ?? 25);
    let kills = 0;
    let recovered = 0;
    let stored = 0;
    const checks: Array<{ id: string; printed: number }> = [];
    for (let round = 0; round < rounds; round++) {
      const procs = Array.from({ length: 8 }, (_, i) => spawnScript(t, file, [`r${round}w${i}`]));
      await Promise.all(procs.map((p) => waitUntil(() => p.lines.some((l) => l.startsWith('logged ')), 30_000, 'a writer to log')));
      // Each is killed at its own random moment: right after a batch went out, mid-row, between flushes.
      await Promise.all(procs.map(async (p) => {
        await new Promise((r) => setTimeout(r, Math.random() * 400));
        p.kill('SIGKILL');
        kills++;
        await p.closed;
        const id = p.lines.find((l) => l.startsWith('run '))!.slice(4);
        checks.push({ id, printed: lastLogged(p.lines) });
      }));
    }
    expect(kills).toBe(rounds * 8);
    for (const c of checks) {
      const info = await waitFinal(t, c.id);
      expect(info.state).toBe('crashed');
      recovered += info.metadata.journal?.recoveredRows ?? 0;
      stored += await expectWhole(t, c.id, c.printed);
    }
    expect(recovered, 'rows came back from journals').toBeGreaterThan(0);
    // Journals cover a kill; the daemon still takes rows as they are sent (a daemon that took none over gRPC would
    // pass the checks above on journals alone). 8 writers flat out on 2 cores starve it: most rows (60-75 % here)
    // come back from journals.
    process.stderr.write(`journal test: ${stored} rows stored, ${recovered} from journals\n`);
    expect(stored - recovered, `of ${stored} rows stored, ${recovered} came from journals`).toBeGreaterThanOrEqual(checks.length * 100);
    const spool = path.join(t.dataDir, 'spool');
    await waitUntil(() => fs.readdirSync(spool).filter((n) => n.endsWith('.journal')).length === 0, 10_000, 'every journal to be ingested and removed');
  }, 900_000); // 25 rounds of 8 processes logging at full speed on 2 cores: minutes, not seconds

  it('an attached writer (handle()/attach()) killed mid-stream: the owner finishes, and every row the child printed is stored once', async () => {
    t = makeEnv();
    const child = script(t, 'child.mjs', `
      import fs from 'node:fs';
      const run = await logd.attach(process.argv[2]);
      let step = 0;
      for (;;) {
        run.log({ child: step }, { step });
        if (step % 97 === 0) fs.writeSync(1, 'logged ' + step + '\\n');
        step++;
        if (step % 400 === 0) await new Promise((r) => setImmediate(r));
      }
    `);
    const owner = script(t, 'owner.mjs', `
      import fs from 'node:fs';
      import { spawn } from 'node:child_process';
      const run = await logd.init({ project: 'journal', name: 'shared' });
      const kid = spawn(process.execPath, [${JSON.stringify(child)}, run.handle()], { stdio: ['ignore', 'pipe', 'inherit'] });
      let out = '';
      kid.stdout.on('data', (d) => (out += d));
      while (!/logged [1-9]\\d{3}/.test(out)) await new Promise((r) => setTimeout(r, 5));
      await new Promise((r) => setTimeout(r, Math.random() * 200));
      kid.kill('SIGKILL');
      await new Promise((r) => kid.once('close', r)); // 'close': every line it printed is read
      const printed = Math.max(...[...out.matchAll(/logged (\\d+)/g)].map((m) => Number(m[1])));
      const res = await run.finish({ timeoutMs: 15000 });
      console.log(JSON.stringify({ id: run.id, printed, state: res.state }));
    `);
    const p = spawnScript(t, owner);
    await p.closed;
    const res = JSON.parse(p.lines[p.lines.length - 1]);
    expect(res.state).toBe('finished');
    const rows = await exportJsonl(t, res.id, ['--raw', '--keys', 'child']);
    const steps = rows.map((r) => Number(r._step)).sort((a, b) => a - b);
    expect(new Set(steps).size).toBe(steps.length);
    expect(steps[steps.length - 1]).toBeGreaterThanOrEqual(res.printed);
    expect(steps).toEqual(Array.from({ length: steps.length }, (_, i) => i));
  });

  for (const how of ['abort', 'segv'] as const) {
    it(`a trainer that dies by ${how === 'abort' ? 'abort()' : 'a segfault'} keeps every row`, async () => {
      t = makeEnv();
      const p = spawnScript(t, trainer(t), ['one', how]);
      await p.closed;
      const id = p.lines.find((l) => l.startsWith('run '))!.slice(4);
      await waitFinal(t, id);
      expect(await expectWhole(t, id, 2999)).toBe(3000);
    });
  }

  it('the trainer and the daemon killed together: a fresh daemon finds every journaled row', async () => {
    t = makeEnv();
    const p = spawnScript(t, trainer(t), ['both']);
    await waitUntil(() => lastLogged(p.lines) > 5000, 30_000, 'the trainer to log');
    for (const pid of daemonPids(t.dir)) process.kill(pid, 'SIGKILL');
    p.kill('SIGKILL');
    await p.closed;
    const printed = lastLogged(p.lines);
    const id = p.lines.find((l) => l.startsWith('run '))!.slice(4);
    await waitUntil(() => daemonPids(t.dir).length === 0, 5000, 'the daemon to be gone');
    await startDaemon(t);
    await waitFinal(t, id);
    await expectWhole(t, id, printed);
  });

  it('a daemon stopped with SIGTERM while a writer is killed: the next daemon recovers the rows', async () => {
    t = makeEnv();
    const p = spawnScript(t, trainer(t), ['term']);
    await waitUntil(() => lastLogged(p.lines) > 3000, 30_000, 'the trainer to log');
    const daemons = daemonPids(t.dir);
    p.kill('SIGKILL');
    for (const pid of daemons) process.kill(pid, 'SIGTERM');
    await p.closed;
    const printed = lastLogged(p.lines);
    const id = p.lines.find((l) => l.startsWith('run '))!.slice(4);
    await waitUntil(() => daemons.every((pid) => !alive(pid)), 10_000, 'the daemon to stop');
    if (daemonPids(t.dir).length === 0) await startDaemon(t);
    await waitUntil(async () => (await exportJsonl(t, id, ['--raw', '--keys', 'loss'])).length > printed, 20_000, 'the journal to be ingested');
    await expectWhole(t, id, printed);
  });

  it('a full disk under a journaled writer: no SIGBUS (the journal has its blocks), training goes on, and a kill after the daemon caught up loses nothing it had', async (ctx) => {
    t = makeEnv({ LOGD_JOURNAL_MB: '2' });
    fs.mkdirSync(t.dataDir, { recursive: true });
    try {
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=24m', 'tmpfs', t.dataDir]);
    } catch (e) {
      ctx.skip(`cannot mount a tmpfs here (${(e as Error).message.split('\n')[0]}); run as root`);
      return;
    }
    try {
      await startDaemon(t);
      const p = spawnScript(t, trainer(t), ['full']);
      await waitUntil(() => lastLogged(p.lines) > 2000, 30_000, 'the trainer to log');
      const free = () => { const st = fs.statfsSync(t.dataDir); return st.bavail * st.bsize; };
      const filler = path.join(t.dataDir, 'filler');
      // Fill what is free: the daemon and the trainer write into this tmpfs at the same time, so the last
      // chunks may meet ENOSPC first (the disk is full either way).
      const fd = fs.openSync(filler, 'w');
      try {
        for (const chunk of [1 << 20, 64 << 10, 4 << 10]) {
          const buf = Buffer.alloc(chunk, 1);
          for (;;) {
            try {
              fs.writeSync(fd, buf);
            } catch (e) {
              if ((e as NodeJS.ErrnoException).code === 'ENOSPC') break;
              throw e;
            }
          }
        }
      } finally {
        fs.closeSync(fd);
      }
      expect(free()).toBeLessThan(64 * 1024);
      const at = lastLogged(p.lines);
      await waitUntil(() => lastLogged(p.lines) > at + 20_000, 60_000, 'the trainer to go on logging with the disk full');
      expect(p.exitCode, 'the trainer died with the disk full').toBeNull();
      fs.rmSync(filler);
      // Space is back: once the daemon has caught up, the journal holds the little that is unacknowledged.
      // (While the disk was full the ring may have filled: rows past LOGD_JOURNAL_MB are memory-only by design.)
      const id0 = p.lines.find((l) => l.startsWith('run '))!.slice(4);
      const caughtUpTo = lastLogged(p.lines);
      await waitUntil(async () => (await cliJson(t, ['show', id0])).historyRows > caughtUpTo, 120_000, 'the daemon to catch up once space is back');
      p.kill('SIGKILL');
      await p.closed;
      const id = p.lines.find((l) => l.startsWith('run '))!.slice(4);
      await waitFinal(t, id);
      // A full-speed trainer outruns a 2 MiB journal while the daemon catches up: what it logged past the
      // bound after that point was memory-only (counted, documented), so a gap above it is allowed.
      // Everything up to then is stored, and nothing twice.
      const gap = await expectPrefixWhole(t, id, caughtUpTo);
      // A gap is never silent: the run says how many rows did not fit the journal.
      if (gap) expect(JSON.stringify(await cliJson(t, ['show', id]))).toMatch(/did not fit the journal/);
    } finally {
      await killDaemon(t.dir);
      try {
        execFileSync('umount', ['-l', t.dataDir]);
      } catch {
        /* gone */
      }
    }
  });

  it('the OOM killer: a trainer in a memory cgroup that runs out keeps every row', async (ctx) => {
    const cg = `/sys/fs/cgroup/memory/logd-test-${process.pid}`;
    try {
      fs.mkdirSync(cg);
      fs.writeFileSync(path.join(cg, 'memory.limit_in_bytes'), String(400 << 20));
      try {
        fs.writeFileSync(path.join(cg, 'memory.memsw.limit_in_bytes'), String(400 << 20));
      } catch {
        /* no swap accounting: the memory limit alone triggers the OOM killer */
      }
    } catch (e) {
      try {
        fs.rmdirSync(cg);
      } catch {
        /* never made */
      }
      ctx.skip(`no writable cgroup v1 memory controller here (${(e as Error).message}); SIGKILL above covers the same death`);
      return;
    }
    try {
      t = makeEnv();
      await startDaemon(t); // outside the cgroup: only the trainer is limited
      const p = spawnScript(t, trainer(t), ['oom', 'oom']);
      fs.writeFileSync(path.join(cg, 'cgroup.procs'), String(p.pid));
      const [code, signal] = await p.closed;
      expect(signal, `the trainer exited with ${code} instead of being OOM-killed`).toBe('SIGKILL');
      const oom = fs.readFileSync(path.join(cg, 'memory.oom_control'), 'utf8');
      expect(oom).toMatch(/oom_kill [1-9]/);
      const id = p.lines.find((l) => l.startsWith('run '))!.slice(4);
      await waitFinal(t, id);
      expect(await expectWhole(t, id, 2999)).toBe(3000);
    } finally {
      await new Promise((r) => setTimeout(r, 200));
      try {
        fs.rmdirSync(cg);
      } catch {
        /* still emptying */
      }
    }
  });
});
