// Issue 24, case 7: init() never ends training unless asked to. Each start
// failure made real: the trainer runs to its end with exit code 0,
// run.problem says why, and once the cause is gone a daemon holds every row
// exactly once. With onError 'raise' (or LOGD_ON_ERROR=raise) init() throws.
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, script, runScript, spawnScript, cli, cliJson, exportJsonl, startDaemon, waitUntil, type TestEnv } from './helpers.js';

let t: TestEnv;
let mounted: string | null = null;
afterEach(async () => {
  if (mounted) {
    try {
      execFileSync('umount', [mounted]);
    } catch {
      /* not mounted any more */
    }
    mounted = null;
  }
  if (t) await t.cleanup();
});

function trainer(env: TestEnv, extra = ''): string {
  return script(env, 'trainer.mjs', `
    const run = await logd.init({ project: 'deferred', name: 'job', config: { lr: 0.1 } ${extra} });
    for (let s = 0; s < 1000; s++) run.log({ loss: 1 / (s + 1), acc: s / 1000 }, { step: s });
    run.summary.update({ best: 42 });
    console.log('problem ' + run.problem);
    const res = await run.finish();
    console.log('run ' + run.id + ' ' + res.state);
  `);
}

function runIdOf(stdout: string): string {
  return stdout.split('\n').find((l) => l.startsWith('run '))!.split(' ')[1];
}

async function expectStored(env: TestEnv, id: string): Promise<void> {
  let info: any;
  await waitUntil(async () => {
    try {
      info = await cliJson(env, ['show', id]);
      return info.state === 'finished';
    } catch {
      return false;
    }
  }, 30_000, `the deferred run ${id} to be stored and finished`);
  expect(info.historyRows).toBe(1000);
  expect(info.config.lr).toBe(0.1);
  expect(info.summary.best).toBe(42);
  const rows = await exportJsonl(env, id, ['--raw', '--keys', 'loss']);
  expect(rows.map((r) => r._step)).toEqual(Array.from({ length: 1000 }, (_, i) => i));
}

const root = typeof process.getuid === 'function' && process.getuid() === 0;

