// `logd rename`, `logd tag`, `logd note`, `logd rm`: managing runs after they were made. On the node's store
// through its daemon (EditRun, DeleteRun: daemon/runs/manage.ts), or with --store on the shared PostgreSQL store
// directly. A selection is run ids, or a whole group (--group). `logd rm` asks before it removes anything when
// its standard input is a terminal, and otherwise wants --yes.
import readline from 'node:readline/promises';
import { Command, Option } from 'commander';
import pg from 'pg';
import type { RunInfo } from '../../src/wire.js';
import { connectionFor } from '../../client/connection.js';
import { checkedDaemon } from '../../client/stale-service.js';
import { parseStoreUrl } from '../upload/url.js';
import { pgOptions } from '../upload/pgpass.js';
import { urlFileOption, urlOption, urlFromOptions, type UrlOptions } from './store-url.js';

type Fail = (msg: string, code?: number) => never;
const CALL_MS = 30_000;

interface Target { ids: string[]; group?: string; project?: string }

/** Where the edits go: the node's daemon, or the shared store. */
interface Backend {
  where: string;
  select(t: Target): Promise<RunInfo[] | Array<{ id: string; name: string; state: string }>>;
  edit(id: string, e: { name?: string; addTags?: string[]; removeTags?: string[]; notes?: string }): Promise<{ name: string; tags: string[]; notes: string }>;
  remove(ids: string[]): Promise<void>;
  close(): Promise<void>;
}

async function localBackend(fail: Fail): Promise<Backend> {
  const addr = await checkedDaemon({ timeoutMs: 10_000, reader: true }).catch((e: Error) => fail(e.message));
  if (!addr) fail('no logd daemon could be found or started for this data dir; start one with `logd serve`');
  const c = connectionFor(addr);
  return {
    where: 'this node\'s store',
    async select(t) {
      if (!t.group) return Promise.all(t.ids.map((id) => c.unary<unknown, RunInfo>('getRun', { runId: id }, CALL_MS)));
      const out: RunInfo[] = [];
      for (let offset = 0; ;) {
        const page = await c.unary<unknown, { runs: RunInfo[]; total: number; nextOffset: number }>('listRuns', { project: t.project ?? '', group: t.group, state: '', tag: '', text: '', limit: 1000, offset, filter: '' }, CALL_MS);
        out.push(...page.runs.filter((r) => r.group === t.group));
        offset = Number(page.nextOffset) || offset + page.runs.length;
        if (page.runs.length === 0 || offset >= Number(page.total)) break;
      }
      return out;
    },
    async edit(id, e) {
      const r = await c.unary<unknown, RunInfo>('editRun', { runId: id, setName: e.name !== undefined, name: e.name ?? '', addTags: e.addTags ?? [], removeTags: e.removeTags ?? [], setNotes: e.notes !== undefined, notes: e.notes ?? '' }, CALL_MS);
      return { name: r.name, tags: r.tags, notes: r.notes };
    },
    async remove(ids) {
      for (const id of ids) await c.unary('deleteRun', { runId: id }, CALL_MS);
    },
    async close() {},
  };
}

