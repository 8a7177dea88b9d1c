// Issue 20 in the shared store: a real trainer's console output, histograms,
// images and text reach PostgreSQL through a real daemon's uploader exactly
// once (a daemon killed inside an upload transaction after earlier ones
// committed, a second upload pass) and read back through the shared store as
// the local store has them, image bytes and all.
import fs from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { pgUnavailable, startPg, type PgCluster } from '../pg/cluster.js';
import { CLI, ROOT, cli, killDaemon, runScript, script, startDaemon, waitUntil, type TestEnv } from '../helpers.js';
import { nodeEnv, reading } from './helpers.js';

const why = pgUnavailable();
const QUERY = path.join(ROOT, 'dist', 'daemon', 'query', 'index.js');
const SHARED = path.join(ROOT, 'dist', 'daemon', 'query', 'shared.js');
const URL_JS = path.join(ROOT, 'dist', 'daemon', 'upload', 'url.js');
const STEPS = 200; // an image of 48 KiB a step that does not compress: about 10 MiB, ten 1 MiB slices
const BURSTS = 4; // of 600 KB of console output each, before any media: the first slices hold console output alone
let pgc: PgCluster;
let t: TestEnv | undefined;

const TRAINER = `
const run = await logd.init({ project: 'media-up', console: true });
const line = 'x'.repeat(99) + '\\n';
for (let b = 0; b < ${BURSTS}; b++) {
  process.stdout.write(line.repeat(6000));
  run.log({ burst: b });
  await new Promise((r) => setTimeout(r, 600)); // under the 1 MiB per flush interval that the capture keeps
}
const fixed = logd.Image.fromPixels(new Uint8Array(4 * 3 * 3).fill(200), { width: 4, height: 3, channels: 3, caption: 'c' });
let seed = 7;
const rnd = () => (seed = (seed * 1103515245 + 12345) >>> 0) >>> 24;
for (let step = 0; step < ${STEPS}; step++) {
  const px = new Uint8Array(128 * 128 * 3);
  for (let i = 0; i < px.length; i++) px[i] = rnd();
  const row = { loss: 1 / (step + 1), noise: logd.Image.fromPixels(px, { width: 128, height: 128, channels: 3, caption: 'step ' + step }) };
  if (step % 3 === 0) row.img = fixed; // the same picture again and again: stored once
  if (step % 5 === 0) row['grad/w'] = new logd.Histogram(Array.from({ length: 1000 }, (_, i) => Math.sin(i + step)), { bins: 16 });
  if (step % 7 === 0) row.note = new logd.Text('hi at ' + step);
  run.log(row, { step });
  console.log('step', step);
  if (step % 50 === 0) console.error('warning at', step);
}
const res = await run.finish();
process.stderr.write('RUN=' + run.id + ' STATE=' + res.state + '\\n');
`;

/** Everything both sources hold of the run: console pieces, media entries, each image's bytes as a sha256. */
const COMPARE = `
import crypto from 'node:crypto';
import fs from 'node:fs';
const { openSource } = await import(${JSON.stringify(QUERY)});
const { SharedSource } = await import(${JSON.stringify(SHARED)});
const { parseStoreUrl } = await import(${JSON.stringify(URL_JS)});
const [id, url, outFile] = process.argv.slice(2);
const local = await openSource({ store: '' });
// Small pages, so that paging through the shared store crosses many page ends.
const shared = new SharedSource(parseStoreUrl(url), { entries: 37, bytes: 1 << 20 });
await shared.check();
async function all(page) {
  const out = [];
  let pages = 0;
  for (let after = 0; ; ) {
    const p = await page(after);
    pages++;
    out.push(...p.entries);
    if (!p.next) return { out, pages };
    after = p.next;
  }
}
const result = {};
for (const [name, src] of [['local', local], ['shared', shared]]) {
  const con = await all((a) => src.console(id, a));
  const med = await all((a) => src.media(id, a));
  const images = {};
  for (const m of med.out) {
    if (m.kind !== 'image' || !m.sha256 || m.sha256 in images) continue;
    const img = await src.image(id, m.sha256);
    images[m.sha256] = img ? img.format + ':' + crypto.createHash('sha256').update(img.data).digest('hex') : null;
  }
  const onlyImages = await all((a) => src.media(id, a, { kind: 'image', key: 'img' }));
  result[name] = { console: con.out, media: med.out, images, onlyImages: onlyImages.out, pages: { console: con.pages, media: med.pages } };
}
await local.close();
await shared.close();
fs.writeFileSync(outFile, JSON.stringify(result)); // megabytes: a pipe would be cut short by the exit
process.exit(0);
`;

