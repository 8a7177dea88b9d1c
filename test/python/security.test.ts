// The Python client and another local user (issue 13 case 1, issue 24 item
// 2, as test/security-other-user.test.ts checks for TypeScript): a runtime dir
// is used only if it is the user's own, mode 0700, not a symlink; one that
// another user took first is passed over for a private fallback; a daemon
// whose listening process runs as another user gets nothing, not even the
// token. The attacker is a second account (`logd-other`) whose processes run
// under setpriv, from a copy of the built daemon it can read
// (test/other-user.ts); the victim is the user running the tests.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createHash } from 'node:crypto';
import type { ChildProcess } from 'node:child_process';
import { execa } from 'execa';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { otherUser, asUser, spawnAs, homeFor, stageFor, unstage, type OtherUser } from '../other-user.js';
import { makeEnv, waitUntil, cliJson, serviceFile, type TestEnv } from '../helpers.js';
import { FIXTURES, pythonMissing, runPython } from './py-helpers.js';

const VICTIM = path.join(FIXTURES, 'init_worker.py'); // a run whose config holds an API key, 10 rows
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

const attackerHome = (u: OtherUser) => homeFor(u, t.dir);

const storedRuns = (dataDir: string) => (fs.existsSync(path.join(dataDir, 'runs')) ? fs.readdirSync(path.join(dataDir, 'runs')) : []);