async function sharedBackend(url: string): Promise<Backend> {
  const u = parseStoreUrl(url);
  const client = new pg.Client(pgOptions(u, { connectionTimeoutMillis: 15_000, application_name: 'logd manage' }));
  await client.connect().catch((e: Error) => {
    throw new Error(`the shared store ${u.shown}: ${e.message}`);
  });
  const where = `the shared store ${u.shown}`;
  return {
    where,
    async select(t) {
      const rows = t.group
        ? (await client.query<{ id: string; name: string; state: string }>('SELECT id, name, state FROM logd_runs WHERE grp = $1 AND ($2 = \'\' OR project = $2) ORDER BY created_at', [t.group, t.project ?? ''])).rows
        : (await client.query<{ id: string; name: string; state: string }>('SELECT id, name, state FROM logd_runs WHERE id = ANY($1)', [t.ids])).rows;
      const missing = t.group ? [] : t.ids.filter((id) => !rows.some((r) => r.id === id));
      if (missing.length) throw new Error(`run ${JSON.stringify(missing[0])} does not exist in ${where}; list runs with \`logd runs --store\``);
      return t.group ? rows : t.ids.map((id) => rows.find((r) => r.id === id)!);
    },
    async edit(id, e) {
      const r = (await client.query<{ name: string; tags: string[]; notes: string }>(
        `UPDATE logd_runs SET name = CASE WHEN $2::text IS NULL THEN name ELSE $2 END,
           tags = ARRAY(SELECT DISTINCT t FROM unnest(array_cat(tags, $3::text[])) t WHERE NOT t = ANY($4::text[])),
           notes = CASE WHEN $5::text IS NULL THEN notes ELSE $5 END
         WHERE id = $1 RETURNING name, tags, notes`,
        [id, e.name ?? null, e.addTags ?? [], e.removeTags ?? [], e.notes ?? null])).rows[0];
      if (!r) throw new Error(`run ${id} does not exist in ${where}`);
      return r;
    },
    async remove(ids) {
      // Every table of the store that holds rows of a run (by run_id), and the run's own row, in one transaction.
      const tables = (await client.query<{ table_name: string }>(
        "SELECT table_name FROM information_schema.columns WHERE table_schema = current_schema() AND column_name = 'run_id' AND table_name LIKE 'logd\\_%'")).rows.map((r) => r.table_name);
      await client.query('BEGIN');
      try {
        // The upload cursors stay, marked done: the node that uploaded a run does not send it again (it would,
        // from its start, were its cursor gone). A run continued or edited there later comes back with what is new.
        for (const t of tables.filter((t) => t !== 'logd_cursors')) await client.query(`DELETE FROM ${pg.escapeIdentifier(t)} WHERE run_id = ANY($1)`, [ids]);
        if (tables.includes('logd_cursors')) await client.query('UPDATE logd_cursors SET done = true, system_done = true WHERE run_id = ANY($1)', [ids]);
        await client.query('DELETE FROM logd_runs WHERE id = ANY($1)', [ids]);
        await client.query('COMMIT');
      } catch (e) {
        await client.query('ROLLBACK').catch(() => {});
        throw e;
      }
    },
    close: () => client.end(),
  };
}

async function backend(o: UrlOptions, fail: Fail): Promise<Backend> {
  let url: string | undefined;
  try {
    url = urlFromOptions('store', o);
  } catch (e) {
    fail((e as Error).message, 2);
  }
  // Decided: these commands change the node's store unless a shared one is named (--store, --store-url-file, or
  // --shared for LOGD_STORE_URL): an environment variable alone never points a removal at every node's runs.
  if (url === undefined && (o as { shared?: boolean }).shared) {
    url = process.env.LOGD_STORE_URL;
    if (!url) fail('--shared changes the store LOGD_STORE_URL names, and it is not set', 2);
  }
  if (!url) return localBackend(fail);
  return sharedBackend(url).catch((e: Error) => fail(e.message));
}

function target(ids: string[], o: { group?: string; project?: string }, fail: Fail): Target {
  if (o.group !== undefined && ids.length) fail('give run ids or --group, not both', 2);
  if (o.group === undefined && ids.length === 0) fail('name the runs (their ids), or a whole group with --group NAME', 2);
  if (o.group === '') fail('--group needs a name', 2);
  return { ids, group: o.group, project: o.project };
}

function storeOptions(cmd: Command): Command {
  return cmd
    .addOption(urlOption('store', 'change the shared store (every node\'s runs)', 'the node\'s store'))
    .addOption(urlFileOption('store'))
    .addOption(new Option('--shared', 'the shared store LOGD_STORE_URL names'));
}

const split = (v?: string) => (v ?? '').split(',').map((s) => s.trim()).filter(Boolean);

