// How processes end (issue 9, cases 1 and 5): a child that shares a run and
// leaves with process.exit(), and a trainer that handles SIGTERM itself and
// logs on. Nothing they logged is lost, and logd never ends a run while its
// process goes on.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { makeEnv, script, runScript, spawnScript, cliJson, exportJsonl, waitUntil, type TestEnv } from './helpers.js';

let t: TestEnv;
afterEach(async () => t && (await t.cleanup()));

describe('issue 9 case 1: children that share a run and call process.exit()', () => {
  it('every row the children logged is stored, and the owner finish accounts for every writer', async () => {
    t = makeEnv();
    const child = script(t, 'child.mjs', `
      const run = await logd.attach(process.argv[2]);
      const k = Number(process.argv[3]);
      for (let s = 0; s < 50; s++) run.log({ ['child' + k]: s }, { step: s });
      setTimeout(() => process.exit(0), 200);
    `);
    const owner = script(t, 'owner.mjs', `
      import { fork } from 'node:child_process';
      const run = await logd.init({ project: 'exits', name: 'owner' });
      for (let s = 0; s < 50; s++) run.log({ owner: s }, { step: s });
      const kids = [0, 1, 2].map((k) => fork(${JSON.stringify(child)}, [run.handle(), String(k)]));
      await Promise.all(kids.map((c) => new Promise((r) => c.once('exit', r))));
      const res = await run.finish({ timeoutMs: 10000 });
      console.log(JSON.stringify({ id: run.id, ...res }));
    `);
    const r = await runScript(t, owner);
    expect(r.exitCode, r.stderr).toBe(0);
    const res = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(res).toMatchObject({ state: 'finished', timedOut: false });
    const info = await cliJson(t, ['show', res.id]);
    expect(info.historyRows).toBe(200);
    expect(info.metadata.writers).toHaveLength(4);
    const raw = await exportJsonl(t, res.id, ['--raw']);
    for (const key of ['owner', 'child0', 'child1', 'child2']) {
      expect(raw.filter((x) => key in x).map((x) => x[key])).toEqual(Array.from({ length: 50 }, (_, i) => i));
    }
    const spool = path.join(t.dataDir, 'spool');
    expect(fs.existsSync(spool) ? fs.readdirSync(spool) : []).toEqual([]);
  });
});

describe('issue 9 case 5: a trainer with its own SIGTERM handler that logs on', () => {
  it('logd does not end the run at the signal; the rows logged after it are stored and no spill file is left', async () => {
    t = makeEnv();
    const trainer = script(t, 'trainer.mjs', `
      const run = await logd.init({ project: 'exits', name: 'preempted' });
      let stop = false;
      process.on('SIGTERM', () => { stop = true; });
      let step = 0;
      console.log('run ' + run.id);
      while (!stop) {
        run.log({ loss: step }, { step }); step++;
        if (step % 50 === 0) await new Promise((r) => setTimeout(r, 5));
      }
      // The checkpoint-on-preemption pattern: log some more, then finish.
      const before = step;
      try {
        for (let i = 0; i < 500; i++) { run.log({ loss: step }, { step }); step++; }
        console.log('after ' + (step - before));
      } catch (e) { console.log('threw ' + e.message); }
      const res = await run.finish();
      console.log('finished ' + res.state + ' ' + step);
    `);
    const p = spawnScript(t, trainer);
    await waitUntil(() => p.lines.some((l) => l.startsWith('run ')), 30_000, 'the trainer to start');
    await new Promise((r) => setTimeout(r, 300)); // it logs a while
    p.kill('SIGTERM');
    await waitUntil(() => p.lines.some((l) => l.startsWith('finished ')), 30_000, 'the trainer to finish');
    expect(p.lines.some((l) => l.startsWith('threw'))).toBe(false);
    expect(p.lines).toContain('after 500');
    const [, state, steps] = p.lines.find((l) => l.startsWith('finished '))!.split(' ');
    expect(state).toBe('finished');
    const id = p.lines.find((l) => l.startsWith('run '))!.slice(4);
    const rows = await exportJsonl(t, id);
    expect(rows.map((r) => r.loss)).toEqual(Array.from({ length: Number(steps) }, (_, i) => i));
    const spool = path.join(t.dataDir, 'spool');
    expect(fs.existsSync(spool) ? fs.readdirSync(spool) : []).toEqual([]);
  });
});

