// Another local user as an attacker (issue 13 cases 1 and 2, issue 24 item 2),
// with real processes: the attacker is a second account (`logd-other`) and
// every one of its processes runs under setpriv, from a copy of the built
// daemon it can read (test/other-user.ts: the checkout may be private). The
// victim is the user running the tests.
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { spawn, type ChildProcess } from 'node:child_process';
import { execa } from 'execa';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { otherUser, asUser, spawnAs, homeFor, stageFor, unstage, type OtherUser } from './other-user.js';
import { makeEnv, script, runScript, cli as logdCli, cliJson, waitUntil, alive, CLI, serviceFile, type TestEnv } from './helpers.js';

let t: TestEnv;
const attackerProcs: ChildProcess[] = [];
afterEach(async () => {
  for (const p of attackerProcs.splice(0)) if (p.exitCode === null) p.kill('SIGKILL');
  if (t) await t.cleanup();
});
afterAll(unstage);

const sha = (s: string) => createHash('sha256').update(s).digest('hex');
const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

const asAttacker = (u: OtherUser, args: string[], env: NodeJS.ProcessEnv) => spawnAs(u, args, env, attackerProcs);

/** The victim's training script: a run whose config holds a secret, 100 rows, finish. */
function victimScript(): string {
  return script(t, 'victim.mjs', `
    try {
      const run = await logd.init({ project: 'secret', config: { apiKey: 'sk-live-0123456789' } });
      for (let s = 0; s < 100; s++) run.log({ loss: 1 / (s + 1) }, { step: s });
      const res = await run.finish({ timeoutMs: 20000 });
      console.log('stored ' + run.id + ' ' + res.state);
    } catch (e) {
      console.log('refused ' + e.message);
    }
  `);
}

/** A data dir for the attacker's own daemon, owned by the attacker. */
const attackerHome = (u: OtherUser) => homeFor(u, t.dir);

const storedRuns = (dataDir: string) => (fs.existsSync(path.join(dataDir, 'runs')) ? fs.readdirSync(path.join(dataDir, 'runs')) : []);

