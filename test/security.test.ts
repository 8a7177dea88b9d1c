// Security across real processes: private socket and files, another local
// user locked out, the token kept out of logs and status, exports that never
// overwrite unasked.
import fs from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';
import { otherUser } from './other-user.js';
import { makeEnv, startDaemon, serviceFile, script, spawnScript, runScript, cli, waitUntil, type TestEnv } from './helpers.js';

let t: TestEnv;
afterEach(async () => t && (await t.cleanup()));

const mode = (p: string) => fs.statSync(p).mode & 0o777;

describe('security', () => {
  it('socket dir 0700, socket and service file 0600; another local user can neither connect nor read the token', async (ctx) => {
    t = makeEnv();
    const d = await startDaemon(t, ['--port', '0']);
    const svc = serviceFile(t.runtimeDir)!;
    const sock = svc.socket.replace(/^unix:/, '');
    expect(mode(t.runtimeDir)).toBe(0o700);
    expect(mode(sock)).toBe(0o600);
    expect(mode(path.join(t.runtimeDir, 'service.json'))).toBe(0o600);
    expect(svc.tcp).toMatch(/^127\.0\.0\.1:/);
    // The daemon's own log never shows the token.
    expect(d.stderr()).not.toContain(svc.token);
    const st = await cli(t, ['status']);
    expect(st.stdout + st.stderr).not.toContain(svc.token);

    const other = await otherUser();
    if (typeof other === 'string') {
      ctx.skip(`another local user: ${other}`);
      return;
    }
    // Open the test's own temp dir to everyone, so that only logd's own modes stand in the way.
    fs.chmodSync(t.dir, 0o755);
    const probe = path.join(t.dir, 'probe.cjs');
    fs.writeFileSync(probe, `
      const net = require('node:net'), fs = require('node:fs');
      const out = {};
      try { fs.readFileSync(process.argv[3]); out.read = 'ok'; } catch (e) { out.read = e.code; }
      const c = net.connect(process.argv[2]);
      c.on('connect', () => { out.connect = 'ok'; console.log(JSON.stringify(out)); process.exit(0); });
      c.on('error', (e) => { out.connect = e.code; console.log(JSON.stringify(out)); process.exit(0); });
    `);
    fs.chmodSync(probe, 0o644);
    const asOther = (file: string) => execa('setpriv', [`--reuid=${other.uid}`, `--regid=${other.gid}`, '--clear-groups', process.execPath, probe, sock, file], { reject: false, timeout: 20_000 });
    const r = await asOther(path.join(t.runtimeDir, 'service.json'));
    expect(r.exitCode, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ read: 'EACCES', connect: 'EACCES' });
    // Even with the runtime dir opened up, the socket itself (0600) refuses the other user.
    fs.chmodSync(t.runtimeDir, 0o755);
    const r2 = await asOther(path.join(t.runtimeDir, 'service.json'));
    expect(JSON.parse(r2.stdout)).toEqual({ read: 'EACCES', connect: 'EACCES' });
    // The same probe as ourselves connects: the refusals above are about the user.
    const self = await execa(process.execPath, [probe, sock, path.join(t.runtimeDir, 'service.json')]);
    expect(JSON.parse(self.stdout)).toEqual({ read: 'ok', connect: 'ok' });
  });

  it('spill and overflow files are 0600 in a 0700 spool dir, and the token is not in them', async () => {
    t = makeEnv({ LOGD_MAX_BUFFER_MB: '1' });
    const d = await startDaemon(t);
    const w = script(t, 'spill.mjs', `
      import fs from 'node:fs';
      const run = await logd.init({ project: 'spill' });
      run.log({ v: 0 }, { step: 0 });
      await run.flush();
      console.log('run ' + run.id);
      while (!fs.existsSync(process.argv[2])) await new Promise((r) => setTimeout(r, 10));
      for (let s = 1; s <= 60000; s++) run.log({ v: s, a: 1, b: 2, c: 3 }, { step: s });
      await new Promise((r) => setTimeout(r, 300));
      const dir = process.env.LOGD_DIR + '/spool';
      console.log('overflow ' + JSON.stringify(fs.readdirSync(dir).map((f) => [f, fs.statSync(dir + '/' + f).mode & 0o777])));
      process.exit(5);
    `);
    const go = path.join(t.dir, 'go');
    const worker = spawnScript(t, w, [go], { LOGD_NO_AUTOSTART: '1' });
    await waitUntil(() => worker.lines.some((l) => l.startsWith('run ')), 20_000, 'the worker to start');
    process.kill(d.pid, 'SIGSTOP');
    try {
      fs.writeFileSync(go, '');
      await worker.closed;
      const spool = path.join(t.dataDir, 'spool');
      expect(mode(spool)).toBe(0o700);
      const overflow = JSON.parse(worker.lines.find((l) => l.startsWith('overflow '))!.slice(9)) as Array<[string, number]>;
      expect(overflow.some(([f]) => f.endsWith('.overflow'))).toBe(true);
      for (const [, m] of overflow) expect(m).toBe(0o600);
      const spills = fs.readdirSync(spool).filter((f) => f.endsWith('.spill'));
      expect(spills).toHaveLength(1);
      expect(mode(path.join(spool, spills[0]))).toBe(0o600);
      expect(fs.readFileSync(path.join(spool, spills[0])).includes(Buffer.from(serviceFile(t.runtimeDir)!.token))).toBe(false);
    } finally {
      process.kill(d.pid, 'SIGCONT');
    }
  });

  it('export never overwrites an existing file unless --force is given', async () => {
    t = makeEnv();
    const w = script(t, 'w.mjs', `
      const run = await logd.init({ project: 'export' });
      for (let s = 0; s < 10; s++) run.log({ v: s }, { step: s });
      await run.finish();
      console.log(run.id);
    `);
    const r = await runScript(t, w);
    const id = r.stdout.trim();
    const out = path.join(t.dir, 'precious.txt');
    fs.writeFileSync(out, 'do not touch');
    const refused = await cli(t, ['export', id, '--output', out], { reject: false });
    expect(refused.exitCode).not.toBe(0);
    expect(refused.stderr).toMatch(/exists; add --force/);
    expect(fs.readFileSync(out, 'utf8')).toBe('do not touch');
    // A symlink planted at the output path is not followed either.
    const link = path.join(t.dir, 'link.jsonl');
    fs.symlinkSync(out, link);
    expect((await cli(t, ['export', id, '--output', link], { reject: false })).exitCode).not.toBe(0);
    expect(fs.readFileSync(out, 'utf8')).toBe('do not touch');
    const forced = await cli(t, ['export', id, '--output', out, '--force']);
    expect(forced.exitCode).toBe(0);
    expect(fs.readFileSync(out, 'utf8').trim().split('\n')).toHaveLength(10);
  });
});
