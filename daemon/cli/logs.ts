// `logd logs RUN`: the console output a run's processes printed (captured by
// the clients, stored in the run's record log as CONSOLE frames, read through
// the daemon's ReadConsole), or from the shared store with LOGD_STORE_URL
// (the uploader copies console output there).
import { runRank } from '../../src/run-rank.js';
import { Command, InvalidArgumentError, Option } from 'commander';
import { openSource, RunNotFound, type ConsoleLine, type RunInfo } from '../query/index.js';
import { attemptsOf, attemptAt, attemptHeading, type AttemptInfo } from './attempts.js';

/** One printed line as `logd logs --json` writes it (documented in docs/cli.md). */
export interface LogLine { t: number; stream: 'out' | 'err'; rank: number | null; writer: number; line: string; run?: string; attempt?: number }

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

interface LogsOptions { rank?: number; stream?: 'out' | 'err'; tail?: number; json?: boolean; grep?: string; follow?: boolean }

/** How often --follow asks for new output, and how long it goes on once every run it shows is final. */
const FOLLOW_MS = 1000;
const GROUP_QUIET_MS = 10_000;

// SGR and other CSI sequences: --grep searches the text as it reads, colours left out.
// eslint-disable-next-line no-control-regex
const CSI = /\x1b\[[0-9;?]*[ -/]*[@-~]/g;

/**
 * One run's console output read from a cursor on. The source pages by file
 * offset and says `next: 0` on its last page; the cursor is where that page
 * started and how many of its pieces were taken, so asking again gives only
 * what is new (the log only grows).
 */
class RunReader {
  private offset = 0;
  private skip = 0;
  constructor(readonly id: string, private readonly read: (id: string, after: number) => Promise<{ entries: ConsoleLine[]; next: number }>) {}

  async more(): Promise<ConsoleLine[]> {
    const got: ConsoleLine[] = [];
    for (;;) {
      const page = await this.read(this.id, this.offset);
      got.push(...page.entries.slice(this.skip));
      if (!page.next) {
        this.skip = page.entries.length;
        return got;
      }
      this.offset = page.next;
      this.skip = 0;
    }
  }
}

export function registerLogsCommand(program: Command, fail: (msg: string) => never): void {
  program
    .command('logs')
    .description("a run's console output (stdout and stderr of its processes), or a group's, merged by time")
    .argument('<run|group>', 'a run id, or a group name (every run of the group, each line prefixed with its rank)')
    .option('--rank <n>', 'only the processes with this RANK', count('--rank'))
    .addOption(new Option('--stream <s>', 'only stdout or stderr').choices(['out', 'err']))
    .option('--grep <re>', 'only lines matching this regular expression (JavaScript syntax; colour codes left out)')
    .option('--tail <n>', 'only the last n lines', count('--tail'))
    .option('-f, --follow', 'keep printing new lines as they are stored: until the run is final; for a group, new runs included, until every run is final and 10 s passed without news (or Ctrl-C)')
    .option('--json', 'one JSON object per line: {t, stream, rank, writer, line} (and run, for a group)')
    .action(async (target: string, o: LogsOptions) => {
      const src = await openSource().catch((e: Error) => fail(e.message));
      if (!src.console) fail(`${src.where} does not keep console output`);
      let re: RegExp | null = null;
      if (o.grep !== undefined) {
        try {
          re = new RegExp(o.grep);
        } catch (e) {
          fail(`--grep: ${(e as Error).message}`);
        }
      }
      // A run id, else a group name.
      let runs: RunInfo[];
      let group = false;
      try {
        runs = [await src.getRun(target)];
      } catch (e) {
        if (!(e instanceof RunNotFound)) fail((e as Error).message);
        runs = (await src.listRuns({ group: target, limit: 10_000 }).catch((err: Error) => fail(err.message))).runs;
        if (runs.length === 0) fail(`no run with id ${JSON.stringify(target)} and no group of that name in ${src.where}; list runs with \`logd runs\``);
        group = true;
      }
      const readers = runs.map((r) => new RunReader(r.id, (id, after) => src.console!(id, after)));
      const rankOf = new Map(runs.map((r) => [r.id, runRank(r)]));
      /** A continued run's attempts: each line is marked with the one that printed it (by time). */
      const attemptsBy = new Map<string, AttemptInfo[]>(runs.map((r) => [r.id, attemptsOf(r)]));
      const wanted = (l: LogLine) => (o.rank === undefined || l.rank === o.rank) && (o.stream === undefined || l.stream === o.stream)
        && (re === null || re.test(l.line.replace(CSI, '')));
      /** The writers seen, per attempt (a continued run's attempts are each another writer). */
      const writers = new Map<number, Set<number>>();
      /** Every reader's new lines, merged by time (a stable sort: one run's lines keep their order). */
      const readAll = async (): Promise<LogLine[]> => {
        const lines: LogLine[] = [];
        for (const rd of readers) {
          const pieces = await rd.more().catch((e: Error) => fail(e.message));
          const attempts = attemptsBy.get(rd.id) ?? [];
          for (const p of pieces) {
            const a = attemptAt(attempts, p.t);
            const seen = writers.get(a ?? 0) ?? new Set<number>();
            writers.set(a ?? 0, seen.add(p.w));
            for (const l of linesOf([p])) {
              if (a !== null) l.attempt = a;
              if (group) {
                l.run = rd.id;
                if (l.rank === null) l.rank = rankOf.get(rd.id) ?? null;
              }
              if (wanted(l)) lines.push(l);
            }
          }
        }
        if (readers.length > 1) lines.sort((a, b) => a.t - b.t);
        return lines;
      };
      // Several processes wrote (in one attempt): each line says which.
      const prefix = () => group || [...writers.values()].some((s) => s.size > 1);
      // One run's output opens each attempt's part with a heading (a group's lines say their attempt in the prefix).
      let shownAttempt: number | undefined;
      const render = (ls: LogLine[]): string[] => {
        const out: string[] = [];
        const who = prefix();
        for (const l of ls) {
          if (!o.json && !group && l.attempt !== undefined && l.attempt !== shownAttempt) {
            shownAttempt = l.attempt;
            out.push(attemptHeading(attemptsBy.get(runs[0].id) ?? [], l.attempt) + '\n');
          }
          out.push(format(l, o.json, who));
        }
        return out;
      };
      let lines = await readAll();
      if (o.tail !== undefined) lines = o.tail === 0 ? [] : lines.slice(-o.tail);
      write(render(lines));
      if (!o.follow && lines.length === 0 && !o.json) {
        // Nothing on stdout (a script sees an empty log); a person is told why, on stderr.
        const what = group ? `group ${target}` : `run ${runs[0].id}`;
        process.stderr.write(writers.size > 0
          ? `logd: no line of ${what} matches (${[o.rank !== undefined && 'rank', o.stream && 'stream', re && 'grep'].filter(Boolean).join(', ') || 'tail 0'})\n`
          : `logd: ${what} has no console output: it printed nothing, or its output was not captured (Python captures by default; TypeScript with init({ console: true }) or LOGD_CONSOLE=1; logd launch turns it on for every rank)\n`);
      }
      if (!o.follow) {
        await src.close();
        return;
      }
      let stop = false;
      process.once('SIGINT', () => (stop = true));
      // A run: until it is final and nothing came after. A group: runs that join it are picked up, and it ends
      // once every run is final and nothing new (no line, no run) came for GROUP_QUIET_MS.
      let quietSince = Date.now();
      for (let finalSeen = 0; !stop;) {
        await new Promise((r) => setTimeout(r, FOLLOW_MS));
        if (group) {
          const now = (await src.listRuns({ group: target, limit: 10_000 }).catch(() => ({ runs: [] as RunInfo[] }))).runs;
          for (const r of now) {
            attemptsBy.set(r.id, attemptsOf(r)); // a run continued while followed
            if (rankOf.has(r.id)) continue;
            runs.push(r);
            rankOf.set(r.id, runRank(r));
            readers.push(new RunReader(r.id, (id, after) => src.console!(id, after)));
            quietSince = Date.now();
          }
        } else {
          const now = await src.getRun(runs[0].id).catch(() => null);
          if (now) attemptsBy.set(now.id, attemptsOf(now)); // continued while followed
        }
        const fresh = await readAll();
        write(render(fresh));
        if (fresh.length > 0) {
          quietSince = Date.now();
          continue;
        }
        const states = await Promise.all(runs.map((r) => src.getRun(r.id).then((x) => x.state, () => 'gone')));
        finalSeen = states.every((st) => st !== 'running' && st !== 'finishing') ? finalSeen + 1 : 0;
        if (finalSeen >= 2 && (!group || Date.now() - quietSince >= GROUP_QUIET_MS)) break;
      }
      await src.close();
    });
}

function write(chunks: string[]): void {
  for (let i = 0; i < chunks.length; i += 4096) process.stdout.write(chunks.slice(i, i + 4096).join(''));
}

/** A run's RANK from its metadata (group output of a writer that had none). */

/** A line for people (prefixed with its rank when the run had several processes), or as JSON. */
function format(l: LogLine, json: boolean | undefined, prefix: boolean): string {
  if (json) return JSON.stringify(l) + '\n';
  const who = `[${l.rank !== null ? `rank ${l.rank}` : `writer ${l.writer}`}${l.run !== undefined && l.attempt !== undefined ? `, attempt ${l.attempt}` : ''}] `;
  return `${prefix ? who : ''}${process.stdout.isTTY ? forTerminal(l.line) : l.line}\n`;
}

// Colours (SGR) pass; any other control character is shown, not obeyed.
// eslint-disable-next-line no-control-regex
const CONTROL = /\x1b\[[0-9;]*m|[\x00-\x08\x0b-\x1f\x7f]/g;

/**
 * A stored line as a terminal should see it: what a progress bar's carriage
 * returns left last (the text after the last `\r`), colours kept, and every
 * other control character (an escape that would set the title, write the
 * clipboard or move the cursor) shown as `^X` instead of obeyed.
 */
export function forTerminal(line: string): string {
  const text = line.endsWith('\r') ? line.slice(0, -1) : line;
  const cr = text.lastIndexOf('\r');
  return (cr >= 0 ? text.slice(cr + 1) : text).replace(CONTROL, (m) => (m.length > 1 ? m : `^${String.fromCharCode((m.charCodeAt(0) + 64) & 0x7f)}`));
}