export function registerManageCommands(program: Command, fail: Fail): void {
  storeOptions(program
    .command('rename')
    .description('give a run a new name')
    .argument('<run>', 'run id')
    .argument('<name>', 'its new name'))
    .action(async (id: string, name: string, o: UrlOptions) => {
      const b = await backend(o, fail);
      try {
        const r = await b.edit(id, { name });
        console.log(`${id}  ${r.name}`);
      } catch (e) {
        fail((e as Error).message.replace(/^editRun: /, ''));
      } finally {
        await b.close();
      }
    });

  storeOptions(program
    .command('tag')
    .description('add tags to runs, or remove them (`logd runs --tag T` lists the runs with one)')
    .argument('[runs...]', 'run ids')
    .option('--add <tags>', 'tags to add (comma-separated)')
    .option('--remove <tags>', 'tags to remove (comma-separated)')
    .option('--group <name>', 'every run of this group')
    .option('--project <name>', 'with --group: of this project only'))
    .action(async (ids: string[], o: UrlOptions & { add?: string; remove?: string; group?: string; project?: string }) => {
      const addTags = split(o.add), removeTags = split(o.remove);
      if (!addTags.length && !removeTags.length) fail('say what to change: --add TAGS and/or --remove TAGS (comma-separated)', 2);
      const t = target(ids, o, fail);
      const b = await backend(o, fail);
      try {
        const runs = await b.select(t);
        if (!runs.length) fail(`group ${JSON.stringify(t.group)} has no runs in ${b.where}`);
        for (const r of runs) {
          const now = await b.edit(r.id, { addTags, removeTags });
          console.log(`${r.id}  ${now.tags.join(',') || '(no tags)'}`);
        }
      } catch (e) {
        fail((e as Error).message.replace(/^(editRun|getRun): /, ''));
      } finally {
        await b.close();
      }
    });

  storeOptions(program
    .command('note')
    .description('set a run\'s notes (the text `logd show` and the dashboard show with it)')
    .argument('<run>', 'run id')
    .argument('[text]', 'the notes; "-" reads them from standard input; empty clears them')
    .option('--append', 'add the text as a new line after the notes it has'))
    .action(async (id: string, text: string | undefined, o: UrlOptions & { append?: boolean }) => {
      if (text === undefined) fail('give the notes: logd note RUN "text" (or "-" to read them from standard input, "" to clear them)', 2);
      let notes = text === '-' ? await readStdin() : text;
      const b = await backend(o, fail);
      try {
        if (o.append) {
          const [cur] = await b.select({ ids: [id] });
          const had = 'notes' in cur ? (cur as RunInfo).notes : '';
          notes = had ? `${had}\n${notes}` : notes;
        }
        const r = await b.edit(id, { notes });
        const first = r.notes.split('\n')[0];
        console.log(`${id}  ${r.notes ? `notes: ${first.length > 60 ? first.slice(0, 60) : first}${first.length > 60 || first !== r.notes ? ' …' : ''}` : '(no notes)'}`);
      } catch (e) {
        fail((e as Error).message.replace(/^(editRun|getRun): /, ''));
      } finally {
        await b.close();
      }
    });

  storeOptions(program
    .command('rm')
    .description('remove runs for good (not running ones): their rows, console output and media')
    .argument('[runs...]', 'run ids')
    .option('--group <name>', 'every run of this group')
    .option('--project <name>', 'with --group: of this project only')
    .option('-y, --yes', 'do not ask (needed when standard input is not a terminal)'))
    .action(async (ids: string[], o: UrlOptions & { group?: string; project?: string; yes?: boolean }) => {
      const t = target(ids, o, fail);
      const b = await backend(o, fail);
      try {
        const runs = await b.select(t);
        if (!runs.length) fail(`group ${JSON.stringify(t.group)} has no runs in ${b.where}`);
        const running = runs.filter((r) => r.state === 'running' || r.state === 'finishing');
        if (running.length) {
          fail(`run ${running[0].id} is ${running[0].state}: a run can be removed once it has ended (finish it, or stop its process); nothing was removed`);
        }
        const list = runs.map((r) => `${r.id} (${r.name}, ${r.state})`);
        if (!o.yes) {
          if (!process.stdin.isTTY) fail(`logd rm removes ${runs.length} run(s) from ${b.where} for good: ${list.slice(0, 5).join(', ')}${runs.length > 5 ? ', …' : ''}; add --yes (standard input is not a terminal to ask on)`, 2);
          const rl = readline.createInterface({ input: process.stdin, output: process.stderr });
          const answer = await rl.question(`Remove ${runs.length} run(s) from ${b.where} for good?\n  ${list.join('\n  ')}\n[y/N] `);
          rl.close();
          if (!/^y(es)?$/i.test(answer.trim())) {
            console.error('logd: nothing removed');
            return;
          }
        }
        await b.remove(runs.map((r) => r.id));
        for (const r of runs) console.log(`removed ${r.id} (${r.name})`);
        if (b.where.startsWith('this node')) console.error(`logd: removed ${runs.length} run(s) from this node's store; a copy uploaded to a shared store stays there (logd rm --store)`);
      } catch (e) {
        fail((e as Error).message.replace(/^(deleteRun|getRun): /, ''));
      } finally {
        await b.close();
      }
    });
}

async function readStdin(): Promise<string> {
  const parts: Buffer[] = [];
  for await (const c of process.stdin) parts.push(c as Buffer);
  return Buffer.concat(parts).toString('utf8').replace(/\n$/, '');
}
