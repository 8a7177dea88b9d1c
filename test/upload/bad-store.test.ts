// A store that cannot be used — a wrong password, an unreachable host, a
// database that is not logd's, a schema newer than this logd — gives a clear
// status line and log line, loses nothing locally, and uploads start once it
// is fixed. The store's password appears nowhere.
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { pgUnavailable, startPg, type PgCluster } from '../pg/cluster.js';
import { cli, cliJson, killDaemon, runScript, script, startDaemon, waitUntil, type TestEnv } from '../helpers.js';
import { nodeEnv, rawRows, reading, waitUploaded } from './helpers.js';

const why = pgUnavailable();
let pgc: PgCluster;
let t: TestEnv | undefined;

async function oneRun(env: TestEnv): Promise<string> {
  const w = script(env, 'w.mjs', `
    const run = await logd.init({ project: 'bad', group: 'bad' });
    for (let s = 0; s < 500; s++) run.log({ v: s }, { step: s });
    await run.finish();
    console.log(run.id);
  `);
  const r = await runScript(env, w);
  expect(r.exitCode, r.stderr).toBe(0);
  return r.stdout.trim();
}

async function statusOf(env: TestEnv): Promise<any> {
  return (await cliJson(env, ['status'])).upload;
}

/** Waits for the uploader to report an error matching `re`; returns the status text and JSON. */
/** Waits for the error, and for the backlog to be measured (the first failed connect can come before it). */
async function waitForError(env: TestEnv, re: RegExp, backlogRuns = 0): Promise<{ text: string; json: any }> {
  let json: any = null;
  await waitUntil(async () => {
    json = await statusOf(env);
    return json?.state === 'retrying' && re.test(json.lastError ?? '') && (json.backlog?.runs ?? 0) >= backlogRuns;
  }, 60_000, `the upload status to report ${re} (last: ${JSON.stringify(json)})`);
  return { text: (await cli(env, ['status'])).stdout, json };
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
}

/** Every place a password could leak: status, logs, JSON listings, the data dir's files. */
async function expectNoSecret(env: TestEnv, daemonLog: string, secrets: string[]): Promise<void> {
  const texts = [daemonLog, (await cli(env, ['status'])).stdout, JSON.stringify(await cliJson(env, ['status'])), JSON.stringify(await cliJson(env, ['runs']))];
  for (const f of fs.readdirSync(env.dataDir)) if (f.endsWith('.json')) texts.push(fs.readFileSync(path.join(env.dataDir, f), 'utf8'));
  for (const s of secrets) for (const text of texts) expect(text).not.toContain(s);
}