describe('another local user', () => {
  for (const form of ['directory', 'symlink'] as const) {
    it(`issue 24 item 2: /tmp/logd-<uid> taken by another user (a ${form}, with that user's daemon serving behind it): the victim's run goes to its own daemon in a private fallback, the attacker gets nothing`, async (ctx) => {
      const u = await otherUser();
      if (typeof u === 'string') return ctx.skip(`another local user: ${u}`);
      const { node, cli } = stageFor(u);
      t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
      // The victim has no XDG_RUNTIME_DIR: the runtime dir falls back to the temp dir, here a /tmp of the test's own.
      fs.chmodSync(t.dir, 0o755);
      const tmp = path.join(t.dir, 'tmp');
      fs.mkdirSync(tmp);
      fs.chmodSync(tmp, 0o1777);
      const key = sha(t.dataDir).slice(0, 12);
      const squatted = path.join(tmp, `logd-${process.getuid!()}`);

      // The attacker gets there first: the victim's predictable runtime dir (or a symlink there to a dir of its
      // own), and a daemon serving in <it>/<hash>, just where the victim's daemon would be.
      const home = attackerHome(u);
      const real = form === 'directory' ? squatted : path.join(home, 'bait');
      const mk = await execa('setpriv', [...asUser(u), 'sh', '-c', 'mkdir -m 0755 "$1" && mkdir -m 0700 "$1/$2" && { [ -z "$3" ] || ln -s "$1" "$3"; }', 'sh', real, key, form === 'symlink' ? squatted : ''], { reject: false });
      expect(mk.exitCode, mk.stderr).toBe(0);
      const attackerEnv = { PATH: process.env.PATH, HOME: home, LOGD_DIR: path.join(home, 'data'), LOGD_RUNTIME_DIR: path.join(real, key), LOGD_SAMPLE_INTERVAL_MS: '0' };
      const daemon = asAttacker(u, [node, cli, 'serve'], attackerEnv);
      await waitUntil(() => serviceFile(path.join(squatted, key))?.pid === daemon.pid, 20_000, `the attacker's daemon to serve in ${squatted}/${key}: ${daemon.out()}`);

      // The fallback: under the victim's own XDG_STATE_HOME, or ~/.local/state.
      const victimEnv: NodeJS.ProcessEnv = { ...t.env, TMPDIR: tmp };
      for (const k of ['LOGD_RUNTIME_DIR', 'XDG_RUNTIME_DIR', 'XDG_STATE_HOME']) delete victimEnv[k];
      const stateHome = form === 'directory' ? path.join(t.dir, 'state') : path.join(t.dir, 'home', '.local', 'state');
      if (form === 'directory') victimEnv.XDG_STATE_HOME = stateHome;
      else fs.mkdirSync((victimEnv.HOME = path.join(t.dir, 'home')), { mode: 0o700 });
      const fallback = path.join(stateHome, 'logd', `run-${os.hostname()}`, key);
      const victim: TestEnv = { ...t, env: victimEnv };
      const takenLine = (stderr: string) => {
        const lines = stderr.split('\n').filter((l) => l.includes(squatted));
        expect(lines, stderr).toHaveLength(1);
        expect(lines[0]).toMatch(new RegExp(`^logd: not using ${esc(squatted)} as the runtime dir: another local user, uid ${u.uid} \\(logd-other\\), made it \\(.*(is owned by uid ${u.uid}|is a symbolic link)`));
        expect(lines[0]).toContain(`Using ${fallback} instead`);
      };

      // By hand (`logd serve`) for the symlink; a sidecar the training script starts for the directory.
      if (form === 'symlink') {
        const serve = spawn(process.execPath, [CLI, 'serve'], { env: victimEnv, stdio: ['ignore', 'ignore', 'pipe'] });
        let err = '';
        serve.stderr!.on('data', (d: Buffer) => (err += d.toString()));
        await waitUntil(() => serviceFile(fallback)?.pid === serve.pid, 20_000, `logd serve to serve in ${fallback}: ${err}`);
        takenLine(err);
      }
      const r = await runScript(victim, victimScript());
      expect(r.exitCode, r.stderr).toBe(0);
      expect(r.stdout, r.stderr).toMatch(/^stored \S+ finished/);
      takenLine(r.stderr);
      expect(fs.statSync(fallback).mode & 0o777).toBe(0o700);

      // A later process of the victim finds the same daemon, and every row is in the victim's own store.
      const own = serviceFile(fallback)!;
      expect((await cliJson(victim, ['status'])).pid).toBe(own.pid);
      const shown = await cliJson(victim, ['show', r.stdout.trim().split(' ')[1]]);
      expect(shown.historyRows).toBe(100);
      expect(shown.config).toEqual({ apiKey: 'sk-live-0123456789' });
      // The attacker's daemon is still there, and its store holds nothing of the victim's.
      expect(serviceFile(path.join(squatted, key))?.pid).toBe(daemon.pid);
      expect(storedRuns(path.join(home, 'data'))).toEqual([]);

      // Issue 32 item 7: the squat goes (the attacker stops and removes it). The victim's daemon still serves from
      // the fallback; the victim's next commands look in the freed default dir first, then find it through the
      // data dir's owner file: they use it, and `logd stop` stops it, instead of trying to start a second one.
      daemon.kill('SIGKILL');
      await waitUntil(() => daemon.exitCode !== null || daemon.signalCode !== null, 10_000, "the attacker's daemon to exit");
      const rm = await execa('setpriv', [...asUser(u), 'rm', '-rf', squatted, real], { reject: false });
      expect(rm.exitCode, rm.stderr).toBe(0);
      expect(fs.existsSync(squatted)).toBe(false);
      expect((await cliJson(victim, ['status'])).pid).toBe(own.pid);
      const again = await runScript(victim, victimScript());
      expect(again.stdout, again.stderr).toMatch(/^stored \S+ finished/);
      expect((await cliJson(victim, ['runs', '--project', 'secret'])).map((x: any) => x.historyRows)).toEqual([100, 100]);
      const stop = await logdCli(victim, ['stop'], { reject: false });
      expect(stop.exitCode, stop.stderr).toBe(0);
      await waitUntil(() => !alive(own.pid), 15_000, "the victim's daemon to stop");
    });
  }

  it('issue 13 case 1: LOGD_SERVICE naming another user\'s socket is refused before anything is sent', async (ctx) => {
    const u = await otherUser();
    if (typeof u === 'string') return ctx.skip(`another local user: ${u}`);
    t = makeEnv();
    fs.chmodSync(t.dir, 0o755);
    const home = attackerHome(u);
    const rt = path.join(home, 'rt');
    const attackerEnv = { PATH: process.env.PATH, HOME: home, LOGD_DIR: path.join(home, 'data'), LOGD_RUNTIME_DIR: rt, LOGD_SAMPLE_INTERVAL_MS: '0' };
    const { node, cli } = stageFor(u);
    const daemon = asAttacker(u, [node, cli, 'serve'], attackerEnv);
    await waitUntil(() => serviceFile(rt)?.pid === daemon.pid, 20_000, `the attacker's daemon to serve: ${daemon.out()}`);
    const svc = serviceFile(rt)!;

    // LOGD_ON_ERROR=raise: init() throws the refusal instead of going on with a deferred run (client/deferred.ts).
    const r = await runScript(t, victimScript(), [], { LOGD_SERVICE: `${svc.socket}#${svc.token}`, LOGD_NO_AUTOSTART: '1', LOGD_ON_ERROR: 'raise' });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(storedRuns(path.join(home, 'data'))).toEqual([]);
    expect(r.stdout).toMatch(/^refused /);
    expect(r.stdout).toMatch(new RegExp(`uid ${u.uid}`));
  });

  it('issue 13 case 1: a runtime dir that is a symlink, or that others can write, is refused and nothing is started in it', async () => {
    t = makeEnv();
    const target = path.join(t.dir, 'elsewhere');
    fs.mkdirSync(target, { mode: 0o700 });
    const link = path.join(t.dir, 'rt-link');
    fs.symlinkSync(target, link);
    // LOGD_ON_ERROR=raise: init() throws the refusal instead of going on with a deferred run (client/deferred.ts).
    const viaLink = await runScript(t, victimScript(), [], { LOGD_RUNTIME_DIR: link, LOGD_ON_ERROR: 'raise' });
    expect(viaLink.stdout).toMatch(/^refused .*is a symbolic link/);
    expect(fs.readdirSync(target)).toEqual([]);

    const open = path.join(t.dir, 'rt-open');
    fs.mkdirSync(open);
    fs.chmodSync(open, 0o777);
    const viaOpen = await runScript(t, victimScript(), [], { LOGD_RUNTIME_DIR: open, LOGD_ON_ERROR: 'raise' });
    expect(viaOpen.stdout).toMatch(/^refused .*has mode 0777, not 0700/);
    expect(fs.readdirSync(open)).toEqual([]);

    // A directory of the user's that nobody else can write is tightened to 0700 and used.
    const loose = path.join(t.dir, 'rt-loose');
    fs.mkdirSync(loose);
    fs.chmodSync(loose, 0o755);
    const ok = await runScript(t, victimScript(), [], { LOGD_RUNTIME_DIR: loose });
    expect(ok.stdout, ok.stderr).toMatch(/^stored \S+ finished/);
    expect(fs.statSync(loose).mode & 0o777).toBe(0o700);
  });

  it('issue 13 case 2: another user binding the predictable abstract lock name does not keep the victim\'s daemon from starting', async (ctx) => {
    const u = await otherUser();
    if (typeof u === 'string') return ctx.skip(`another local user: ${u}`);
    t = makeEnv();
    fs.chmodSync(t.dir, 0o755);
    // The lock name the daemon used: uid and a hash of the data dir, both known to anyone on the node.
    const lockName = `logd-lock-${process.getuid!()}-${sha(t.dataDir).slice(0, 16)}`;
    const squat = path.join(t.dir, 'squat.cjs');
    fs.writeFileSync(squat, `require('node:net').createServer().listen({ path: '\\0' + process.argv[2] }, () => console.log('bound'));`);
    fs.chmodSync(squat, 0o644);
    const squatter = asAttacker(u, [stageFor(u).node, squat, lockName], { PATH: process.env.PATH });
    await waitUntil(() => squatter.out().includes('bound'), 20_000, `the attacker to bind @${lockName}: ${squatter.out()}`);
    // The name really is taken.
    await new Promise<void>((resolve, reject) => {
      const probe = net.createServer();
      probe.once('error', (e: NodeJS.ErrnoException) => (e.code === 'EADDRINUSE' ? resolve() : reject(e)));
      probe.listen({ path: `\0${lockName}` }, () => probe.close(() => reject(new Error('the squatted name was free'))));
    });

    const r = await runScript(t, victimScript());
    expect(r.stdout, r.stderr).toMatch(/^stored \S+ finished/);
    const id = r.stdout.trim().split(' ')[1];
    const shown = await cliJson(t, ['show', id]);
    expect(shown.historyRows).toBe(100);
    expect(shown.config).toEqual({ apiKey: 'sk-live-0123456789' });
  });
});
