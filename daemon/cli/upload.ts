// `logd sync` and `logd store migrate`, and the upload lines of `logd status`.
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import type { Command } from 'commander';
import { resolvePaths, uploadTunables } from '../../src/config.js';
import { DataDirRuns, SYNC_REQUEST } from '../upload/local-runs.js';
import { Uploader } from '../upload/uploader.js';
import { parseStoreUrl, redact, type StoreUrl } from '../upload/url.js';
import { migrate, SCHEMA_VERSION, storeVersion, describeMigrations } from '../upload/schema.js';
import { checkAndRepair } from '../upload/schema-check.js';
import { readStatus, type UploadStatus } from '../upload/status.js';
import { pgOptions, lacksPassword, NO_PASSWORD } from '../upload/pgpass.js';
import { urlOption, urlFileOption, urlOrExit, type UrlOptions } from './store-url.js';
import { ingestSpillFiles } from './ingest.js';
import { compactRun } from '../compaction/compact.js';
import { SharedSource } from '../query/shared.js';

function fail(msg: string, code = 1): never {
  process.stderr.write(`logd: ${msg}\n`);
  process.exit(code);
}

/**
 * The shared store the options name, else the first of `envs` set, parsed; a command without one, or with a
 * malformed one, ends here saying what to do (exit `code`).
 */
function namedStore(o: UrlOptions, envs: string[], code = 1): StoreUrl {
  const raw = urlOrExit('store', o) || envs.map((e) => process.env[e]).find((v) => !!v);
  if (!raw) fail('no shared store named: set LOGD_STORE_URL, or pass --store-url-file PATH, or --store postgres://user@host/db with the password in ~/.pgpass', code);
  try {
    return parseStoreUrl(raw);
  } catch (e) {
    fail((e as Error).message, code);
  }
}

