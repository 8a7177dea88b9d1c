// `logd logs RUN`: the console output a run's processes printed (captured by
// the clients, stored in the run's record log as CONSOLE frames, read through
// the daemon's ReadConsole), or from the shared store with LOGD_STORE_URL
// (the uploader copies console output there).
import { Command, InvalidArgumentError, Option } from 'commander';
import { openSource, type ConsoleLine } from '../query/index.js';

/** One printed line as `logd logs --json` writes it (documented in docs/cli.md). */
export interface LogLine { t: number; stream: 'out' | 'err'; rank: number | null; writer: number; line: string }

/** Stored pieces as lines: each piece's text split at its newlines (a piece cut at a bound ends a line too). */
export function* linesOf(pieces: Iterable<ConsoleLine>): Generator<LogLine> {
  for (const p of pieces) {
    const parts = p.l.split('\n');
    if (parts[parts.length - 1] === '') parts.pop();
    for (const line of parts) yield { t: p.t, stream: p.s, rank: p.rank, writer: p.w, line };
  }
}

function count(name: string) {
  return (v: string) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0) throw new InvalidArgumentError(`${name} must be a non-negative integer`);
    return n;
  };
}

interface LogsOptions { rank?: number; stream?: 'out' | 'err'; tail?: number; json?: boolean }

export function registerLogsCommand(program: Command, fail: (msg: string) => never): void {
  program
    .command('logs')
    .description("a run's console output (stdout and stderr of its processes), in the order it was stored")
    .argument('<run>', 'run id')
    .option('--rank <n>', 'only the processes with this RANK', count('--rank'))
    .addOption(new Option('--stream <s>', 'only stdout or stderr').choices(['out', 'err']))
    .option('--tail <n>', 'only the last n lines', count('--tail'))
    .option('--json', 'one JSON object per line: {t, stream, rank, writer, line}')
    .action(async (id: string, o: LogsOptions) => {
      const src = await openSource().catch((e: Error) => fail(e.message));
      if (!src.console) fail(`${src.where} does not keep console output`);
      const wanted = (l: LogLine) => (o.rank === undefined || l.rank === o.rank) && (o.stream === undefined || l.stream === o.stream);
      const tail: LogLine[] = [];
      const writers = new Set<number>();
      const out: string[] = [];
      const put = (l: LogLine) => {
        if (o.tail !== undefined) {
          tail.push(l);
          if (tail.length > o.tail) tail.shift();
          return;
        }
        out.push(format(l, o.json, writers.size > 1));
        if (out.length >= 4096) process.stdout.write(out.splice(0).join(''));
      };
      for (let after = 0; ;) {
        const page = await src.console!(id, after).catch((e: Error) => fail(e.message));
        for (const p of page.entries) writers.add(p.w);
        for (const l of linesOf(page.entries)) if (wanted(l)) put(l);
        if (!page.next) break;
        after = page.next;
      }
      for (const l of tail) out.push(format(l, o.json, writers.size > 1));
      process.stdout.write(out.join(''));
      await src.close();
    });
}

/** A line for people (prefixed with its rank when the run had several processes), or as JSON. */
function format(l: LogLine, json: boolean | undefined, prefix: boolean): string {
  if (json) return JSON.stringify(l) + '\n';
  const who = l.rank !== null ? `[rank ${l.rank}] ` : `[writer ${l.writer}] `;
  return `${prefix ? who : ''}${l.line}\n`;
}
