// The logd command line's commands (daemon/cli.ts loads this for every command but `serve`). Parsing lives here;
// each command is a small function.
import { shortNumber } from '../../src/number.js';
import { describeEnd, type RunEnd } from '../../src/story/end.js';
import fs from 'node:fs';
import { resolvePaths } from '../../src/config.js';
import { type RunInfo, type ServiceAddress } from '../../src/wire.js';
import { connectionFor } from '../../client/connection.js';
import { checkedDaemon } from '../../client/stale-service.js';
import { stopMarker } from '../../src/service-file.js';
import { describeEnvironment } from '../../src/environment.js';
import { mergeBySteps, rawRows, jsonLines, csvLines } from '../../client/history.js';
import { lastRows } from './last-rows.js';
import { registerExportCommand } from './export.js';
import { runJson, damageLine } from './run-json.js';
import { parseFilter, selectRuns, fieldValue, isRunField, RUN_FIELD_NAMES, LOWER_IS_BETTER, type FilterTerm, type RunFields } from '../../src/run-filter.js';
import { openSource, type QuerySource } from '../query/index.js';
import { registerLaunchCommand } from '../../launcher/main.js';
import { registerUiCommand } from './ui.js';
import { registerHealthCommand } from './health.js';
import { registerLogsCommand } from './logs.js';
import { registerMediaCommand } from './media.js';
import { registerUploadCommands, uploadStatusLines, daemonUploadStatus } from './upload.js';
import { registerAlertsCommands, alertsStatusLines } from './alerts.js';
import { registerReadsServerCommand } from './reads-server.js';
import { registerManageCommands } from './manage.js';
import { readAlertsStatus } from '../alerts/start.js';
import { urlOption, urlFileOption, urlOrExit, type UrlOptions } from './store-url.js';
import { registerServeCommand } from './serve.js';
import { fail, intArg, logdProgram } from './common.js';

const CALL_MS = 30_000;
/** How long a LOGD_SERVICE address gets to answer before it counts as stale. */
const CHECK_MS = 5_000;


/** The running daemon, without starting one (status, stop). A stale LOGD_SERVICE is reported and passed over. */
function runningDaemon(): Promise<ServiceAddress | null> {
  return checkedDaemon({ autoStart: false, timeoutMs: CHECK_MS });
}

/** What runs, show and export read: the shared store with --store / --store-url-file (or LOGD_STORE_URL), else the local one. */
async function querySource(o: UrlOptions): Promise<QuerySource> {
  return openSource({ store: urlOrExit('store', o) }).catch((e: Error) => fail(e.message));
}

const STORE_HELP = 'read the shared PostgreSQL store instead of the local one';


/** The stable JSON shape of a run (documented in the README). */

function table(rows: string[][]): string {
  const w = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  return rows.map((r) => r.map((c, i) => c.padEnd(w[i])).join('  ').trimEnd()).join('\n');
}

const program = logdProgram();

registerServeCommand(program);