describe('init() with no usable daemon goes on deferred', () => {
  it('LOGD_DIR is a file: the trainer exits 0, run.problem says why, and the daemon started later stores every row once', async () => {
    t = makeEnv({ XDG_STATE_HOME: '' });
    fs.mkdirSync(t.dir, { recursive: true });
    fs.writeFileSync(t.dataDir, 'not a directory');
    t.env.XDG_STATE_HOME = path.join(t.dir, 'state');
    const r = await runScript(t, trainer(t));
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/problem deferred: /);
    expect(r.stderr).toMatch(/logd: run \w+: deferred: /);
    const id = runIdOf(r.stdout);
    const fallback = path.join(t.dir, 'state', 'logd', 'deferred');
    const files = fs.readdirSync(fallback, { recursive: true }) as string[];
    expect(files.some((f) => f.endsWith('.deferred.spill'))).toBe(true);
    // The cause removed: a daemon of that data dir finds the run and stores it.
    fs.rmSync(t.dataDir);
    await startDaemon(t);
    await expectStored(t, id);
  });

  it('`logd sync --ingest FILE` stores a deferred run whose spill file was moved elsewhere, once, even when given twice', async () => {
    t = makeEnv();
    fs.mkdirSync(t.dir, { recursive: true });
    fs.writeFileSync(t.dataDir, 'not a directory');
    t.env.XDG_STATE_HOME = path.join(t.dir, 'state');
    const r = await runScript(t, trainer(t));
    expect(r.exitCode, r.stderr).toBe(0);
    const id = runIdOf(r.stdout);
    const fallback = path.join(t.dir, 'state', 'logd', 'deferred');
    const rel = (fs.readdirSync(fallback, { recursive: true }) as string[]).find((f) => f.endsWith('.deferred.spill'))!;
    const moved = path.join(t.dir, 'kept.spill');
    fs.renameSync(path.join(fallback, rel), moved); // a copy the daemon would never find by itself
    fs.rmSync(t.dataDir);
    await startDaemon(t);
    const first = await cli(t, ['sync', '--ingest', moved]);
    expect(first.stdout).toMatch(new RegExp(`stored in run ${id}`));
    await expectStored(t, id);
    const again = await cli(t, ['sync', '--ingest', moved], { reject: false });
    expect(again.exitCode).toBe(0);
    expect((await cliJson(t, ['show', id])).historyRows).toBe(1000);
    const bad = path.join(t.dir, 'not-a-spill');
    fs.writeFileSync(bad, 'hello');
    const refused = await cli(t, ['sync', '--ingest', bad], { reject: false });
    expect(refused.exitCode).toBe(2);
    expect(refused.stderr).toMatch(/not a logd spill file/);
  });

  it.skipIf(!root)('a read-only LOGD_DIR (a read-only tmpfs): same, once it is writable again', async () => {
    t = makeEnv();
    t.env.XDG_STATE_HOME = path.join(t.dir, 'state');
    fs.mkdirSync(t.dataDir, { recursive: true });
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'ro,size=4m', 'tmpfs', t.dataDir]);
    mounted = t.dataDir;
    const r = await runScript(t, trainer(t));
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/problem deferred: /);
    const id = runIdOf(r.stdout);
    execFileSync('umount', [t.dataDir]);
    mounted = null;
    await startDaemon(t);
    await expectStored(t, id);
  });

  it('a daemon that becomes reachable during the run gets the run and every row; the run finishes as usual', async () => {
    t = makeEnv();
    fs.mkdirSync(t.dir, { recursive: true });
    fs.writeFileSync(t.dataDir, 'not a directory');
    const slow = script(t, 'slow.mjs', `
      const run = await logd.init({ project: 'deferred', name: 'later' });
      console.log('started ' + run.id + ' ' + (run.problem ? 'deferred' : 'normal'));
      let s = 0;
      while (run.problem && run.problem.startsWith('deferred')) { run.log({ loss: s }, { step: s }); s++; await new Promise((r) => setTimeout(r, 5)); }
      for (let i = 0; i < 100; i++) { run.log({ loss: s }, { step: s }); s++; }
      const res = await run.finish();
      console.log('done ' + res.state + ' ' + s);
    `);
    const p = spawnScript(t, slow);
    await waitUntil(() => p.lines.some((l) => l.startsWith('started ')), 30_000, 'the trainer to start');
    expect(p.lines.find((l) => l.startsWith('started '))).toMatch(/ deferred$/);
    fs.rmSync(t.dataDir); // the cause goes away while it trains
    await waitUntil(() => p.lines.some((l) => l.startsWith('done ')), 60_000, 'the trainer to reach a daemon and finish');
    const [, state, steps] = p.lines.find((l) => l.startsWith('done '))!.split(' ');
    expect(state).toBe('finished');
    const id = p.lines.find((l) => l.startsWith('started '))!.split(' ')[1];
    const rows = await exportJsonl(t, id, ['--raw', '--keys', 'loss']);
    expect(rows.map((r) => r._step)).toEqual(Array.from({ length: Number(steps) }, (_, i) => i));
  });

  it("onError: 'raise' and LOGD_ON_ERROR=raise keep init() throwing, with a clear error", async () => {
    t = makeEnv();
    fs.mkdirSync(t.dir, { recursive: true });
    fs.writeFileSync(t.dataDir, 'not a directory');
    const r1 = await runScript(t, trainer(t, ", onError: 'raise'"));
    expect(r1.exitCode).not.toBe(0);
    expect(r1.stderr).toMatch(/DaemonStartError|daemon/);
    expect(r1.stdout).not.toMatch(/^run /m);
    const r2 = await runScript(t, trainer(t), [], { LOGD_ON_ERROR: 'raise' });
    expect(r2.exitCode).not.toBe(0);
    // Programming errors still throw at once, deferred or not.
    const bad = script(t, 'bad.mjs', `
      try { await logd.init({ id: '../etc' }); console.log('no throw'); } catch (e) { console.log('threw ' + e.name); }
    `);
    const r3 = await runScript(t, bad);
    expect(r3.stdout.trim()).toBe('threw TypeError');
  });
});