describe('issue 9 case 6: a process that attaches from another HOME and LOGD_DIR', () => {
  it('what it could not send reaches the daemon that owns the run, not a spool of its own', async () => {
    t = makeEnv();
    const otherHome = path.join(t.dir, 'other-home');
    fs.mkdirSync(otherHome);
    const child = script(t, 'elsewhere.mjs', `
      const run = await logd.attach(process.argv[2]);
      for (let s = 0; s < 500; s++) run.log({ elsewhere: s }, { step: s });
      console.log('logged');
      setInterval(() => {}, 1000); // until SIGTERM: nothing was sent (the flush interval is a minute)
    `);
    const owner = script(t, 'owner6.mjs', `
      import fs from 'node:fs';
      const run = await logd.init({ project: 'exits', name: 'owner6' });
      run.log({ owner: 0 }, { step: 0 });
      console.log('run ' + run.id + ' ' + run.handle());
      while (!fs.existsSync(process.argv[2])) await new Promise((r) => setTimeout(r, 20));
      const res = await run.finish({ timeoutMs: 15000 });
      console.log('finished ' + res.state);
    `);
    const go = path.join(t.dir, 'go');
    const o = spawnScript(t, owner, [go]);
    await waitUntil(() => o.lines.some((l) => l.startsWith('run ')), 30_000, 'the owner to create its run');
    const [, id, handle] = o.lines.find((l) => l.startsWith('run '))!.split(' ');
    // A scrubbed environment: another HOME, no LOGD_DIR, LOGD_RUNTIME_DIR or LOGD_SERVICE; only the handle.
    const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: otherHome, LOGD_FLUSH_INTERVAL_MS: '60000' };
    const c = spawn(process.execPath, [child, handle], { env, stdio: ['ignore', 'pipe', 'inherit'] });
    const lines: string[] = [];
    c.stdout!.on('data', (d: Buffer) => lines.push(...d.toString().split('\n').filter(Boolean)));
    await waitUntil(() => lines.includes('logged'), 30_000, 'the child to log');
    const exited = new Promise((r) => c.once('exit', r));
    c.kill('SIGTERM');
    await exited;
    fs.writeFileSync(go, '');
    await waitUntil(() => o.lines.some((l) => l.startsWith('finished ')), 30_000, 'the owner to finish');
    expect(o.lines.find((l) => l.startsWith('finished '))).toBe('finished finished');
    const raw = await exportJsonl(t, id, ['--raw']);
    expect(raw.filter((x) => 'elsewhere' in x).map((x) => x.elsewhere)).toEqual(Array.from({ length: 500 }, (_, i) => i));
    expect(fs.existsSync(path.join(otherHome, '.local', 'share', 'logd', 'spool'))).toBe(false);
  });

  it('when the owning daemon\'s spool cannot take them, the rows are reported as lost, with their number', async () => {
    t = makeEnv();
    const otherHome = path.join(t.dir, 'other-home');
    fs.mkdirSync(otherHome);
    const owner = script(t, 'owner6b.mjs', `
      const run = await logd.init({ project: 'exits', name: 'owner6b' });
      console.log('run ' + run.id + ' ' + run.handle());
      setInterval(() => {}, 1000);
    `);
    const child = script(t, 'elsewhere-b.mjs', `
      const run = await logd.attach(process.argv[2]);
      for (let s = 0; s < 500; s++) run.log({ elsewhere: s }, { step: s });
      console.log('logged');
      setInterval(() => {}, 1000);
    `);
    const o = spawnScript(t, owner);
    try {
      await waitUntil(() => o.lines.some((l) => l.startsWith('run ')), 30_000, 'the owner to create its run');
      const handle = o.lines.find((l) => l.startsWith('run '))!.split(' ')[2];
      fs.rmSync(path.join(t.dataDir, 'spool'), { recursive: true, force: true });
      fs.writeFileSync(path.join(t.dataDir, 'spool'), 'not a directory'); // the daemon's spool is unusable
      const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: otherHome, LOGD_FLUSH_INTERVAL_MS: '60000' };
      const c = spawn(process.execPath, [child, handle], { env, stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      let err = '';
      c.stdout!.on('data', (d: Buffer) => (out += d.toString()));
      c.stderr!.on('data', (d: Buffer) => (err += d.toString()));
      await waitUntil(() => out.includes('logged'), 30_000, 'the child to log');
      const exited = new Promise((r) => c.once('close', r)); // 'close': its last stderr lines are read too
      c.kill('SIGTERM');
      await exited;
      expect(err).toMatch(/500 unsent rows could not be written to .*\/data\/spool\/.* and are lost/);
      expect(fs.existsSync(path.join(otherHome, '.local'))).toBe(false); // nothing went silently somewhere else
    } finally {
      o.kill('SIGKILL');
    }
  });
});

describe('a finished process ends at once', () => {
  it('after finish() nothing of logd keeps the event loop alive (no timer, socket or handle left to wait for)', async () => {
    t = makeEnv();
    // Both ways a run meets its environment call: finished before the call is answered, and after.
    const file = script(t, 'short.mjs', `
      const run = await logd.init({ project: 'exits', name: 'short' });
      run.log({ x: 1 });
      if (process.argv[2] === 'late') await new Promise((r) => setTimeout(r, 300));
      await run.finish();
      setImmediate(() => {
        // The process's own stdio is not logd's: every other handle and timer is.
        const handles = process._getActiveHandles().filter((h) => h !== process.stdout && h !== process.stderr && h !== process.stdin).map((h) => h.constructor.name);
        const timers = process.getActiveResourcesInfo().filter((x) => x === 'Timeout');
        console.log(JSON.stringify([...handles, ...timers]));
      });
    `);
    for (const when of ['early', 'late']) {
      const r = await runScript(t, file, [when]);
      expect(r.exitCode, r.stderr).toBe(0);
      const left = JSON.parse(r.stdout.trim().split('\n').pop()!) as string[];
      expect(left, `${when}: ${r.stdout}`).toEqual([]);
    }
  });
});
