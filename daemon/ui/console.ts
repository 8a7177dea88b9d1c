// The Logs tab's answers: a run's console output (or a group's, merged by
// time) as lines, filtered by rank, stream and a search, from a cursor on so
// that a live page asks only for what is new.
//
// The source pages console output by file offset and says `next: 0` on its
// last page, which gives no offset for what comes after. So a cursor is the
// offset a page started at and how many of its pieces were already taken
// (`OFFSET:SKIP`): asked again, that page starts at the same frame and holds
// the same pieces first (the log only grows), then anything new.
//
// A continued run's lines carry the attempt that printed them (by time,
// src/attempts.ts), and the answer lists its attempts, so that the page can
// open each attempt's part with a heading as `logd logs` does.
import { RunNotFound, type QuerySource, type ConsoleLine, type RunInfo } from '../query/index.js';
import { attemptAt, attemptsToMarkJson, type AttemptLike } from '../../src/attempts.js';
import { HttpError, intParam } from './params.js';

/** One printed line: `logd logs --json`'s shape (attempt: a continued run's), plus the run on a group's answer. */
export interface LogLine { t: number; stream: 'out' | 'err'; rank: number | null; writer: number; line: string; run?: string; attempt?: number }

interface Cursor { offset: number; skip: number }

/** A stored piece of output with its lines that pass the filter, and the cursor just past it. */
interface Piece { t: number; lines: LogLine[]; after: Cursor }

interface LineFilter { rank: number | null; stream: 'out' | 'err' | null; match: ((text: string) => boolean) | null }

interface RunRead { pieces: Piece[]; end: Cursor; more: boolean; skipped: number; ranks: Set<number> }

const DEFAULT_LINES = 5000;
const MAX_LINES = 20_000;
const MAX_PATTERN = 500;
/** A group's runs read at once. */
const GROUP_READS = 8;