program
  .command('status')
  .description('show the running daemon: pid, addresses, open runs, clients')
  .option('--json', 'machine-readable output')
  .action(async (o: { json?: boolean }) => {
    const addr = await runningDaemon();
    if (!addr) fail(`no logd daemon is running for ${resolvePaths().dataDir}; start one with \`logd serve\` (clients start one by themselves)`, 3);
    const s = await connectionFor(addr).unary<unknown, { pid: number; version: string; addresses: string[]; dataDir: string; startedAt: number; sidecar: boolean; openRuns: RunInfo[]; clients: Array<{ pid: number; host: string; rank?: { rank: number } }>; recordsStored: number; storageProblem: string; storeProblems?: string[] }>('status', {}, CALL_MS)
      .catch((e: Error) => fail(`the daemon at ${addr.target} does not answer: ${e.message}`, 3));
    const upload = daemonUploadStatus(s.dataDir);
    if (o.json) {
      console.log(JSON.stringify({ pid: s.pid, version: s.version, addresses: s.addresses, dataDir: s.dataDir, sidecar: s.sidecar,
        startedAt: new Date(s.startedAt * 1000).toISOString(), recordsStored: Number(s.recordsStored), storageProblem: s.storageProblem, upload, alerts: readAlertsStatus(s.dataDir),
        storeProblems: s.storeProblems ?? [],
        openRuns: s.openRuns.map(runJson), clients: s.clients.map((c) => ({ pid: c.pid, host: c.host, rank: c.rank?.rank ?? -1 })) }, null, 2));
      return;
    }
    console.log(`logd ${s.version}, pid ${s.pid}${s.sidecar ? ' (sidecar)' : ''}, up since ${new Date(s.startedAt * 1000).toISOString()}`);
    console.log(`data dir:  ${s.dataDir}`);
    console.log(`addresses: ${s.addresses.join(', ')}`);
    console.log(`records stored since start: ${s.recordsStored}`);
    if (s.storageProblem) console.log(`STORAGE PROBLEM: ${s.storageProblem}`);
    for (const p of s.storeProblems ?? []) console.log(`STORED DATA PROBLEM: ${p}`);
    for (const l of uploadStatusLines(upload)) console.log(l);
    for (const l of alertsStatusLines(readAlertsStatus(s.dataDir))) console.log(l);
    console.log(`open runs: ${s.openRuns.length}`);
    for (const r of s.openRuns) console.log(`  ${r.id}  ${r.project}/${r.name}  ${r.state}  ${r.historyRows} rows, ${r.writers} writer(s)`);
    console.log(`clients: ${s.clients.length}`);
    for (const c of s.clients) console.log(`  pid ${c.pid} on ${c.host}${c.rank && c.rank.rank >= 0 ? ` rank ${c.rank.rank}` : ''}`);
  });

