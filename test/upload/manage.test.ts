// Issue 38 item 9 in the shared store: an edit on the node (rename, tag, note) of a run already uploaded whole
// reaches the shared store (the uploader looks at the run again: its EDIT frame is new log); `logd tag --store`
// and `logd rm --store` change the shared store directly, the removal every table's rows of the run in one
// transaction. A throwaway PostgreSQL, a real daemon that uploads, a real trainer.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { pgUnavailable, startPg, type PgCluster } from '../pg/cluster.js';
import { cli, killDaemon, runScript, script, startDaemon, waitUntil, type TestEnv } from '../helpers.js';
import { nodeEnv, reading, waitUploaded } from './helpers.js';

const why = pgUnavailable();
let pgc: PgCluster;
let t: TestEnv | undefined;

describe.skipIf(why !== null)(`managing runs in the shared store${why ? ` (skipped: ${why})` : ''}`, () => {
  beforeAll(async () => {
    pgc = await startPg();
  }, 120_000);
  afterAll(() => pgc?.destroy());
  afterEach(async () => {
    if (t) {
      await killDaemon(t.dir);
      await t.cleanup();
    }
    t = undefined;
  });

  it('an edit on the node reaches the store; tag --store and rm --store change the store itself', async () => {
    t = nodeEnv('node-m', pgc.url, { LOGD_IDLE_TIMEOUT_MS: '120000' });
    const d = await startDaemon(t);
    const r = await runScript(t, script(t, 'train.mjs', `
      for (let i = 0; i < 2; i++) {
        const run = await logd.init({ project: 'manage-up', group: 'g', name: 'r' + i, tags: ['base'], console: true });
        for (let s = 0; s < 300; s++) run.log({ loss: 1 / (s + 1) }, { step: s });
        console.log('hello ' + i);
        await run.finish();
        console.log('run ' + run.id);
      }
    `));
    expect(r.exitCode, r.stderr).toBe(0);
    const [a, b] = r.stdout.split('\n').filter((l) => l.startsWith('run ')).map((l) => l.slice(4));
    await waitUploaded(t, pgc.url, a, 300);
    await waitUploaded(t, pgc.url, b, 300);
    const q = (sql: string) => pgc.psql(sql, 'logd').trim();
    // Uploaded whole (done), then edited on the node: the uploader sends the row again.
    await cli(t, ['rename', a, 'renamed on the node']);
    await cli(t, ['tag', a, '--add', 'keep']);
    await cli(t, ['note', a, 'why it matters']);
    const edited = () => q(`SELECT name || '|' || array_to_string(tags, ',') || '|' || notes FROM logd_runs WHERE id = '${a}'`);
    await waitUntil(() => edited() === 'renamed on the node|base,keep|why it matters', 60_000, 'the edit to reach the shared store')
      .catch((e: Error) => {
        throw new Error(`${e.message}; the store has ${edited()}; the daemon said: ${d.stderr().slice(-3000)}`);
      });
    expect(q(`SELECT state || ' ' || history_rows FROM logd_runs WHERE id = '${a}'`)).toBe('finished 300'); // nothing else moved
    // On the shared store directly.
    const s = reading(t, pgc.url);
    const tagged = await cli(s, ['tag', b, '--add', 'shared-tag', '--shared']);
    expect(tagged.stdout.trim()).toBe(`${b}  base,shared-tag`);
    expect(q(`SELECT array_to_string(tags, ',') FROM logd_runs WHERE id = '${b}'`)).toBe('base,shared-tag');
    // rm --store: without --yes nothing goes; with it every row of the run, in every table.
    const tables = q("SELECT string_agg(table_name, ',') FROM information_schema.columns WHERE table_schema = current_schema() AND column_name = 'run_id' AND table_name LIKE 'logd%'").split(',');
    expect(tables).toEqual(expect.arrayContaining(['logd_rows', 'logd_values', 'logd_keys', 'logd_console', 'logd_cursors']));
    // Every row of the run but its upload cursor (kept, marked done, so that its node does not send it again).
    const count = (id: string) => tables.filter((tb) => tb !== 'logd_cursors').reduce((n, tb) => n + Number(q(`SELECT count(*) FROM ${tb} WHERE run_id = '${id}'`)), 0) + Number(q(`SELECT count(*) FROM logd_runs WHERE id = '${id}'`));
    expect(count(b)).toBeGreaterThan(5);
    const asked = await cli(s, ['rm', b, '--shared'], { reject: false });
    expect(asked.exitCode).toBe(2);
    expect(asked.stderr).toMatch(/from the shared store postgres:\/\/logd:\*\*\*@.* for good: .*add --yes/);
    expect(count(b)).toBeGreaterThan(5);
    const removed = await cli(s, ['rm', b, '--shared', '--yes']);
    expect(removed.stdout.trim()).toBe(`removed ${b} (r1)`);
    expect(count(b)).toBe(0);
    expect(count(a)).toBeGreaterThan(5); // the other run is untouched
    // The node still has its own copy, and its uploader (running all along, then a new daemon's) does not send it again.
    expect((await cli(t, ['show', b, '--json'])).exitCode).toBe(0);
    await new Promise((res) => setTimeout(res, 3000));
    await killDaemon(t.dir);
    await startDaemon(t);
    await cli(t, ['runs']);
    await new Promise((res) => setTimeout(res, 3000));
    expect(count(b)).toBe(0);
  }, 300_000);
});
