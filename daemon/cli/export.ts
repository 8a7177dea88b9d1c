// `logd export`: a run's history, or every run of a group's, as JSON lines, CSV, Parquet or an Arrow IPC file, to
// --output (whole or not at all) or standard output. The files' columns are export-files.ts's.
import fs from 'node:fs';
import { Command, Option } from 'commander';
import { LOGD_VERSION } from '../../src/config.js';
import type { RunInfo } from '../../src/wire.js';
import { mergeBySteps, rawRows, jsonLines, csvLines } from '../../client/history.js';
import type { QuerySource } from '../query/index.js';
import { exportColumns, parquetBytes, arrowBytes, groupColumns, csvOfColumns, type ExportColumn, type GroupPart } from './export-files.js';
import { runJson, damageLine } from './run-json.js';
import { urlOption, urlFileOption, type UrlOptions } from './store-url.js';

export function registerExportCommand(program: Command, d: { fail: (msg: string, code?: number) => never; querySource: (o: UrlOptions) => Promise<QuerySource>; storeHelp: string }): void {
  const fail = d.fail;
  program
    .command('export')
    .description('export a run\'s history (or every run of a group\'s) as JSON lines, CSV, Parquet or an Arrow IPC file')
    .argument('[run]', 'run id')
    .option('--group <name>', 'every run of this group in one file, long form: run_id and rank first (instead of a run)')
    .addOption(new Option('--format <f>', 'output format (parquet and arrow: one float64 column per metric, null where a row has none)').choices(['jsonl', 'csv', 'parquet', 'arrow']).default('jsonl'))
    .option('--output <file>', 'write to this file instead of stdout')
    .option('--force', 'overwrite --output if it exists')
    .option('--keys <list>', 'only these metrics (comma-separated)')
    .option('--raw', 'rows exactly as stored (arrival order, with _writer), not merged by step')
    .option('--all-attempts', 'also the rows a rewind (resume_from) superseded, with _attempt and _superseded; default: the latest timeline')
    .option('--system', "the node's system metrics sampled while the run was alive, instead of its history")
    .addOption(urlOption('store', d.storeHelp))
    .addOption(urlFileOption('store'))
    .action(async (id: string | undefined, o: { format: 'jsonl' | 'csv' | 'parquet' | 'arrow'; output?: string; force?: boolean; keys?: string; raw?: boolean; allAttempts?: boolean; system?: boolean; group?: string } & UrlOptions) => {
      if (o.allAttempts && o.system) fail('--all-attempts is about the run\'s history; --system exports the node\'s metrics: give one of them');
      if (!id === !o.group) fail(id ? `give a run id or --group, not both` : 'give a run id, or --group NAME for every run of a group (`logd runs` lists them)', 2);
      if (o.output && fs.existsSync(o.output) && !o.force) fail(`${o.output} exists; add --force to overwrite it`);
      const binary = o.format === 'parquet' || o.format === 'arrow';
      if (binary && !o.output && process.stdout.isTTY) fail(`--format ${o.format} writes a binary file: give --output FILE (or redirect standard output)`, 2);
      const src = await d.querySource(o);
      if (o.group) return exportGroup(src, o.group, { ...o, binary }, fail);
      const info = await src.getRun(id!).catch((e: Error) => fail(e.message));
      const damage = damageLine(runJson(info));
      if (damage && !o.system) process.stderr.write(`logd: warning: run ${id}: ${damage}\n`);
      const keys = o.keys ? o.keys.split(',').map((k) => k.trim()).filter(Boolean) : [];
      const h = await src.history(id!, { keys, system: !!o.system, allAttempts: !!o.allAttempts }).catch((e: Error) => fail(e.message));
      const groups = o.raw || o.system ? rawRows(h) : mergeBySteps(h);
      if (binary) {
        const cols = exportColumns(h, groups, !!o.raw || !!o.system);
        return writeColumnsFile(cols, groups.length, `run ${id}`, o);
      }
      writeLines(o.format === 'jsonl' ? jsonLines(h, groups, !!o.raw) : csvLines(h, groups, !!o.raw), o);
      if (o.output) process.stderr.write(`logd: wrote ${groups.length} rows of run ${id} to ${o.output}\n`);
    });
}

type ExportOptions = { format: 'jsonl' | 'csv' | 'parquet' | 'arrow'; output?: string; force?: boolean; keys?: string; raw?: boolean; allAttempts?: boolean; system?: boolean };