program
  .command('runs')
  .description('list runs, newest first')
  .option('--project <p>', 'only this project')
  .option('--group <g>', 'only this group')
  .option('--state <s>', 'only runs in this state (running, finished, crashed, killed)')
  .option('--tag <t>', 'only runs carrying this tag')
  .option('--search <text>', 'only runs whose id, name, project, group or notes contain this text')
  .option('--limit <n>', 'at most this many', intArg('--limit'), 1000)
  .option('--offset <n>', 'skip this many of the matching runs (paging)', intArg('--offset'), 0)
  .option('--filter <expr>', 'only runs where every term holds: "lr < 0.01; state = crashed" (config or summary keys, run fields; = != < <= > >= ~); repeatable', (v: string, all: string[] = []) => [...all, v])
  .option('--sort <field>', 'order by this field, config key or summary key (config.lr, summary.loss, name, rows); a leading - sorts highest first')
  .option('--columns <list>', 'extra columns of the table, comma-separated: config or summary keys (config.lr,summary.loss) or run fields (stateReason,exitCode,signal,ended,host)')
  .addOption(urlOption('store', STORE_HELP))
  .addOption(urlFileOption('store'))
  .option('--json', 'machine-readable output (an array; a note on stderr says when the list was cut)')
  .action(async (o: { project?: string; group?: string; state?: string; tag?: string; search?: string; limit: number; offset: number; filter?: string[]; sort?: string; columns?: string; json?: boolean } & UrlOptions) => {
    let terms: FilterTerm[] = [];
    try {
      terms = (o.filter ?? []).flatMap((f) => parseFilter(f));
    } catch (e) {
      fail(`--filter: ${(e as Error).message}`, 2);
    }
    const src = await querySource(o);
    const base = { project: o.project, group: o.group, state: o.state, tag: o.tag, text: o.search };
    // A filter expression or a sort looks at every matching run, then pages (src/run-filter.ts).
    const res = terms.length || o.sort
      ? await src.listRuns({ ...base, limit: 2 ** 31 - 1, offset: 0 }).then((all) => {
        const desc = !!o.sort?.startsWith('-');
        const picked = selectRuns(all.runs.map((r) => ({ info: r, ...(runJson(r) as RunFields) })), terms, (o.sort ?? '').replace(/^-/, ''), desc);
        return { runs: picked.slice(o.offset, o.offset + o.limit).map((p) => p.info), total: picked.length };
      }).catch((e: Error) => fail(e.message))
      : await src.listRuns({ ...base, limit: o.limit, offset: o.offset }).catch((e: Error) => fail(e.message));
    const columns = (o.columns ?? '').split(',').map((c) => c.trim()).filter(Boolean);
    // A column is a run field, or a config or summary key some listed run has: anything else is a typo, said so.
    if (columns.length && res.runs.length) {
      const listed = res.runs.map((r) => runJson(r) as RunFields);
      // config.KEY / summary.KEY name a key outright ("-" where a run has none); a bare name must be known.
      const unknown = columns.filter((c) => !isRunField(c) && !/^(config|summary)\./.test(c) && !listed.some((j) => fieldValue(j, c) !== undefined));
      if (unknown.length) fail(`--columns: no run listed has ${unknown.map((c) => JSON.stringify(c)).join(', ')}: a column is a run field (${RUN_FIELD_NAMES.join(', ')}) or a config or summary key (config.KEY, summary.KEY)`, 2);
    }
    // Never cut the list without a word (on stderr, so --json stays one array).
    const n = res.runs.length;
    const order = o.sort ? `by ${o.sort}` : 'newest first';
    const cut = o.offset === 0 && res.total > n ? `logd: showing ${n} of ${res.total} runs, ${order}; see more with --limit ${res.total}\n`
      : o.offset > 0 && n > 0 ? `logd: showing runs ${o.offset + 1}-${o.offset + n} of ${res.total}, ${order}; see the others with --offset and --limit\n` : '';
    if (o.json) {
      console.log(JSON.stringify(res.runs.map(runJson), null, 2));
      process.stderr.write(cut);
      return;
    }
    if (res.runs.length === 0) {
      console.log(res.total > 0 ? `no runs at offset ${o.offset} (${res.total} match)` : 'no runs');
      return;
    }
    // The shared store holds several nodes' runs: say which node each came from.
    const shared = src.kind === 'shared';
    const rows = [['ID', 'PROJECT', 'GROUP', 'NAME', 'STATE', 'ROWS', 'RANK', ...(shared ? ['NODE'] : []), ...columns.map((c) => c.toUpperCase()), 'CREATED']];
    for (const r of res.runs) {
      const meta = JSON.parse(r.metadataJson || '{}') as { rank?: { rank: number } | null; node?: string };
      const rank = meta.rank && meta.rank.rank >= 0 ? String(meta.rank.rank) : '-';
      const j = columns.length ? (runJson(r) as RunFields) : null;
      const extra = columns.map((c) => {
        const v = fieldValue(j!, c);
        return v === undefined || v === null ? '-' : typeof v === 'string' ? v : typeof v === 'number' ? String(shortNumber(v)) : JSON.stringify(v);
      });
      rows.push([r.id, r.project, r.group || '-', r.name, r.state, String(r.historyRows), rank, ...(shared ? [meta.node ?? '-'] : []), ...extra, new Date(r.createdAt * 1000).toISOString()]);
    }
    console.log(table(rows));
    process.stderr.write(cut);
  });

