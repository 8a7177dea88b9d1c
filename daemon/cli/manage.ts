// `logd rename`, `logd tag`, `logd note`, `logd rm`: managing runs after they were made. On the node's store
// through its daemon (EditRun, DeleteRun: daemon/runs/manage.ts), or with --store on the shared PostgreSQL store
// directly. A selection is run ids, or a whole group (--group). `logd rm` asks before it removes anything when
// its standard input is a terminal, and otherwise wants --yes.
import readline from 'node:readline/promises';
import { Command, Option } from 'commander';
import { openSource, type QuerySource, type RunInfo } from '../query/index.js';
import { urlFileOption, urlOption, urlFromOptions, type UrlOptions } from './store-url.js';

type Fail = (msg: string, code?: number) => never;

interface Target { ids: string[]; group?: string; project?: string }

/** The store the command changes, and the runs a selection names there. */
async function backend(o: UrlOptions & { shared?: boolean }, fail: Fail): Promise<{ source: QuerySource; select(t: Target): Promise<RunInfo[]> }> {
  let url: string | undefined;
  try {
    url = urlFromOptions('store', o);
  } catch (e) {
    fail((e as Error).message, 2);
  }
  // Decided: these commands change the node's store unless a shared one is named (--store, --store-url-file, or
  // --shared for LOGD_STORE_URL): an environment variable alone never points a removal at every node's runs.
  if (url === undefined && o.shared) {
    url = process.env.LOGD_STORE_URL;
    if (!url) fail('--shared changes the store LOGD_STORE_URL names, and it is not set', 2);
  }
  const source = await openSource({ store: url, localOnly: !url }).catch((e: Error) => fail(e.message));
  if (!source.editRun || !source.removeRun) fail(`${source.where} cannot change runs`);
  return {
    source,
    async select(t) {
      if (!t.group) return Promise.all(t.ids.map((id) => source.getRun(id)));
      const out: RunInfo[] = [];
      for (let offset = 0; ;) {
        const page = await source.listRuns({ group: t.group, project: t.project, limit: 1000, offset });
        out.push(...page.runs.filter((r) => r.group === t.group));
        offset += page.runs.length;
        if (page.runs.length === 0 || offset >= page.total) break;
      }
      return out;
    },
  };
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
        const r = await b.source.editRun!(id, { name });
        console.log(`${id}  ${r.name}`);
      } catch (e) {
        fail((e as Error).message.replace(/^editRun: /, ''));
      } finally {
        await b.source.close();
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
        if (!runs.length) fail(`group ${JSON.stringify(t.group)} has no runs in ${b.source.where}`);
        for (const r of runs) {
          const now = await b.source.editRun!(r.id, { addTags, removeTags });
          console.log(`${r.id}  ${now.tags.join(',') || '(no tags)'}`);
        }
      } catch (e) {
        fail((e as Error).message.replace(/^(editRun|getRun): /, ''));
      } finally {
        await b.source.close();
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
          const had = cur.notes;
          notes = had ? `${had}\n${notes}` : notes;
        }
        const r = await b.source.editRun!(id, { notes });
        const first = r.notes.split('\n')[0];
        console.log(`${id}  ${r.notes ? `notes: ${first.length > 60 ? first.slice(0, 60) : first}${first.length > 60 || first !== r.notes ? ' …' : ''}` : '(no notes)'}`);
      } catch (e) {
        fail((e as Error).message.replace(/^(editRun|getRun): /, ''));
      } finally {
        await b.source.close();
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
        if (!runs.length) fail(`group ${JSON.stringify(t.group)} has no runs in ${b.source.where}`);
        const running = runs.filter((r) => r.state === 'running' || r.state === 'finishing');
        if (running.length) {
          fail(`run ${running[0].id} is ${running[0].state}: a run can be removed once it has ended (finish it, or stop its process); nothing was removed`);
        }
        const list = runs.map((r) => `${r.id} (${r.name}, ${r.state})`);
        if (!o.yes) {
          if (!process.stdin.isTTY) fail(`logd rm removes ${runs.length} run(s) from ${b.source.where} for good: ${list.slice(0, 5).join(', ')}${runs.length > 5 ? ', …' : ''}; add --yes (standard input is not a terminal to ask on)`, 2);
          const rl = readline.createInterface({ input: process.stdin, output: process.stderr });
          const answer = await rl.question(`Remove ${runs.length} run(s) from ${b.source.where} for good?\n  ${list.join('\n  ')}\n[y/N] `);
          rl.close();
          if (!/^y(es)?$/i.test(answer.trim())) {
            console.error('logd: nothing removed');
            return;
          }
        }
        for (const r of runs) await b.source.removeRun!(r.id);
        for (const r of runs) console.log(`removed ${r.id} (${r.name})`);
        if (b.source.kind === 'local') console.error(`logd: removed ${runs.length} run(s) from this node's store; a copy uploaded to a shared store stays there (logd rm --store)`);
      } catch (e) {
        fail((e as Error).message.replace(/^(deleteRun|getRun): /, ''));
      } finally {
        await b.source.close();
      }
    });
}

async function readStdin(): Promise<string> {
  const parts: Buffer[] = [];
  for await (const c of process.stdin) parts.push(c as Buffer);
  return Buffer.concat(parts).toString('utf8').replace(/\n$/, '');
}