describe.skipIf(why !== null)(`a store that cannot be used${why ? ` (skipped: ${why})` : ''}`, () => {
  beforeAll(async () => {
    pgc = await startPg();
  });
  afterAll(() => pgc?.destroy());
  afterEach(async () => {
    await t?.cleanup();
    t = undefined;
  });

  it('a wrong password: clear status and log line, the run stays local, uploads start once the password is right', async () => {
    const wrong = 'Wr0ng-pass%word';
    const url = pgc.urlFor('logd', encodeURIComponent(wrong));
    t = nodeEnv('node-pw', url);
    const d = await startDaemon(t);
    const id = await oneRun(t);
    const { text, json } = await waitForError(t, /refused the login/, 1);
    expect(text).toContain(`upload:    postgres://logd:***@127.0.0.1:${pgc.port}/logd as node "node-pw", retrying`);
    expect(json.lastError).toContain('refused the login (password authentication failed for user "logd"); fix the user or password where the daemon gets them');
    expect(d.stderr()).toMatch(/upload: the shared store at postgres:\/\/logd:\*\*\*@127\.0\.0\.1:\d+\/logd refused the login/);
    expect(json.backlog.runs).toBe(1);
    expect(await rawRows(t, id)).toHaveLength(500);
    await expectNoSecret(t, d.stderr(), [wrong, encodeURIComponent(wrong)]);
    // Fixed on the server's side: the same URL now logs in.
    pgc.psql(`ALTER ROLE logd PASSWORD '${wrong}'`);
    try {
      await waitUploaded(t, url, id, 500);
      await waitUntil(async () => (await statusOf(t!)).state === 'idle', 30_000, 'the uploader to go idle');
      expect(d.stderr()).toMatch(/upload: the shared store answers again/);
    } finally {
      pgc.psql(`ALTER ROLE logd PASSWORD '${pgc.password}'`);
    }
  });

  it('an unreachable host: clear status, nothing lost; a daemon restarted with the right URL uploads everything', async () => {
    const port = await freePort();
    t = nodeEnv('node-unreach', `postgres://logd:${pgc.password}@127.0.0.1:${port}/logd`);
    const d = await startDaemon(t);
    const id = await oneRun(t);
    const { json } = await waitForError(t, /cannot reach the shared store/);
    expect(json.lastError).toContain(`postgres://logd:***@127.0.0.1:${port}/logd (ECONNREFUSED); uploads resume when it answers`);
    await expectNoSecret(t, d.stderr(), [pgc.password]);
    await killDaemon(t.dir);
    t.env.LOGD_UPLOAD_URL = pgc.url;
    await startDaemon(t);
    await waitUploaded(t, pgc.url, id, 500);
  });

  it('a database that is not logd\'s is refused and left untouched until it is emptied', async () => {
    pgc.createDatabase('shop');
    pgc.psql('CREATE TABLE orders (id int); ALTER TABLE orders OWNER TO logd', 'shop');
    const url = pgc.urlFor('shop');
    t = nodeEnv('node-shop', url);
    const d = await startDaemon(t);
    const id = await oneRun(t);
    const { json } = await waitForError(t, /not a logd store/);
    expect(json.lastError).toContain('database "shop" is not a logd store: it holds other tables (public.orders) and no logd_meta');
    expect(pgc.psql("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'", 'shop')).toBe('1\n');
    const read = await cli(reading(t, url), ['runs'], { reject: false });
    expect(read.exitCode).not.toBe(0);
    expect(read.stderr).toContain('is not a logd store');
    expect(read.stderr).not.toContain(pgc.password);
    await expectNoSecret(t, d.stderr(), [pgc.password]);
    pgc.psql('DROP TABLE orders', 'shop');
    await waitUploaded(t, url, id, 500);
  });

  it('a store with a newer schema is refused, for uploads and for reading, and the runs stay local', async () => {
    pgc.createDatabase('future');
    const url = pgc.urlFor('future');
    const m = await cli(reading(nodeEnv('node-m', null), url), ['store', 'migrate']);
    expect(m.stdout).toMatch(/schema version 0 -> 3/);
    pgc.psql("UPDATE logd_meta SET v = '99' WHERE k = 'schema_version'", 'future');
    t = nodeEnv('node-future', url);
    await startDaemon(t);
    const id = await oneRun(t);
    const { json } = await waitForError(t, /newer than this logd knows/);
    expect(json.lastError).toContain('schema version 99, newer than this logd knows (3); upgrade logd on this node. Runs stay in the local store until then');
    expect(pgc.psql('SELECT count(*) FROM logd_runs', 'future')).toBe('0\n');
    const read = await cli(reading(t, url), ['runs'], { reject: false });
    expect(read.stderr).toContain('has schema version 99, newer than this logd reads (3); upgrade logd');
    expect(await rawRows(t, id)).toHaveLength(500);
  });

  it('issue 32: a store whose tables were altered by hand: the uploader says to run `logd store migrate`, which says what differs, repairs what it can, and uploading goes on', async () => {
    pgc.createDatabase('altered');
    const url = pgc.urlFor('altered');
    const admin = reading(nodeEnv('node-m', null), url);
    expect((await cli(admin, ['store', 'migrate'])).stdout).toMatch(/every table and column is as logd writes it/);
    pgc.psql('ALTER TABLE logd_runs DROP COLUMN notes; ALTER TABLE logd_cursors DROP COLUMN source; DROP TABLE logd_writers', 'altered');
    t = nodeEnv('node-altered', url);
    await startDaemon(t);
    const id = await oneRun(t);
    const { json } = await waitForError(t, /logd store migrate/, 1);
    expect(json.lastError).toMatch(/column "?(c\.)?(notes|source)"? does not exist: the store's tables are not as logd writes them; `logd store migrate` checks every table and column/);
    // Before: "at schema version 2 already", and nothing repaired.
    const m = await cli(admin, ['store', 'migrate']);
    expect(m.stdout).toContain('is at schema version 3 already');
    expect(m.stdout).toMatch(/column logd_runs\.notes \(text\) is missing; added back/);
    expect(m.stdout).toMatch(/column logd_cursors\.source \(text\) is missing; added back/);
    expect(m.stdout).toMatch(/table logd_writers is missing; created \(empty\)/);
    expect(m.stdout).toMatch(/repaired; uploading can go on/);
    await waitUploaded(t, url, id, 500);
    expect((await cli(admin, ['store', 'migrate'])).stdout).toMatch(/every table and column is as logd writes it/);
    // What it cannot repair is said, with what to do, and the command fails.
    pgc.psql('ALTER TABLE logd_runs ALTER COLUMN exit_code TYPE text', 'altered');
    const bad = await cli(admin, ['store', 'migrate'], { reject: false });
    expect(bad.exitCode).not.toBe(0);
    expect(bad.stdout).toContain('column logd_runs.exit_code is text, not integer: change it back (ALTER TABLE logd_runs ALTER COLUMN exit_code TYPE integer)');
  });

  it('a malformed URL turns uploading off with what to fix, and training goes on', async () => {
    t = nodeEnv('node-typo', 'mysql://logd:S3cr3tZ@db/logd');
    const d = await startDaemon(t);
    const id = await oneRun(t);
    const st = await statusOf(t);
    expect(st).toMatchObject({ state: 'off', target: '(an unparsable store URL)' });
    expect(st.lastError).toContain('the store URL must start with postgres:// (got mysql://…)');
    expect(st.lastError).toContain('fix LOGD_UPLOAD_URL or --upload and restart the daemon (runs stay in the local store until then)');
    expect((await cli(t, ['status'])).stdout).toMatch(/upload: {4}\(an unparsable store URL\) as node "node-typo", off\n {2}last error/);
    expect(d.stderr()).toContain('upload: not uploading: the store URL must start with postgres://');
    expect(await rawRows(t, id)).toHaveLength(500);
    await expectNoSecret(t, d.stderr(), ['S3cr3tZ']);
  });
});