program
  .command('show')
  .description("show one run: metadata, config, summary and its last rows")
  .argument('<run>', 'run id')
  .option('--rows <n>', 'how many of the last rows to print', intArg('--rows'), 5)
  .addOption(urlOption('store', STORE_HELP))
  .addOption(urlFileOption('store'))
  .option('--json', 'machine-readable output')
  .action(async (id: string, o: { rows: number; json?: boolean } & UrlOptions) => {
    const src = await querySource(o);
    const r = await src.getRun(id).catch((e: Error) => fail(e.message));
    // Only the tail of the log is read: fast on runs of any size (daemon/cli/last-rows.ts).
    const writers = ((JSON.parse(r.metadataJson || '{}') as { writers?: Array<{ idx: number }> }).writers ?? []).map((w) => w.idx);
    const last = await lastRows(src, id, o.rows, Number(r.historyRows), writers.length ? writers : [0]).catch((e: Error) => fail(e.message));
    const j = runJson(r);
    const meta0 = j.metadata as Record<string, unknown>;
    if (meta0.summaryCapped && src.wholeSummary) {
      // RunInfo carries 1000 keys at most; show gives the whole summary.
      const whole = await src.wholeSummary(id).catch((e: Error) => fail(e.message));
      j.summary = whole.summary;
      meta0.stats = whole.stats;
      delete meta0.summaryCapped;
    }
    if (o.json) {
      console.log(JSON.stringify({ ...j, lastRows: last }, null, 2));
      return;
    }
    console.log(`run ${r.id}: ${r.project}/${r.name}${r.group ? ` (group ${r.group})` : ''}`);
    console.log(`state: ${r.state}${r.stateReason ? ` (${r.stateReason})` : ''}, exit code ${r.exitCode}, ${r.historyRows} rows`);
    console.log(`created: ${j.createdAt}${j.finishedAt ? `, finished: ${j.finishedAt}` : ''}`);
    console.log(`config:  ${JSON.stringify(j.config)}`);
    // About 6 significant digits for people; --json keeps every digit.
    console.log(`summary: ${JSON.stringify(j.summary, (_k, v) => (typeof v === 'number' ? shortNumber(v) : v))}`);
    // Beside the last value, the range of every value logged (metadata.stats), and the best (lowest for a loss or an error).
    const stats = Object.entries((j.metadata as { stats?: Record<string, { min?: number; max?: number; count?: number }> }).stats ?? {})
      .filter(([, st]) => typeof st.min === 'number' && typeof st.max === 'number' && (st.count ?? 0) > 1);
    if (stats.length) {
      const shown = stats.slice(0, 20).map(([k, st]) => `${k} ${shortNumber(st.min!)} … ${shortNumber(st.max!)} (best ${shortNumber(LOWER_IS_BETTER.test(k) ? st.min! : st.max!)}, ${st.count} values)`);
      console.log(`range:   ${shown.join('; ')}${stats.length > 20 ? `; and ${stats.length - 20} more (--json)` : ''}`);
    }
    const meta = j.metadata as { host?: string; pid?: number; rank?: { rank: number; worldSize?: number; localRank?: number; nodeRank?: number } | null; end?: RunEnd; system?: { gpus: Array<{ index: number; name: string }>; last: Record<string, number> | null } | null };
    const rk = meta.rank && meta.rank.rank >= 0 ? `rank ${meta.rank.rank}${(meta.rank.worldSize ?? -1) > 0 ? ` of ${meta.rank.worldSize}` : ''}${(meta.rank.localRank ?? -1) >= 0 ? ` (local rank ${meta.rank.localRank}${(meta.rank.nodeRank ?? -1) >= 0 ? `, node rank ${meta.rank.nodeRank}` : ''})` : ''}` : 'no rank';
    console.log(`host: ${meta.host}, pid ${meta.pid}, ${rk}`);
    // Its code and environment (SetEnvironment), when its client sent them.
    const env = (j.metadata as { environment?: Record<string, unknown> }).environment;
    if (env) for (const [k, v] of describeEnvironment(env)) console.log(`${k}: ${v}`);
    if (meta.end && r.state !== 'running') {
      console.log(`ended: its process ${describeEnd(meta.end)} at ${new Date(meta.end.at * 1000).toISOString()}${meta.end.lastStep >= 0 ? `, last step ${meta.end.lastStep}` : ''}${meta.end.exception ? '' : ''}`);
      if (meta.end.lastLines.length && r.state !== 'finished') console.log(`last console lines:\n${meta.end.lastLines.slice(-5).map((l) => `  ${l}`).join('\n')}`);
    }
    const { attempts, supersededRows, forkedFrom } = j.metadata as {
      attempts?: Array<{ n: number; startedAt: number; host: string; pid: number; fromStep: number; resumedFromStep?: number; state?: string; reason?: string; endedAt?: number }>;
      supersededRows?: number; forkedFrom?: { runId: string; step: number };
    };
    if (forkedFrom) console.log(`forked from: run ${forkedFrom.runId} at step ${forkedFrom.step} (its rows up to that step were copied)`);
    if (attempts && attempts.length > 1) {
      console.log(`attempts: ${attempts.length}`);
      for (const a of attempts) {
        const end = a.state ? `${a.state}${a.reason ? ` (${a.reason})` : ''} at ${new Date((a.endedAt ?? 0) * 1000).toISOString()}` : 'running';
        const rewound = typeof a.resumedFromStep === 'number' ? ` (resumed from step ${a.resumedFromStep})` : '';
        console.log(`  ${a.n}: from step ${a.fromStep}${rewound}, started ${new Date(a.startedAt * 1000).toISOString()} on ${a.host || '?'} pid ${a.pid}; ${end}`);
      }
    }
    if (supersededRows) console.log(`superseded: ${supersededRows} row(s) of earlier attempts, above the step a later attempt resumed from; \`logd export ${r.id} --all-attempts\` shows them`);
    const media = (j.metadata as { media?: Record<string, { kind: string; count: number; lastStep: number }> }).media;
    if (media && Object.keys(media).length > 0) {
      const list = Object.entries(media).map(([k, m]) => `${JSON.stringify(k)} (${m.count} ${m.kind}${m.count === 1 ? '' : m.kind === 'text' ? 's' : 's'})`);
      console.log(`media: ${list.join(', ')}; \`logd media ${r.id}\` lists them`);
    }
    const damage = damageLine(j);
    if (damage) console.log(`DAMAGED: ${damage}`);
    if (meta.system) {
      if (meta.system.gpus.length) {
        const byName = new Map<string, number>();
        for (const g of meta.system.gpus) byName.set(g.name, (byName.get(g.name) ?? 0) + 1);
        console.log(`gpus: ${[...byName].map(([n, c]) => `${c} x ${n}`).join(', ')}`);
      }
      if (meta.system.last) console.log(`system (last sample): ${formatSystem(meta.system.last)}`);
    }
    if (last.length) {
      console.log(`last ${last.length} row(s):`);
      for (const x of last) console.log(`  ${JSON.stringify(x)}`);
    }
  });