/** A store with logd's schema, not newer than this logd's; otherwise the command ends saying so. */
async function needSchema(c: pg.Client, url: StoreUrl, what: string): Promise<void> {
  const v = await storeVersion(c);
  if (v === 0) fail(`${url.shown} has no logd schema: nothing to ${what}`);
  if (v > SCHEMA_VERSION) fail(`${url.shown} has schema version ${v}, newer than this logd's ${SCHEMA_VERSION}: upgrade logd`);
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The running daemon's upload status, or null when it does not upload. */
export function daemonUploadStatus(dataDir: string): UploadStatus | null {
  const s = readStatus(dataDir);
  return s && s.state !== 'stopped' && pidAlive(s.pid) ? s : null;
}

function mb(n: number): string {
  return `${(n / 1e6).toFixed(n < 1e7 ? 2 : 0)} MB`;
}

export function uploadStatusLines(s: UploadStatus | null): string[] {
  if (!s) return ['upload:    off (set LOGD_UPLOAD_URL or `logd serve --upload URL` to upload runs to a shared store)'];
  const out = [`upload:    ${s.target} as node "${s.node}", ${s.state}`];
  if (s.state !== 'off') out.push(`  backlog: ${s.backlog.runs} run(s), ${s.backlog.rows} rows, ${mb(s.backlog.bytes)}; lag ${(s.lagMs / 1000).toFixed(1)} s; uploaded since start: ${s.uploadedRows} rows`);
  if (s.lastError) out.push(`  last error (${s.lastErrorAt}): ${s.lastError}${s.retryAt ? `; next try ${s.retryAt}` : ''}`);
  if (s.leftLocal?.length) {
    out.push(`  LEFT LOCAL, not uploaded (${s.leftLocal.length} run(s)):`);
    for (const x of s.leftLocal) out.push(`    ${x.run}: ${x.why}`);
  }
  return out;
}

function bar(done: number, total: number, width = 30): string {
  const f = total > 0 ? Math.min(1, done / total) : 1;
  const n = Math.round(f * width);
  return `[${'#'.repeat(n)}${'-'.repeat(width - n)}] ${(f * 100).toFixed(0).padStart(3)}%`;
}

export function registerUploadCommands(program: Command): void {
  program
    .command('sync')
    .description('upload runs to the shared store now, offline runs included (only what the store does not have yet)')
    .argument('[runs...]', 'run ids')
    .option('--all', 'every run of this node')
    .option('--wait', 'upload here with a progress bar and return when done (without it, a running daemon that uploads to the same store does the work)')
    .option('--ingest <files...>', "hand spill files to this node's daemon (a deferred run's, or any left behind): it stores each exactly once, creating a deferred run from its file")
    .addOption(urlOption('upload', 'upload to the shared store'))
    .addOption(urlFileOption('upload'))
    .action(async (ids: string[], o: { all?: boolean; wait?: boolean; ingest?: string[] } & UrlOptions) => {
      if (o.ingest) {
        const { setup } = await import('../../client/index.js');
        await setup().catch((e: Error) => fail(`no daemon to ingest into: ${e.message}`));
        let failed = 0;
        try {
          failed = await ingestSpillFiles(o.ingest, resolvePaths().spoolDir, 30_000, (l) => console.log(l));
        } catch (e) {
          fail((e as Error).message, 2);
        }
        process.exit(failed ? 1 : 0);
      }
      const t = uploadTunables(process.env, urlOrExit('upload', o));
      if (!t.url) fail('no shared store to sync to: set LOGD_UPLOAD_URL, or pass --upload-url-file PATH, or --upload postgres://user@host/db with the password in ~/.pgpass');
      let url;
      try {
        url = parseStoreUrl(t.url);
      } catch (e) {
        fail((e as Error).message);
      }
      if (!ids.length && !o.all) fail('name the runs to sync, or pass --all');
      const { dataDir } = resolvePaths();
      const runsDir = path.join(dataDir, 'runs');
      const wanted = o.all ? (fs.existsSync(runsDir) ? fs.readdirSync(runsDir) : []) : ids;
      for (const id of wanted) {
        const dir = path.join(runsDir, path.basename(id));
        if (path.basename(id) !== id || !fs.existsSync(path.join(dir, 'records.log'))) fail(`run ${JSON.stringify(id)} does not exist in ${dataDir}; list runs with \`logd runs\``);
        // A durable request: the node's daemon uploads these runs even if they are offline.
        fs.writeFileSync(path.join(dir, SYNC_REQUEST), '');
      }
      const daemon = daemonUploadStatus(dataDir);
      if (!o.wait && daemon && daemon.target === url.shown) {
        console.log(`logd: the daemon (pid ${daemon.pid}) uploads ${wanted.length} run(s) to ${url.shown}; follow it with \`logd status\`, or wait here with \`logd sync --wait\``);
        return;
      }
      const runs = new DataDirRuns(dataDir);
      const up = new Uploader({
        url, node: t.node, runs, log: () => {}, pollMs: 0, backoffMaxMs: 0, sliceBytes: t.sliceBytes, statusDir: null, includeOffline: true, only: new Set(wanted),
      });
      const tty = process.stderr.isTTY;
      let total = -1;
      const show = (final: boolean) => {
        const s = up.current;
        if (total < 0) total = s.backlog.bytes;
        const line = `${bar(total - s.backlog.bytes, total)} ${mb(total - s.backlog.bytes)} of ${mb(total)}, ${s.uploadedRows} rows`;
        if (tty) process.stderr.write(`\r${line}${final ? '\n' : ''}`);
        else if (final || o.wait) process.stderr.write(`${line}\n`);
      };
      try {
        // Each pass uploads one slice of every run with work; done when a pass finds none.
        while (await up.pass()) show(false);
        show(true);
      } catch (e) {
        fail(`sync stopped: ${up.describe(e)}; run it again to go on from where it stopped`);
      } finally {
        runs.close();
        await up.stop(1000);
      }
      // The daemon may have uploaded some of it meanwhile: the store's cursors keep that exactly once.
      console.log(`logd: ${wanted.length} run(s) up to date in ${url.shown} as node "${t.node}"; this sync sent ${up.current.uploadedRows} new rows`);
    });

  const store = program.command('store').description('the shared PostgreSQL store');
  store
    .command('prune')
    .description('remove for good the runs that ended before a time (their rows, console output and media, every table), to keep the shared store to a size')
    .requiredOption('--older-than <age>', 'runs that ended this long ago or more: a number and a unit, d (days), w (weeks), h (hours); e.g. 90d')
    .option('--project <name>', 'only this project\'s runs')
    .option('--dry-run', 'list what would be removed, remove nothing')
    .option('-y, --yes', 'do not ask (needed when standard input is not a terminal)')
    .addOption(urlOption('store', 'prune the shared store', 'LOGD_STORE_URL'))
    .addOption(urlFileOption('store'))
    .action(async (o: UrlOptions & { olderThan: string; project?: string; dryRun?: boolean; yes?: boolean }) => {
      const m = /^(\d+(?:\.\d+)?)\s*(h|d|w)$/.exec(o.olderThan.trim());
      if (!m || !(Number(m[1]) > 0)) fail(`--older-than ${JSON.stringify(o.olderThan)}: give a number and a unit, h (hours), d (days) or w (weeks), e.g. 90d`, 2);
      const seconds = Number(m[1]) * { h: 3600, d: 86_400, w: 7 * 86_400 }[m[2] as 'h' | 'd' | 'w'];
      const url = namedStore(o, ['LOGD_STORE_URL'], 2);
      const cutoff = Date.now() / 1000 - seconds;
      const c = new pg.Client(pgOptions(url, { connectionTimeoutMillis: 15_000, application_name: 'logd store prune' }));
      const src = new SharedSource(url);
      try {
        await c.connect();
        await needSchema(c, url, 'prune');
        // Ended runs only (a run still running, or finishing its upload, stays), by when they ended (their node's clock).
        const runs = (await c.query<{ id: string; name: string; project: string; state: string; ended: number; rows: string }>(
          `SELECT id, name, project, state, greatest(created_at, finished_at) AS ended, history_rows::text AS rows FROM logd_runs
           WHERE state IN ('finished', 'crashed', 'killed') AND greatest(created_at, finished_at) < $1 AND ($2::text IS NULL OR project = $2)
           ORDER BY ended, id`, [cutoff, o.project ?? null])).rows;
        const when = new Date(cutoff * 1000).toISOString().replace(/\.\d+Z$/, 'Z');
        if (!runs.length) {
          console.log(`logd: ${url.shown}: no run${o.project ? ` of project ${JSON.stringify(o.project)}` : ''} ended before ${when}; nothing to remove`);
          return;
        }
        const rows = runs.reduce((n, r) => n + Number(r.rows), 0);
        const list = runs.slice(0, 5).map((r) => `${r.id} (${r.project}/${r.name}, ${r.state} ${new Date(r.ended * 1000).toISOString().slice(0, 10)})`);
        const what = `${runs.length} run(s) that ended before ${when} (${rows.toLocaleString('en')} history rows): ${list.join(', ')}${runs.length > 5 ? ', …' : ''}`;
        if (o.dryRun) {
          console.log(`logd: ${url.shown}: would remove ${what}`);
          for (const r of runs) console.log(`${r.id}\t${r.project}\t${r.name}\t${r.state}\t${new Date(r.ended * 1000).toISOString()}\t${r.rows}`);
          return;
        }
        if (!o.yes) {
          if (!process.stdin.isTTY) fail(`logd store prune removes ${what} from ${url.shown} for good; add --yes (standard input is not a terminal to ask on), or --dry-run to list them`, 2);
          const readline = await import('node:readline/promises');
          const rl = readline.createInterface({ input: process.stdin, output: process.stderr });
          const answer = await rl.question(`Remove ${what} from ${url.shown} for good? [y/N] `);
          rl.close();
          if (!/^y(es)?$/i.test(answer.trim())) {
            console.error('logd: nothing removed');
            return;
          }
        }
        let last = Date.now();
        for (const [i, r] of runs.entries()) {
          await src.removeRun(r.id);
          if (Date.now() - last > 2000) {
            last = Date.now();
            process.stderr.write(`logd: ${i + 1}/${runs.length} runs removed\n`);
          }
        }
        console.log(`logd: ${url.shown}: removed ${runs.length} run(s) that ended before ${when} (${rows.toLocaleString('en')} history rows); their space is reused once (auto)vacuum has passed`);
      } catch (e) {
        fail(redact(`cannot prune ${url.shown}: ${(e as Error).message}${lacksPassword(e) ? `; ${NO_PASSWORD}` : ''}`, url));
      } finally {
        await src.close();
        await c.end().catch(() => {});
      }
    });
  store
    .command('compact')
    .argument('[runs...]', 'only these runs (default: every run in the store)')
    .description("merge the runs' small chunks in the shared store (the uploader does this itself as runs go on and end; this is for runs an older logd uploaded), then VACUUM the tables")
    .addOption(urlOption('store', 'compact the shared store', 'LOGD_STORE_URL, then LOGD_UPLOAD_URL'))
    .addOption(urlFileOption('store'))
    .action(async (ids: string[], o: UrlOptions) => {
      const url = namedStore(o, ['LOGD_STORE_URL', 'LOGD_UPLOAD_URL']);
      const c = new pg.Client(pgOptions(url, { connectionTimeoutMillis: 15_000, application_name: 'logd store compact' }));
      try {
        await c.connect();
        await needSchema(c, url, 'compact');
        const all = (await c.query<{ id: string }>('SELECT id FROM logd_runs ORDER BY created_at, id')).rows.map((r) => r.id);
        const wanted = ids.length ? ids : all;
        const unknown = ids.filter((id) => !all.includes(id));
        if (unknown.length) fail(`${url.shown} has no run ${unknown.map((x) => JSON.stringify(x)).join(', ')} (logd runs --store lists them)`);
        let merged = 0, before = 0, after = 0;
        let last = Date.now();
        for (const [i, id] of wanted.entries()) {
          const r = await compactRun(c, id);
          if (r.chunksAfter < r.chunksBefore) {
            merged++;
            before += r.chunksBefore;
            after += r.chunksAfter;
          }
          if (Date.now() - last > 2000) {
            last = Date.now();
            process.stderr.write(`logd: ${i + 1}/${wanted.length} runs looked at, ${merged} merged so far\n`);
          }
        }
        console.log(`logd: ${url.shown}: ${wanted.length} runs looked at; ${merged} merged: ${before} chunks -> ${after}`);
        // The rows merged away are dead tuples until a VACUUM (autovacuum would get to them in time).
        try {
          await c.query('VACUUM (ANALYZE) logd_rows, logd_values');
          console.log(`logd: ${url.shown}: VACUUM of logd_rows and logd_values done: their space is free for new rows`);
        } catch (e) {
          console.log(`logd: ${url.shown}: VACUUM not run (${(e as Error).message}); autovacuum frees the space in time, or run VACUUM logd_rows, logd_values as the tables' owner`);
        }
      } catch (e) {
        fail(redact(`cannot compact ${url.shown}: ${(e as Error).message}${lacksPassword(e) ? `; ${NO_PASSWORD}` : ''}`, url));
      } finally {
        await c.end().catch(() => {});
      }
    });
  store
    .command('migrate')
    .description(`create or upgrade the shared store's schema (to version ${SCHEMA_VERSION})`)
    .addOption(urlOption('store', 'migrate the shared store', 'LOGD_STORE_URL, then LOGD_UPLOAD_URL'))
    .addOption(urlFileOption('store'))
    .action(async (o: UrlOptions) => {
      const url = namedStore(o, ['LOGD_STORE_URL', 'LOGD_UPLOAD_URL']);
      const c = new pg.Client(pgOptions(url, { connectionTimeoutMillis: 15_000 }));
      try {
        await c.connect();
        const before = await storeVersion(c);
        const applied = await migrate(c);
        if (applied.length) console.log(`logd: ${url.shown}: schema version ${before} -> ${SCHEMA_VERSION} (${describeMigrations().filter((_, i) => applied.includes(i + 1)).join('; ')})`);
        else console.log(`logd: ${url.shown} is at schema version ${SCHEMA_VERSION} already`);
        // The version says nothing of a table altered by hand: compare every table and column, repair what can be.
        const diffs = await checkAndRepair(c).catch((e: Error) => {
          console.log(`logd: ${url!.shown}: the tables could not be compared with what logd writes (${e.message}; it takes CREATE on the database, in a transaction that is rolled back)`);
          return null;
        });
        if (diffs === null) return;
        for (const d of diffs) console.log(`logd: ${url.shown}: ${d.what}`);
        if (diffs.some((d) => !d.repaired)) fail(`${url.shown}: the schema differs from what logd ${SCHEMA_VERSION} writes in ways it cannot repair (above); the uploader fails until it is fixed`);
        if (diffs.length) console.log(`logd: ${url.shown}: repaired; uploading can go on`);
        else console.log(`logd: ${url.shown}: every table and column is as logd writes it`);
      } catch (e) {
        fail(redact(`cannot migrate ${url.shown}: ${(e as Error).message}${lacksPassword(e) ? `; ${NO_PASSWORD}` : ''}`, url));
      } finally {
        await c.end().catch(() => {});
      }
    });
}
