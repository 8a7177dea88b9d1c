// No password on a command line (issue 24 item 6): every local user reads
// /proc/<pid>/cmdline. --store and --upload refuse a URL that carries one and
// say where it goes instead; --store-url-file / --upload-url-file take only a
// private regular file of the user's; a daemon started that way shows another
// user no secret; and a URL without a password finds it in PGPASSFILE /
// ~/.pgpass (logd reads the file itself: pg's own reading is deprecated).
import fs from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { passwordFor } from '../../dist/daemon/upload/pgpass.js';
import { otherUser, asUser } from '../other-user.js';
import { pgUnavailable, startPg, type PgCluster } from '../pg/cluster.js';
import { cli, cliJson, makeEnv, runScript, script, serviceFile, startDaemon, waitUntil, type TestEnv } from '../helpers.js';
import { waitUploaded } from './helpers.js';

const SECRET = 'S3cr3t-in-argv';
const WITH_PASSWORD = `postgres://logd:${SECRET}@127.0.0.1:1/logd`;
let t: TestEnv | undefined;
afterEach(async () => {
  await t?.cleanup();
  t = undefined;
});

/** A file holding `text`, with `mode`. */
function urlFile(env: TestEnv, name: string, text: string, mode = 0o600): string {
  const f = path.join(env.dir, name);
  fs.writeFileSync(f, text);
  fs.chmodSync(f, mode);
  return f;
}