describe.skipIf(why !== null)(`console output and media in the shared store${why ? ` (skipped: ${why})` : ''}`, () => {
  beforeAll(async () => {
    pgc = await startPg();
  });
  afterAll(() => pgc?.destroy());
  afterEach(async () => {
    await t?.cleanup();
    t = undefined;
  });

  it('a daemon killed inside an upload and a second pass upload nothing twice; the store reads back as the local store', async () => {
    // The run is written with no uploading, so that all of it is the backlog of the daemon that is then killed.
    t = nodeEnv('node-m', null, { LOGD_IDLE_TIMEOUT_MS: '60000', LOGD_UPLOAD_SLICE_MB: '1' });
    await startDaemon(t);
    const r = await runScript(t, script(t, 'train.mjs', TRAINER), [], { RANK: '2', WORLD_SIZE: '4', LOCAL_RANK: '2' }, 120_000);
    expect(r.exitCode, r.stderr).toBe(0);
    const id = /RUN=(\S+) STATE=finished/.exec(r.stderr)?.[1];
    expect(id, r.stderr).toBeTruthy();
    await killDaemon(t.dir);

    t.env.LOGD_UPLOAD_URL = pgc.url;
    await cli(t, ['store', 'migrate']); // so the test can hold a lock on the images' table from the start
    const q = (sql: string) => Number(pgc.psql(sql, 'logd'));
    const cursor = () => q(`SELECT coalesce(max(log_offset), 0) FROM logd_cursors WHERE run_id = '${id}'`);
    const logBytes = fs.statSync(path.join(t.dataDir, 'runs', id!, 'records.log')).size;
    // The slices of console output alone commit; the first one with images waits on this lock, inside its transaction.
    const holder = new pg.Client({ connectionString: pgc.url });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE logd_images IN SHARE MODE');
      const d1 = await startDaemon(t);
      await waitUntil(() => q("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO logd_images%'") === 1,
        60_000, 'the uploader to wait on the images lock');
      d1.proc.kill('SIGKILL');
      await new Promise((res) => d1.proc.once('exit', res));
    } finally {
      await holder.query('ROLLBACK').catch(() => {});
      await holder.end();
    }
    // What the killed daemon committed is there; the transaction it was in left nothing.
    await waitUntil(() => q("SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'INSERT INTO logd_images%'") === 0, 30_000, 'the killed transaction to end');
    const mid = cursor();
    expect(mid).toBeGreaterThan(0);
    expect(mid).toBeLessThan(logBytes);
    expect(q(`SELECT count(*) FROM logd_console WHERE run_id = '${id}'`)).toBeGreaterThan(0);
    expect(q(`SELECT count(*) FROM logd_media WHERE run_id = '${id}' AND key NOT LIKE 'logd/%'`)).toBe(0); // logd's own (the package list) may be in an early slice
    expect(q(`SELECT count(*) FROM logd_images WHERE run_id = '${id}'`)).toBe(0);

    await startDaemon(t);
    await waitUntil(() => q(`SELECT count(*) FROM logd_cursors WHERE run_id = '${id}' AND done`) === 1, 120_000, 'the next daemon to upload the rest');
    expect(cursor()).toBe(logBytes);
    expect(pgc.psql(`SELECT state || ' ' || history_rows FROM logd_runs WHERE id = '${id}'`, 'logd').trim()).toBe(`finished ${STEPS + BURSTS}`);

    const outFile = path.join(t.dir, 'both.json');
    const c = await runScript(t, script(t, 'compare.mjs', COMPARE), [id!, pgc.url, outFile], {}, 120_000);
    expect(c.exitCode, c.stderr).toBe(0);
    const { local, shared } = JSON.parse(fs.readFileSync(outFile, 'utf8'));
    // The local store as the trainer made it.
    const perKind = (k: string) => local.media.filter((m: any) => m.kind === k).length;
    expect([perKind('image'), perKind('histogram'), perKind('text')]).toEqual([STEPS + Math.ceil(STEPS / 3), STEPS / 5, Math.ceil(STEPS / 7)]);
    expect(local.media.every((m: any) => m.rank === 2)).toBe(true);
    const printed = local.console.map((l: any) => l.l).join('');
    expect(printed).toContain(`step ${STEPS - 1}\n`);
    expect(printed).toContain('warning at 150\n');
    expect(printed.split('x'.repeat(99) + '\n')).toHaveLength(BURSTS * 6000 + 1);
    expect(local.console.every((l: any) => l.rank === 2)).toBe(true);
    // The shared store holds the same, in the same order, and the same bytes under each image's sha256.
    expect(shared.console).toEqual(local.console);
    expect(shared.media).toEqual(local.media);
    expect(shared.onlyImages).toEqual(local.onlyImages);
    expect(shared.onlyImages).toHaveLength(Math.ceil(STEPS / 3));
    // Pages end at frames (the trainer's 336 media entries came in one batch: one frame, one page).
    expect(shared.pages.console).toBeGreaterThan(3);
    expect(Object.keys(local.images)).toHaveLength(STEPS + 1);
    for (const [sha, got] of Object.entries(local.images)) expect(got).toBe(`png:${sha}`);
    expect(shared.images).toEqual(local.images);
    // Exactly once, counted in PostgreSQL.
    const counts = () => [
      q(`SELECT count(*) FROM logd_console WHERE run_id = '${id}'`),
      q(`SELECT count(*) FROM logd_media WHERE run_id = '${id}' AND key NOT LIKE 'logd/%'`),
      q(`SELECT count(*) FROM logd_images WHERE run_id = '${id}'`),
    ];
    expect(counts()).toEqual([local.console.length, local.media.length, STEPS + 1]);

    // The CLI reads the shared store (LOGD_STORE_URL) as it reads the local one.
    const viaCli = async (args: string[], store: boolean) =>
      (await execa(process.execPath, [CLI, ...args], { env: (store ? reading(t!, pgc.url) : t!).env, timeout: 60_000, maxBuffer: 1 << 28 })).stdout;
    expect(await viaCli(['media', id!, '--json'], true)).toBe(await viaCli(['media', id!, '--json'], false));
    expect(await viaCli(['logs', id!, '--json'], true)).toBe(await viaCli(['logs', id!, '--json'], false));

    // A second upload pass sends nothing.
    const s = await cli(t, ['sync', id!, '--wait'], { timeout: 60_000 });
    expect(s.stdout).toContain('this sync sent 0 new rows');
    expect(counts()).toEqual([local.console.length, local.media.length, STEPS + 1]);
  }, 300_000);
});
