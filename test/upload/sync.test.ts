// Offline runs stay local until `logd sync`; sync is incremental; `logd
// status` shows the target (password redacted), backlog and lag.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { pgUnavailable, startPg, type PgCluster } from '../pg/cluster.js';
import { cli, runScript, script, startDaemon, waitUntil, type TestEnv } from '../helpers.js';
import { nodeEnv, rawRows, storeJson, waitUploaded } from './helpers.js';

const why = pgUnavailable();
let pgc: PgCluster;
let t: TestEnv | undefined;

describe.skipIf(why !== null)(`offline runs and logd sync${why ? ` (skipped: ${why})` : ''}`, () => {
  beforeAll(async () => {
    pgc = await startPg();
  });
  afterAll(() => pgc?.destroy());
  afterEach(async () => {
    await t?.cleanup();
    t = undefined;
  });

  it('never uploads an offline run by itself; logd sync --wait uploads it once, and again only what is new', async () => {
    t = nodeEnv('node-s', pgc.url);
    await startDaemon(t);
    const w = script(t, 'w.mjs', `
      const run = await logd.init({ project: 'sync', group: 'gs', mode: process.argv[2] });
      for (let s = 0; s < 2000; s++) run.log({ v: s }, { step: s });
      await run.finish();
      console.log(run.id);
    `);
    const offline = (await runScript(t, w, ['offline'])).stdout.trim();
    const online = (await runScript(t, w, ['online'])).stdout.trim();
    await waitUploaded(t, pgc.url, online, 2000);
    // The online run is in, with its system metrics: the uploader has been past the offline one.
    expect((await storeJson(t, pgc.url, ['runs', '--group', 'gs'])).map((r: any) => r.id)).toEqual([online]);

    // The system metrics follow the final state in a transaction of their own: wait for the uploader to go idle.
    await waitUntil(async () => JSON.parse((await cli(t!, ['status', '--json'])).stdout).upload.state === 'idle', 30_000, 'the uploader to go idle');
    const st = await cli(t, ['status']);
    expect(st.stdout).toContain(`upload:    postgres://logd:***@127.0.0.1:${pgc.port}/logd as node "node-s", idle`);
    expect(st.stdout).toMatch(/backlog: 0 run\(s\), 0 rows/);
    const stJson = JSON.parse((await cli(t, ['status', '--json'])).stdout);
    expect(stJson.upload).toMatchObject({ node: 'node-s', state: 'idle', lastError: null, backlog: { runs: 0, rows: 0, bytes: 0 } });
    expect(st.stdout + JSON.stringify(stJson)).not.toContain(pgc.password);

    const s1 = await cli(t, ['sync', offline, '--wait'], { timeout: 60_000 });
    expect(s1.stdout).toMatch(/1 run\(s\) up to date in postgres:\/\/logd:\*\*\*@.* as node "node-s"; this sync sent (0|2000) new rows/);
    expect(s1.stderr).toContain('100%');
    expect(s1.stdout + s1.stderr).not.toContain(pgc.password);
    const shared = await waitUploaded(t, pgc.url, offline, 2000);
    expect(shared.mode).toBe('offline');
    expect(await rawRows(t, offline, pgc.url)).toEqual(await rawRows(t, offline));
    // Incremental: nothing is sent twice.
    const s2 = await cli(t, ['sync', '--all', '--wait'], { timeout: 60_000 });
    expect(s2.stdout).toContain('this sync sent 0 new rows');
    expect(Number(pgc.psql(`SELECT sum(nrows) FROM logd_rows WHERE stream = 0 AND run_id = '${offline}'`, 'logd'))).toBe(2000);
  });

  it('refuses a bad sync request with what to do', async () => {
    t = nodeEnv('node-s2', null);
    const none = await cli(t, ['sync', '--all'], { reject: false });
    expect(none.stderr).toContain('set LOGD_UPLOAD_URL, or pass --upload-url-file PATH, or --upload');
    const nothing = await cli(t, ['sync', '--upload', `postgres://logd@127.0.0.1:${pgc.port}/logd`], { reject: false });
    expect(nothing.stderr).toContain('name the runs to sync, or pass --all');
    const missing = await cli(t, ['sync', 'nosuchrun', '--upload', `postgres://logd@127.0.0.1:${pgc.port}/logd`], { reject: false });
    expect(missing.stderr).toMatch(/run "nosuchrun" does not exist/);
  });
});