describe('a password on the command line', () => {
  it('every --store and --upload refuses a URL that carries one (exit 2), says where it goes instead, and repeats no secret', async () => {
    t = makeEnv();
    const commands: Array<[string[], 'store' | 'upload']> = [
      [['serve', '--upload', WITH_PASSWORD], 'upload'],
      [['sync', '--all', '--upload', WITH_PASSWORD], 'upload'],
      [['runs', '--store', WITH_PASSWORD], 'store'],
      [['show', 'r1', '--store', WITH_PASSWORD], 'store'],
      [['export', 'r1', '--store', WITH_PASSWORD], 'store'],
      [['ui', '--port', '0', '--store', WITH_PASSWORD], 'store'],
      [['store', 'migrate', '--store', WITH_PASSWORD], 'store'],
      [['store', 'compact', '--store', WITH_PASSWORD], 'store'],
      [['store', 'prune', '--older-than', '30d', '--store', WITH_PASSWORD], 'store'],
      [['runs', '--store', `postgres://logd@127.0.0.1:1/logd?sslmode=disable&password=${SECRET}`], 'store'],
    ];
    for (const [args, kind] of commands) {
      const r = await cli(t, args, { reject: false });
      const what = `logd ${args.slice(0, 2).join(' ')}: ${r.stderr}`;
      expect(r.exitCode, what).toBe(2);
      expect(r.stderr, what).toMatch(new RegExp(`^logd: --${kind} postgres://logd(:\\*\\*\\*)?@127\\.0\\.0\\.1:1/logd.*: refusing a URL with a password on the command line, where every local user can read it`));
      for (const where of ['~/.pgpass', 'PGPASSFILE', kind === 'store' ? 'LOGD_STORE_URL' : 'LOGD_UPLOAD_URL', `--${kind}-url-file PATH`]) expect(r.stderr, what).toContain(where);
      expect(r.stdout + r.stderr, what).not.toContain(SECRET);
    }
    // `serve` refused before it started anything.
    expect(serviceFile(t.runtimeDir)).toBeNull();
  });

  it('--store-url-file and --upload-url-file take only a private regular file of the user\'s, and say why not', async () => {
    t = makeEnv();
    const env = t;
    const refused = async (args: string[], re: RegExp) => {
      const r = await cli(env, args, { reject: false, timeout: 10_000 });
      expect(r.exitCode, r.stderr).toBe(2);
      expect(r.stderr).toMatch(re);
      expect(r.stderr).not.toContain(SECRET);
    };
    const open = urlFile(t, 'open', WITH_PASSWORD, 0o644);
    await refused(['runs', '--store-url-file', open], new RegExp(`--store-url-file ${open} has mode 0644: other local users may read the password in it; make it private with \`chmod 600 ${open}\``));
    await refused(['serve', '--upload-url-file', open], /--upload-url-file .* has mode 0644/);
    await refused(['runs', '--store-url-file', t.dir], /is not a regular file \(a directory\)/);
    await refused(['runs', '--store-url-file', path.join(t.dir, 'missing')], /missing: no such file; write the store's postgres:\/\/ URL into a file of yours and `chmod 600` it/);
    const fifo = path.join(t.dir, 'fifo');
    await execa('mkfifo', ['-m', '600', fifo]);
    await refused(['runs', '--store-url-file', fifo], /is not a regular file \(a device, FIFO or socket\)/);
    await refused(['runs', '--store-url-file', urlFile(t, 'two', `${WITH_PASSWORD}\n${WITH_PASSWORD}\n`)], /must hold one postgres:\/\/ URL on one line; it holds 2 line/);
    await refused(['runs', '--store-url-file', urlFile(t, 'mysql', `mysql://logd:${SECRET}@db/logd\n`)], /must start with postgres:\/\//);
    const good = urlFile(t, 'url', `# the shared store\n${WITH_PASSWORD}\n`);
    await refused(['runs', '--store', 'postgres://logd@db/logd', '--store-url-file', good], /give --store or --store-url-file, not both/);
    const u = await otherUser();
    if (typeof u !== 'string') {
      const theirs = urlFile(t, 'theirs', WITH_PASSWORD);
      fs.chownSync(theirs, u.uid, u.gid);
      await refused(['runs', '--store-url-file', theirs], new RegExp(`is owned by uid ${u.uid}, not by you`));
    }

    // A good file is read: the store it names is tried (nothing listens on port 1), and the error hides the password.
    const r = await cli(t, ['runs', '--store-url-file', good], { reject: false });
    expect(r.exitCode).toBe(1);
    expect(r.stderr).toContain('cannot read the shared store postgres://logd:***@127.0.0.1:1/logd');
    expect(r.stderr).not.toContain(SECRET);
  });

  it('a daemon started with --upload-url-file shows another local user no password in its command line, and keeps serving while the store is away', async (ctx) => {
    t = makeEnv();
    const file = urlFile(t, 'upload-url', `${WITH_PASSWORD}\n`);
    const d = await startDaemon(t, ['--upload-url-file', file]);
    const st = await cliJson(t, ['status']);
    expect(st.pid).toBe(d.pid);
    expect(st.upload.target).toBe('postgres://logd:***@127.0.0.1:1/logd');
    await waitUntil(async () => (await cliJson(t!, ['status'])).upload.state === 'retrying', 30_000, 'the uploader to retry the unreachable store');
    expect(fs.readFileSync(`/proc/${d.pid}/cmdline`, 'utf8')).not.toContain(SECRET);

    const u = await otherUser();
    if (typeof u === 'string') return ctx.skip(`another local user: ${u}`);
    fs.chmodSync(t.dir, 0o755); // only the modes logd and the user set stand in the other user's way
    const asOther = (file: string) => execa('setpriv', [...asUser(u), 'cat', file], { reject: false, stripFinalNewline: false });
    const cmdline = await asOther(`/proc/${d.pid}/cmdline`);
    expect(cmdline.exitCode, cmdline.stderr).toBe(0);
    const argv = cmdline.stdout.split('\0');
    expect(argv).toContain('serve');
    expect(argv).toContain('--upload-url-file');
    expect(argv.join(' ')).not.toContain(SECRET);
    // What does hold the URL is the user's own: the file (0600) and, with LOGD_UPLOAD_URL, the environment (0400).
    expect((await asOther(file)).exitCode).not.toBe(0);
    expect((await asOther(`/proc/${d.pid}/environ`)).exitCode).not.toBe(0);
    expect(d.proc.exitCode).toBeNull();
    expect(d.stderr()).not.toContain(SECRET);
  });

  it('the password file parser: first match wins, `*` matches anything, `\\` escapes, a socket matches its dir or localhost', () => {
    const text = [
      '# comment',
      'db.example:5432:logd:reader:r3ad',
      'db.example:*:*:logd:pa\\:ss\\\\word',
      '*:*:*:logd:fallback:with:colons',
      'localhost:5433:logd:sock:via-socket',
    ].join('\n');
    expect(passwordFor(text, { host: 'db.example', port: 5432, database: 'logd', user: 'reader' })).toBe('r3ad');
    expect(passwordFor(text, { host: 'db.example', port: 6000, database: 'other', user: 'logd' })).toBe('pa:ss\\word');
    expect(passwordFor(text, { host: 'elsewhere', port: 5432, database: 'logd', user: 'logd' })).toBe('fallback:with:colons');
    expect(passwordFor(text, { host: '/run/postgresql', port: 5433, database: 'logd', user: 'sock' })).toBe('via-socket');
    expect(passwordFor(text, { host: 'db.example', port: 5432, database: 'logd', user: 'nobody' })).toBeUndefined();
  });
});

const why = pgUnavailable();
describe.skipIf(why !== null)(`a URL without a password, and PGPASSFILE${why ? ` (skipped: ${why})` : ''}`, () => {
  let pgc: PgCluster;
  beforeAll(async () => {
    pgc = await startPg();
  });
  afterAll(() => pgc?.destroy());

  it('store migrate, runs and the daemon\'s uploader log in with the password from PGPASSFILE; a file others can read is ignored, saying why', async () => {
    t = makeEnv();
    const bare = `postgres://logd@127.0.0.1:${pgc.port}/logd`;
    const pass = urlFile(t, 'pgpass', `127.0.0.1:${pgc.port}:logd:logd:${pgc.password}\n`);
    t.env.PGPASSFILE = pass;
    delete t.env.PGPASSWORD;

    // Readable by others: ignored as libpq ignores it, and the login fails with what to do.
    fs.chmodSync(pass, 0o644);
    const loose = await cli(t, ['store', 'migrate', '--store', bare], { reject: false });
    expect(loose.exitCode).toBe(1);
    expect(loose.stderr).toContain(`logd: ignoring the password file ${pass}: it has mode 0644, so other users may read it; make it private with \`chmod 600 ${pass}\``);
    expect(loose.stderr).toContain('no password was given: put it in ~/.pgpass (or the file PGPASSFILE names, mode 0600)');

    fs.chmodSync(pass, 0o600);
    const m = await cli(t, ['store', 'migrate', '--store', bare]);
    expect(m.stdout).toMatch(/schema version 0 -> 3/);
    expect(m.stderr).not.toMatch(/Deprecation|password file/);
    const runs = await cli(t, ['runs', '--store', bare]);
    expect(runs.stdout).toBe('no runs');
    expect(runs.stderr).toBe('');

    const d = await startDaemon(t, ['--upload', bare]);
    const w = script(t, 'w.mjs', `
      const run = await logd.init({ project: 'pgpass' });
      for (let s = 0; s < 500; s++) run.log({ v: s }, { step: s });
      await run.finish();
      console.log(run.id);
    `);
    const r = await runScript(t, w);
    expect(r.exitCode, r.stderr).toBe(0);
    await waitUploaded(t, bare, r.stdout.trim(), 500);
    expect(d.stderr()).not.toMatch(/Deprecation|password file|refused the login/);
  });
});