describe.skipIf(pythonMissing !== null)(`Python client: another local user${pythonMissing ? ` (skipped: ${pythonMissing})` : ''}`, () => {
  for (const form of ['directory', 'symlink'] as const) {
    it(`issue 24 item 2: /tmp/logd-<uid> taken by another user (a ${form}, with that user's daemon serving behind it): the victim's run goes to its own daemon in a private fallback, the attacker gets nothing`, async (ctx) => {
      const u = await otherUser();
      if (typeof u === 'string') return ctx.skip(`another local user: ${u}`);
      const { node, cli } = stageFor(u);
      t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
      fs.chmodSync(t.dir, 0o755);
      const tmp = path.join(t.dir, 'tmp');
      fs.mkdirSync(tmp);
      fs.chmodSync(tmp, 0o1777);
      const key = sha(t.dataDir).slice(0, 12);
      const squatted = path.join(tmp, `logd-${process.getuid!()}`);
      const home = attackerHome(u);
      const real = form === 'directory' ? squatted : path.join(home, 'bait');
      const mk = await execa('setpriv', [...asUser(u), 'sh', '-c', 'mkdir -m 0755 "$1" && mkdir -m 0700 "$1/$2" && { [ -z "$3" ] || ln -s "$1" "$3"; }', 'sh', real, key, form === 'symlink' ? squatted : ''], { reject: false });
      expect(mk.exitCode, mk.stderr).toBe(0);
      const attackerEnv = { PATH: process.env.PATH, HOME: home, LOGD_DIR: path.join(home, 'data'), LOGD_RUNTIME_DIR: path.join(real, key), LOGD_SAMPLE_INTERVAL_MS: '0' };
      const daemon = asAttacker(u, [node, cli, 'serve'], attackerEnv);
      await waitUntil(() => serviceFile(path.join(squatted, key))?.pid === daemon.pid, 20_000, `the attacker's daemon to serve in ${squatted}/${key}: ${daemon.out()}`);

      // The victim has no XDG_RUNTIME_DIR or LOGD_RUNTIME_DIR: its runtime dir falls back to the temp dir, then,
      // taken, to its own XDG_STATE_HOME (or ~/.local/state).
      const stateHome = form === 'directory' ? path.join(t.dir, 'state') : path.join(t.dir, 'home', '.local', 'state');
      const env: Record<string, string> = { TMPDIR: tmp, LOGD_RUNTIME_DIR: '', XDG_RUNTIME_DIR: '', XDG_STATE_HOME: '' };
      if (form === 'directory') env.XDG_STATE_HOME = stateHome;
      else fs.mkdirSync((env.HOME = path.join(t.dir, 'home')), { mode: 0o700 });
      const fallback = path.join(stateHome, 'logd', `run-${os.hostname()}`, key);
      const r = await runPython(t, [VICTIM], { env });
      expect(r.exitCode, r.all).toBe(0);
      expect(r.stdout, r.all).toMatch(/^ok \S+ finished/m);
      const lines = r.stderr.split('\n').filter((l) => l.includes(squatted));
      expect(lines, r.all).toHaveLength(1);
      expect(lines[0]).toMatch(new RegExp(`^logd: not using ${esc(squatted)} as the runtime dir: another local user, uid ${u.uid} \\(logd-other\\), made it \\(.*(is owned by uid ${u.uid}|is a symbolic link)`));
      expect(lines[0]).toContain(`Using ${fallback} instead`);
      expect(fs.statSync(fallback).mode & 0o777).toBe(0o700);

      // A later process of the victim (the TypeScript CLI) finds the same daemon; every row is in the victim's store.
      const victim: TestEnv = { ...t, env: { ...t.env, ...env } };
      expect((await cliJson(victim, ['status'])).pid).toBe(serviceFile(fallback)!.pid);
      const shown = await cliJson(victim, ['show', r.stdout.match(/^ok (\S+)/m)![1]]);
      expect(shown.historyRows).toBe(10);
      expect(shown.config).toEqual({ apiKey: 'sk-live-0123456789' });
      expect(serviceFile(path.join(squatted, key))?.pid).toBe(daemon.pid);
      expect(storedRuns(path.join(home, 'data'))).toEqual([]);

      // Issue 32 item 7 / issue 41: the squat goes; the victim's daemon still serves from the fallback. The next
      // Python process looks in the freed default dir, then finds that daemon through the data dir's owner file
      // (it must not start one: LOGD_NO_AUTOSTART, and LOGD_ON_ERROR=raise so a miss is an error, not a deferred run).
      daemon.kill('SIGKILL');
      await waitUntil(() => daemon.exitCode !== null || daemon.signalCode !== null, 10_000, "the attacker's daemon to exit");
      const rm = await execa('setpriv', [...asUser(u), 'rm', '-rf', squatted, real], { reject: false });
      expect(rm.exitCode, rm.stderr).toBe(0);
      const again = await runPython(t, [VICTIM], { env: { ...env, LOGD_NO_AUTOSTART: '1', LOGD_ON_ERROR: 'raise' } });
      expect(again.stdout, again.all).toMatch(/^ok \S+ finished/m);
      expect(again.stderr).not.toContain('not using');
      expect((await cliJson(victim, ['status'])).pid).toBe(serviceFile(fallback)!.pid);
    });
  }

  it('issue 13 case 1: LOGD_SERVICE naming another user\'s daemon is refused before anything is sent', async (ctx) => {
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
    // LOGD_ON_ERROR=raise: init() raises the refusal instead of going on with a deferred run (python/logd/deferred.py).
    const r = await runPython(t, [VICTIM], { env: { LOGD_SERVICE: `${svc.socket}#${svc.token}`, LOGD_NO_AUTOSTART: '1', LOGD_ON_ERROR: 'raise' } });
    expect(r.exitCode, r.all).toBe(0);
    expect(storedRuns(path.join(home, 'data'))).toEqual([]);
    expect(r.stdout).toMatch(/^caught UntrustedDaemonError: logd: refusing to talk to the daemon at unix:.*nothing was sent/m);
    expect(r.stdout).toMatch(new RegExp(`uid ${u.uid}`));
  });

  it('issue 13 case 1: a runtime dir that is a symlink, or that others can write, is refused and nothing is started in it', async () => {
    t = makeEnv();
    const target = path.join(t.dir, 'elsewhere');
    fs.mkdirSync(target, { mode: 0o700 });
    const link = path.join(t.dir, 'rt-link');
    fs.symlinkSync(target, link);
    const viaLink = await runPython(t, [VICTIM], { env: { LOGD_RUNTIME_DIR: link, LOGD_ON_ERROR: 'raise' } });
    expect(viaLink.stdout, viaLink.all).toMatch(/^caught UntrustedDirError: .*is a symbolic link/m);
    expect(fs.readdirSync(target)).toEqual([]);

    const open = path.join(t.dir, 'rt-open');
    fs.mkdirSync(open);
    fs.chmodSync(open, 0o777);
    const viaOpen = await runPython(t, [VICTIM], { env: { LOGD_RUNTIME_DIR: open, LOGD_ON_ERROR: 'raise' } });
    expect(viaOpen.stdout, viaOpen.all).toMatch(/^caught UntrustedDirError: .*has mode 0777, not 0700/m);
    expect(fs.readdirSync(open)).toEqual([]);

    // A directory of the user's that nobody else can write is tightened to 0700 and used.
    const loose = path.join(t.dir, 'rt-loose');
    fs.mkdirSync(loose);
    fs.chmodSync(loose, 0o755);
    const ok = await runPython(t, [VICTIM], { env: { LOGD_RUNTIME_DIR: loose } });
    expect(ok.stdout, ok.all).toMatch(/^ok \S+ finished/m);
    expect(fs.statSync(loose).mode & 0o777).toBe(0o700);
  });
});