/** A Parquet or Arrow file of the columns: to --output whole or not at all (a file that is there is complete), or to standard output. */
async function writeColumnsFile(cols: ExportColumn[], rows: number, what: string, o: ExportOptions): Promise<void> {
  const bytes = o.format === 'parquet' ? await parquetBytes(cols, `logd ${LOGD_VERSION}`) : await arrowBytes(cols);
  if (!o.output) return writeAllBytes(1, bytes);
  const tmp = `${o.output}.logd-tmp-${process.pid}`;
  fs.writeFileSync(tmp, bytes, { mode: 0o644 });
  fs.renameSync(tmp, o.output);
  process.stderr.write(`logd: wrote ${rows} rows × ${cols.length} columns of ${what} to ${o.output} (${o.format}, ${bytes.byteLength} bytes)\n`);
}

/** Lines to --output (or standard output), written in batches of 8 192. */
class LineSink {
  private readonly fd: number;
  private buf: string[] = [];

  constructor(private readonly o: ExportOptions) {
    this.fd = o.output ? fs.openSync(o.output, o.force ? 'w' : 'wx') : 1;
  }

  push(line: string): void {
    this.buf.push(line);
    if (this.buf.length >= 8192) this.flush();
  }

  private flush(): void {
    if (this.buf.length) writeAll(this.fd, this.buf.join('\n') + '\n');
    this.buf = [];
  }

  end(): void {
    this.flush();
    if (this.o.output) fs.closeSync(this.fd);
  }
}

function writeLines(lines: Iterable<string>, o: ExportOptions): void {
  const sink = new LineSink(o);
  for (const l of lines) sink.push(l);
  sink.end();
}

/**
 * `logd export --group G`: every run of the group in one file, long form, `run_id` and `rank` first; runs in rank
 * order (then by creation). JSON lines go run by run; CSV, Parquet and Arrow hold every run's columns at once (the
 * metrics of any run as columns, empty where a run has none).
 */
async function exportGroup(src: QuerySource, group: string, o: ExportOptions & { binary: boolean }, fail: (msg: string) => never): Promise<void> {
  const runs: RunInfo[] = [];
  for (let offset = 0; ;) {
    const page = await src.listRuns({ group, limit: 1000, offset }).catch((e: Error) => fail(e.message));
    runs.push(...page.runs.filter((r) => r.group === group));
    offset += page.runs.length;
    if (page.runs.length === 0 || offset >= page.total) break;
  }
  if (!runs.length) fail(`no group ${JSON.stringify(group)} in ${src.where}; list groups with \`logd runs\``);
  const rankOf = (r: RunInfo): number | null => {
    const rank = (runJson(r).metadata as { rank?: { rank?: number } | null }).rank?.rank;
    return typeof rank === 'number' && rank >= 0 ? rank : null;
  };
  runs.sort((a, b) => (rankOf(a) ?? Infinity) - (rankOf(b) ?? Infinity) || a.createdAt - b.createdAt || (a.id < b.id ? -1 : 1));
  const keys = o.keys ? o.keys.split(',').map((k) => k.trim()).filter(Boolean) : [];
  const raw = !!o.raw || !!o.system;
  const read = async (r: RunInfo) => {
    const h = await src.history(r.id, { keys, system: !!o.system, allAttempts: !!o.allAttempts }).catch((e: Error) => fail(e.message));
    return { h, groups: raw ? rawRows(h) : mergeBySteps(h) };
  };
  let rows = 0;
  if (o.format === 'jsonl') {
    const sink = new LineSink(o);
    for (const r of runs) {
      const { h, groups } = await read(r);
      rows += groups.length;
      const head = `{"run_id":${JSON.stringify(r.id)},"rank":${rankOf(r) ?? 'null'},`;
      for (const l of jsonLines(h, groups, !!o.raw)) sink.push(head + l.slice(1));
    }
    sink.end();
  } else {
    const parts: GroupPart[] = [];
    for (const r of runs) {
      const { h, groups } = await read(r);
      rows += groups.length;
      parts.push({ id: r.id, rank: rankOf(r), cols: exportColumns(h, groups, raw) });
    }
    const cols = groupColumns(parts);
    if (o.binary) return writeColumnsFile(cols, rows, `${runs.length} runs of group ${group}`, o);
    writeLines(csvOfColumns(cols), o);
  }
  if (o.output) process.stderr.write(`logd: wrote ${rows} rows of ${runs.length} runs of group ${group} to ${o.output}\n`);
}

/** Synchronous full write (stdout may be a pipe that takes a little at a time). */
function writeAll(fd: number, text: string): void {
  writeAllBytes(fd, Buffer.from(text));
}

function writeAllBytes(fd: number, b: Uint8Array): void {
  let off = 0;
  while (off < b.length) {
    try {
      off += fs.writeSync(fd, b, off);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'EAGAIN') continue;
      if ((e as NodeJS.ErrnoException).code === 'EPIPE') process.exit(0);
      throw e;
    }
  }
}
