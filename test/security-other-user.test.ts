// Another local user as an attacker (issue 13 cases 1 and 2), with real
// processes: the attacker is a second account (`logd-other`) and every one of
// its processes runs under setpriv. The victim is the user running the tests.
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { createHash } from 'node:crypto';
import type { ChildProcess } from 'node:child_process';
import { execa } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';
import { otherUser, asUser, spawnAs, homeFor, type OtherUser } from './other-user.js';
import { makeEnv, script, runScript, cliJson, waitUntil, CLI, serviceFile, type TestEnv } from './helpers.js';

let t: TestEnv;
const attackerProcs: ChildProcess[] = [];
afterEach(async () => {
  for (const p of attackerProcs.splice(0)) if (p.exitCode === null) p.kill('SIGKILL');
  if (t) await t.cleanup();
});

const sha = (s: string) => createHash('sha256').update(s).digest('hex');

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
  it('issue 13 case 1: a daemon another user runs in a pre-created /tmp/logd-<uid>/<hash> never receives the victim\'s run', async (ctx) => {
    const u = await otherUser();
    if (typeof u === 'string') return ctx.skip(`another local user: ${u}`);
    t = makeEnv();
    // The victim has no XDG_RUNTIME_DIR: the runtime dir falls back to the temp dir, here a /tmp of the test's own.
    fs.chmodSync(t.dir, 0o755);
    const tmp = path.join(t.dir, 'tmp');
    fs.mkdirSync(tmp);
    fs.chmodSync(tmp, 0o1777);
    const victimEnv: NodeJS.ProcessEnv = { ...t.env, TMPDIR: tmp };
    delete victimEnv.LOGD_RUNTIME_DIR;
    delete victimEnv.XDG_RUNTIME_DIR;
    const victimUid = process.getuid!();
    const hijacked = path.join(tmp, `logd-${victimUid}`, sha(t.dataDir).slice(0, 12));

    // The attacker gets there first: the victim's predictable runtime dir, and a daemon serving in it.
    const home = attackerHome(u);
    const mk = await execa('setpriv', [...asUser(u), 'sh', '-c', 'mkdir -m 0755 "$1" && mkdir -m 0700 "$2"', 'sh', path.dirname(hijacked), hijacked], { reject: false });
    expect(mk.exitCode, mk.stderr).toBe(0);
    const attackerEnv = { PATH: process.env.PATH, HOME: home, LOGD_DIR: path.join(home, 'data'), LOGD_RUNTIME_DIR: hijacked, LOGD_SAMPLE_INTERVAL_MS: '0' };
    const daemon = asAttacker(u, [process.execPath, CLI, 'serve'], attackerEnv);
    await waitUntil(() => serviceFile(hijacked)?.pid === daemon.pid, 20_000, `the attacker's daemon to serve in ${hijacked}: ${daemon.out()}`);
    expect(fs.statSync(hijacked).uid).toBe(u.uid);

    const r = await runScript({ ...t, env: victimEnv }, victimScript());
    expect(r.exitCode, r.stderr).toBe(0);
    // The attacker's store holds nothing of the victim's.
    expect(storedRuns(path.join(home, 'data'))).toEqual([]);
    expect(r.stdout).toMatch(/^refused /);
    expect(r.stdout).toContain(path.dirname(hijacked));
    expect(r.stdout).toMatch(new RegExp(`owned by uid ${u.uid}`));
    expect(r.stdout).toMatch(/XDG_RUNTIME_DIR|LOGD_RUNTIME_DIR/);

    // The advice works: with a private runtime dir the same script stores its run with the victim's own daemon.
    fs.mkdirSync(path.join(t.dir, 'xdg'), { mode: 0o700 });
    const ok = await runScript({ ...t, env: { ...victimEnv, XDG_RUNTIME_DIR: path.join(t.dir, 'xdg') } }, victimScript());
    expect(ok.stdout, ok.stderr).toMatch(/^stored \S+ finished/);
    expect(storedRuns(path.join(home, 'data'))).toEqual([]);
  });

  it('issue 13 case 1: LOGD_SERVICE naming another user\'s socket is refused before anything is sent', async (ctx) => {
    const u = await otherUser();
    if (typeof u === 'string') return ctx.skip(`another local user: ${u}`);
    t = makeEnv();
    fs.chmodSync(t.dir, 0o755);
    const home = attackerHome(u);
    const rt = path.join(home, 'rt');
    const attackerEnv = { PATH: process.env.PATH, HOME: home, LOGD_DIR: path.join(home, 'data'), LOGD_RUNTIME_DIR: rt, LOGD_SAMPLE_INTERVAL_MS: '0' };
    const daemon = asAttacker(u, [process.execPath, CLI, 'serve'], attackerEnv);
    await waitUntil(() => serviceFile(rt)?.pid === daemon.pid, 20_000, `the attacker's daemon to serve: ${daemon.out()}`);
    const svc = serviceFile(rt)!;

    const r = await runScript(t, victimScript(), [], { LOGD_SERVICE: `${svc.socket}#${svc.token}`, LOGD_NO_AUTOSTART: '1' });
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
    const viaLink = await runScript(t, victimScript(), [], { LOGD_RUNTIME_DIR: link });
    expect(viaLink.stdout).toMatch(/^refused .*is a symbolic link/);
    expect(fs.readdirSync(target)).toEqual([]);

    const open = path.join(t.dir, 'rt-open');
    fs.mkdirSync(open);
    fs.chmodSync(open, 0o777);
    const viaOpen = await runScript(t, victimScript(), [], { LOGD_RUNTIME_DIR: open });
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
    const squatter = asAttacker(u, [process.execPath, squat, lockName], { PATH: process.env.PATH });
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