// SGR and other CSI sequences: searched text is what the page shows, colours left out.
// eslint-disable-next-line no-control-regex
const CSI = /\x1b\[[0-9;?]*[ -/]*[@-~]/g;

/** What a piece of output's text shows, one line each (a piece cut at a bound ends a line too). */
function linesOfText(text: string): string[] {
  const parts = text.split('\n');
  if (parts[parts.length - 1] === '') parts.pop();
  return parts.map((l) => (l.endsWith('\r') ? l.slice(0, -1) : l));
}

export function parseCursor(text: string | null, name = 'after'): Cursor {
  if (text === null || text === '' || text === '0') return { offset: 0, skip: 0 };
  const m = /^(\d{1,15})(?::(\d{1,9}))?$/.exec(text);
  if (!m) throw new HttpError(400, `${name} must be a cursor (the \`next\` of an earlier answer, OFFSET:SKIP), not ${JSON.stringify(text.slice(0, 40))}`);
  return { offset: Number(m[1]), skip: Number(m[2] ?? 0) };
}

const cursorText = (c: Cursor) => `${c.offset}:${c.skip}`;

/** rank, stream, grep (any case) or grep with regex=1 (a JavaScript regular expression, as written). */
export function lineFilter(q: URLSearchParams): LineFilter {
  const rankText = q.get('rank') ?? '';
  const rank = rankText === '' ? null : intParam(q, 'rank', 0, Number.MAX_SAFE_INTEGER);
  const streamText = q.get('stream') ?? '';
  if (streamText !== '' && streamText !== 'out' && streamText !== 'err') throw new HttpError(400, `stream must be out or err, not ${JSON.stringify(streamText.slice(0, 40))}`);
  const grep = q.get('grep') ?? '';
  if (grep.length > MAX_PATTERN) throw new HttpError(400, `grep is at most ${MAX_PATTERN} characters`);
  let match: LineFilter['match'] = null;
  if (grep && q.get('regex') === '1') {
    let re: RegExp;
    try {
      re = new RegExp(grep);
    } catch (e) {
      throw new HttpError(400, `grep is not a valid regular expression: ${(e as Error).message}`);
    }
    match = (s) => re.test(s);
  } else if (grep) {
    const needle = grep.toLowerCase();
    match = (s) => s.toLowerCase().includes(needle);
  }
  return { rank, stream: streamText === '' ? null : streamText, match };
}

/** The source's pieces from a cursor on, each with the cursor just past it; `end` once done. */
async function* piecesFrom(source: QuerySource, id: string, from: Cursor): AsyncGenerator<{ piece: ConsoleLine; after: Cursor }, Cursor> {
  let { offset, skip } = from;
  for (;;) {
    const page = await source.console!(id, offset);
    for (let i = skip; i < page.entries.length; i++) {
      const last = i === page.entries.length - 1;
      yield { piece: page.entries[i], after: last && page.next ? { offset: page.next, skip: 0 } : { offset, skip: i + 1 } };
    }
    if (!page.next) return { offset, skip: Math.max(skip, page.entries.length) };
    offset = page.next;
    skip = 0;
  }
}

/**
 * One run's lines from a cursor: whole pieces until `limit` lines matched
 * (`more`: stopped there), or with `tail` every piece and only the last
 * `tail` lines kept (`skipped`: matching lines before them).
 */
async function readRun(source: QuerySource, run: RunInfo, runRank: number | null, from: Cursor, f: LineFilter, o: { limit: number; tail: number | null; tagRun: boolean; attempts: AttemptLike[] }): Promise<RunRead> {
  const out: RunRead = { pieces: [], end: from, more: false, skipped: 0, ranks: new Set() };
  let kept = 0;
  const it = piecesFrom(source, run.id, from);
  for (;;) {
    const n = await it.next();
    if (n.done) {
      out.end = n.value;
      break;
    }
    const { piece: p, after } = n.value;
    out.end = after;
    const rank = p.rank ?? runRank;
    if (rank !== null) out.ranks.add(rank);
    const lines: LogLine[] = [];
    if ((f.rank === null || rank === f.rank) && (f.stream === null || p.s === f.stream)) {
      const attempt = attemptAt(o.attempts, p.t);
      for (const text of linesOfText(p.l)) {
        if (f.match && !f.match(text.replace(CSI, ''))) continue;
        const l: LogLine = { t: p.t, stream: p.s, rank, writer: p.w, line: text };
        if (o.tagRun) l.run = run.id;
        if (attempt !== null) l.attempt = attempt;
        lines.push(l);
      }
    }
    if (lines.length === 0) continue;
    out.pieces.push({ t: p.t, lines, after });
    kept += lines.length;
    if (o.tail !== null) {
      // A window over the last pieces: the oldest go once the rest hold `tail` lines.
      while (out.pieces.length > 0 && kept - out.pieces[0].lines.length >= o.tail) {
        kept -= out.pieces[0].lines.length;
        out.skipped += out.pieces.shift()!.lines.length;
      }
    } else if (kept >= o.limit) {
      out.more = true;
      await it.return(out.end);
      break;
    }
  }
  if (o.tail !== null && kept > o.tail) {
    const first = out.pieces[0];
    out.skipped += kept - o.tail;
    first.lines = first.lines.slice(kept - o.tail);
  }
  return out;
}

function readOptions(q: URLSearchParams): { limit: number; tail: number | null } {
  const tail = q.get('tail');
  return {
    limit: intParam(q, 'limit', DEFAULT_LINES, MAX_LINES) || DEFAULT_LINES,
    tail: tail === null || tail === '' ? null : intParam(q, 'tail', DEFAULT_LINES, MAX_LINES),
  };
}

const notKept = (source: QuerySource) => `console output is not kept by this store (${source.where}) yet; \`logd logs RUN\` on the node that ran it reads the node's own store`;

function notFound(e: unknown): never {
  if (e instanceof RunNotFound) throw new HttpError(404, e.message);
  throw e;
}

/** GET /api/runs/{id}/console: a run's lines from `after` (or its last `tail`), and the cursor to go on from. */
export async function runConsole(source: QuerySource, run: RunInfo, runRank: number | null, q: URLSearchParams): Promise<unknown> {
  const f = lineFilter(q);
  const from = parseCursor(q.get('after'));
  const o = readOptions(q);
  const attempts = attemptsToMarkJson(run.metadataJson);
  const base = { run: run.id, state: run.state, ...(attempts.length ? { attempts } : {}) };
  if (!source.console) return { ...base, kept: false, why: notKept(source), lines: [], next: cursorText(from), more: false, skipped: 0, ranks: [] };
  const r = await readRun(source, run, runRank, from, f, { ...o, tagRun: false, attempts }).catch(notFound);
  return {
    ...base, kept: true, lines: r.pieces.flatMap((p) => p.lines), next: cursorText(r.end), more: r.more, skipped: r.skipped,
    ranks: [...r.ranks].sort((a, b) => a - b),
  };
}

/** A group's cursor: each run's, `ID=OFFSET:SKIP` joined by commas (run ids hold none of `=,:`). */
function parseGroupCursor(text: string | null): Map<string, Cursor> {
  const out = new Map<string, Cursor>();
  for (const part of (text ?? '').split(',')) {
    if (part === '') continue;
    const i = part.indexOf('=');
    if (i <= 0) throw new HttpError(400, `after must be a group cursor (the \`next\` of an earlier answer), not ${JSON.stringify((text ?? '').slice(0, 40))}`);
    out.set(part.slice(0, i), parseCursor(part.slice(i + 1)));
  }
  return out;
}

/**
 * GET /api/groups/{group}/console: every run's lines merged by time. Where a
 * run stopped at the limit, lines later than its last are left for the next
 * answer (each run's cursor then stands before them), so pages stay in order.
 */
export async function groupConsole(source: QuerySource, group: string, runs: Array<{ info: RunInfo; rank: number | null }>, q: URLSearchParams): Promise<unknown> {
  const f = lineFilter(q);
  const from = parseGroupCursor(q.get('after'));
  const o = readOptions(q);
  const startCursor = () => runs.map((r) => `${r.info.id}=${cursorText(from.get(r.info.id) ?? { offset: 0, skip: 0 })}`).join(',');
  const runStates = Object.fromEntries(runs.map((r) => [r.info.id, r.info.state]));
  const attemptsBy = new Map(runs.map((r) => [r.info.id, attemptsToMarkJson(r.info.metadataJson)]));
  /** The continued runs' attempts, by run: a group's lines say their attempt beside their rank. */
  const continued = Object.fromEntries([...attemptsBy].filter(([, a]) => a.length > 0));
  if (!source.console) return { group, kept: false, why: notKept(source), lines: [], next: startCursor(), more: false, skipped: 0, ranks: [], runs: runStates, attempts: continued };
  // Runs filtered out by rank are not read at all.
  const wanted = runs.filter((r) => f.rank === null || r.rank === null || r.rank === f.rank);
  const reads = new Map<string, RunRead>();
  for (let i = 0; i < wanted.length; i += GROUP_READS) {
    await Promise.all(wanted.slice(i, i + GROUP_READS).map(async (r) => {
      reads.set(r.info.id, await readRun(source, r.info, r.rank, from.get(r.info.id) ?? { offset: 0, skip: 0 }, f, { ...o, tagRun: true, attempts: attemptsBy.get(r.info.id) ?? [] }).catch((e: unknown) => {
        if (e instanceof RunNotFound) return null; // gone since the listing
        throw e;
      }) ?? { pieces: [], end: { offset: 0, skip: 0 }, more: false, skipped: 0, ranks: new Set() });
    }));
  }
  const pieces = (id: string) => reads.get(id)?.pieces ?? [];
  /** How many of each run's pieces go out: a prefix, so that its cursor can stand right after them. */
  const sent = new Map<string, number>();
  let skipped = 0;
  if (o.tail === null) {
    // A run that stopped at the limit may hold unread lines later than its last:
    // nothing later than that goes out now. Nor more than `limit` lines, ties kept.
    let cut = Infinity;
    for (const r of reads.values()) if (r.more && r.pieces.length) cut = Math.min(cut, r.pieces[r.pieces.length - 1].t);
    const times = wanted.flatMap((r) => pieces(r.info.id).filter((p) => p.t <= cut).map((p) => [p.t, p.lines.length] as const)).sort((a, b) => a[0] - b[0]);
    let lines = 0;
    for (const [t, n] of times) {
      if (lines >= o.limit && t > cut) break;
      lines += n;
      if (lines >= o.limit) cut = Math.min(cut, t);
    }
    for (const r of wanted) {
      const ps = pieces(r.info.id);
      const held = ps.findIndex((p) => p.t > cut);
      sent.set(r.info.id, held < 0 ? ps.length : held);
    }
  } else {
    // Each run kept its last `tail` lines; of them all the last `tail` go out.
    const order = wanted.flatMap((r) => pieces(r.info.id).map((p) => ({ id: r.info.id, p }))).sort((a, b) => b.p.t - a.p.t);
    let lines = 0;
    const dropped = new Set<Piece>();
    for (const x of order) {
      if (lines >= o.tail) {
        dropped.add(x.p);
        skipped += x.p.lines.length;
      } else if (lines + x.p.lines.length > o.tail) {
        skipped += lines + x.p.lines.length - o.tail;
        x.p.lines = x.p.lines.slice(lines + x.p.lines.length - o.tail);
      }
      lines += x.p.lines.length;
    }
    for (const [id, r] of reads) {
      skipped += r.skipped;
      r.pieces = r.pieces.filter((p) => !dropped.has(p));
      sent.set(id, r.pieces.length);
    }
  }
  const out = wanted.flatMap((r, ri) => pieces(r.info.id).slice(0, sent.get(r.info.id) ?? 0).map((p, pi) => ({ p, ri, pi })));
  out.sort((a, b) => a.p.t - b.p.t || a.ri - b.ri || a.pi - b.pi);
  // Each run's cursor: past its last piece sent, before the first held back.
  const next = new Map<string, Cursor>();
  for (const r of runs) {
    const id = r.info.id, read = reads.get(id), n = sent.get(id) ?? 0;
    const start = from.get(id) ?? { offset: 0, skip: 0 };
    next.set(id, !read ? start : n === read.pieces.length ? read.end : n === 0 ? start : read.pieces[n - 1].after);
  }
  const ranks = new Set<number>();
  for (const r of runs) if (r.rank !== null) ranks.add(r.rank);
  for (const r of reads.values()) for (const k of r.ranks) ranks.add(k);
  return {
    group, kept: true, lines: out.flatMap((x) => x.p.lines),
    next: [...next].map(([id, c]) => `${id}=${cursorText(c)}`).join(','),
    more: wanted.some((r) => (sent.get(r.info.id) ?? 0) < pieces(r.info.id).length || reads.get(r.info.id)?.more === true),
    skipped, ranks: [...ranks].sort((a, b) => a - b), runs: runStates, attempts: continued,
  };
}