registerExportCommand(program, { fail, querySource, storeHelp: STORE_HELP });

/** The run's own process first, then the node; full list with `export --system`. */
function formatSystem(last: Record<string, number>): string {
  const keys = Object.keys(last).sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : 1));
  return keys.slice(0, 24).map((k) => `${k}=${Math.round(last[k] * 100) / 100}`).join(' ') + (keys.length > 24 ? ` … (${keys.length} metrics)` : '');
}
function rank(k: string): number {
  return k.startsWith('proc.') || k.startsWith('gpu.process.') ? 0 : k.startsWith('writer') ? 1 : k.startsWith('gpu.') ? 3 : 2;
}

program
  .command('stop')
  .description('stop the running daemon gracefully (open runs become killed)')
  .action(async () => {
    const addr = await runningDaemon();
    if (!addr) fail(`no logd daemon is running for ${resolvePaths().dataDir}`, 3);
    const r = await connectionFor(addr).unary<unknown, { runsKilled: number }>('shutdown', {}, CALL_MS).catch((e: Error) => fail(e.message, 3));
    // Stopped on purpose: readers (`logd ui`, `logd runs`) do not start another; a trainer or `logd serve` does.
    try {
      fs.writeFileSync(stopMarker(resolvePaths().dataDir), JSON.stringify({ at: Date.now(), pid: process.pid }) + '\n', { mode: 0o600 });
    } catch (e) {
      process.stderr.write(`logd: the daemon stopped, but readers may start it again: cannot mark it stopped (${(e as Error).message})\n`);
    }
    console.log(`logd: daemon stopping; ${r.runsKilled} open run(s) finalised as killed (a run whose owner goes on resumes on the next daemon)`);
  });

registerUploadCommands(program);
registerAlertsCommands(program, fail);
registerHealthCommand(program, fail);
registerLogsCommand(program, fail);
registerMediaCommand(program, fail);

// `logd launch`: torchrun-style ranks; the node's daemon is made sure of once, before any rank starts.
registerLaunchCommand(program, async () => {
  const { setup } = await import('../../client/index.js');
  const { service } = await setup();
  return { LOGD_SERVICE: service };
});

registerUiCommand(program, fail);
registerReadsServerCommand(program, fail);
registerManageCommands(program, fail);

program.parseAsync(process.argv).then(
  () => {
    // Query commands end here; the daemon (`serve`) keeps running on its server.
  },
  (e: Error) => fail(e.message),
);
