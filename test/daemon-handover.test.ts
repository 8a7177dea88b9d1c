// A daemon that is stopping hands its data dir over: a daemon started
// meanwhile (a client needed one; the old one no longer answers) waits for the
// lock and serves, rather than exit "already running" and leave its client
// waiting for nothing. One that is starting or serving is still refused at
// once. And end to end: a client whose daemon stops under it gets a new one.
import fs from 'node:fs';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, script, runScript, startDaemon, waitUntil, CLI, ROOT, type TestEnv } from './helpers.js';

const envs: TestEnv[] = [];
afterEach(async () => {
  for (const t of envs.splice(0)) await t.cleanup();
});

/** A process that holds the data dir's lock as a daemon would, its owner file saying `stopping` or not, for `holdMs`. */
function holder(t: TestEnv, stopping: boolean, holdMs: number) {
  const file = path.join(t.dir, 'holder.mjs');
  fs.writeFileSync(file, `
    import fs from 'node:fs';
    import { DataDirLock } from ${JSON.stringify(path.join(ROOT, 'dist/daemon/process/data-dir-lock.js'))};
    import { writeOwnerFile } from ${JSON.stringify(path.join(ROOT, 'dist/src/service-file.js'))};
    import { procStartTime } from ${JSON.stringify(path.join(ROOT, 'dist/src/proc.js'))};
    import { resolvePaths } from ${JSON.stringify(path.join(ROOT, 'dist/src/config.js'))};
    const paths = resolvePaths();
    fs.mkdirSync(paths.dataDir, { recursive: true, mode: 0o700 });
    fs.mkdirSync(paths.runtimeDir, { recursive: true, mode: 0o700 });
    const lock = DataDirLock.acquire(paths.dataDir);
    if (!lock) { console.log('no lock'); process.exit(1); }
    writeOwnerFile(paths.ownerFile, { pid: process.pid, procStart: procStartTime(process.pid) ?? undefined, runtimeDir: paths.runtimeDir, serviceFile: paths.serviceFile, ${stopping ? "stopping: 'test'" : ''} });
    console.log('held');
    setTimeout(() => { fs.rmSync(paths.ownerFile, { force: true }); lock.release(); console.log('released'); process.exit(0); }, ${holdMs});
  `);
  const p = spawn(process.execPath, [file], { env: t.env, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  p.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  return { p, out: () => out };
}

function serve(t: TestEnv) {
  const p = spawn(process.execPath, [CLI, 'serve', '--sidecar'], { env: t.env, stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  p.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  return { p, err: () => err };
}

describe('a stopping daemon hands over', () => {
  it('a daemon started while the lock holder is stopping waits for it, then serves', async () => {
    const t = makeEnv();
    envs.push(t);
    const h = holder(t, true, 1500);
    await waitUntil(() => h.out().includes('held'), 10_000, 'the holder to take the lock');
    const s = serve(t);
    await waitUntil(() => /serving/.test(s.err()) || s.p.exitCode !== null, 20_000, 'the new daemon to serve or exit');
    expect(s.p.exitCode, s.err()).toBe(null);
    expect(h.out()).toContain('released');
    s.p.kill('SIGTERM');
    await waitUntil(() => s.p.exitCode !== null, 10_000, 'the daemon to stop');
  });

  it('one whose lock holder is starting or serving (not stopping) is refused at once, exit 3', async () => {
    const t = makeEnv();
    envs.push(t);
    const h = holder(t, false, 5000);
    await waitUntil(() => h.out().includes('held'), 10_000, 'the holder to take the lock');
    const started = Date.now();
    const s = serve(t);
    await waitUntil(() => s.p.exitCode !== null, 10_000, 'the second daemon to exit');
    expect(s.p.exitCode).toBe(3);
    expect(Date.now() - started).toBeLessThan(4000);
    expect(s.err()).toMatch(/another logd daemon already serves/);
    h.p.kill();
  });

  it('a damaged lock file (its holder row is written without fsync: a power loss can tear it) is said, with what to do; nothing is removed', async () => {
    const t = makeEnv();
    envs.push(t);
    fs.mkdirSync(t.dataDir, { recursive: true, mode: 0o700 });
    const lock = path.join(t.dataDir, 'daemon.lock');
    fs.writeFileSync(lock, Buffer.alloc(8192, 0x5a), { mode: 0o600 });
    const s = serve(t);
    await waitUntil(() => s.p.exitCode !== null, 20_000, 'the daemon to exit');
    expect(s.p.exitCode).not.toBe(0);
    expect(s.err()).toMatch(/lock file .*daemon\.lock is damaged .*remove it and start again/);
    expect(fs.readFileSync(lock)).toEqual(Buffer.alloc(8192, 0x5a));
  });

  it('a trainer whose daemon stops under it between runs gets a new daemon for its next run', async () => {
    const t = makeEnv();
    envs.push(t);
    const d = await startDaemon(t);
    const file = script(t, 'two-runs.mjs', `
      const a = await logd.init({ project: 'handover', name: 'a' });
      a.log({ x: 1 });
      await a.finish();
      console.log('first');
      // The test stops the daemon now (SIGTERM); this process goes on.
      await new Promise((r) => setTimeout(r, 300));
      const b = await logd.init({ project: 'handover', name: 'b' });
      b.log({ x: 2 });
      await b.finish();
      console.log('second ' + b.id);
    `);
    const run = runScript(t, file, [], {}, 60_000);
    await waitUntil(() => fs.existsSync(path.join(t.dataDir, 'runs')) && fs.readdirSync(path.join(t.dataDir, 'runs')).length > 0, 30_000, 'the first run');
    process.kill(d.pid, 'SIGTERM');
    const r = await run;
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/second \w+/);
  });
});
