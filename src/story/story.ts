// A failed job's story: which rank ended first, how, and what the others did
// after. Pure: it reads the ranks' end records (src/story/end.ts) and final
// states, so the daemon, `logd health`, the dashboard and `logd launch` tell
// the same story from the local store or the shared one. docs/story.md.
import { describeEnd, endOf, firstLine, type RunEnd } from './end.js';
import type { RunInfo } from '../wire.js';

/** One rank of a job as the story needs it (a run's listing, read from either store). */
export interface StoryRank {
  runId: string;
  rank: number | null;
  host: string;
  pid: number;
  state: string;
  stateReason: string;
  exitCode: number;
  /** When the run was finalised (seconds since the epoch; 0 while open). */
  finishedAt: number;
  end: RunEnd | null;
  /** Metric names whose last value was NaN or ±Infinity. */
  nonFinite: string[];
}

export type FailureCause = 'killed' | 'oom' | 'segfault' | 'abort' | 'nan' | 'exception' | 'collective' | 'exit' | 'terminated' | 'unknown';

/** One rank's fate in the story. */
export interface RankFate {
  runId: string;
  rank: number | null;
  host: string;
  pid: number;
  /** When its process ended (seconds since the epoch) and how late that may be. */
  at: number;
  atWithinS: number;
  cause: FailureCause;
  /** Its failure follows from another rank's (a peer's connection closed, the launcher stopping the job). */
  consequence: boolean;
  /** How it ended, in plain English ("was killed by SIGKILL"). */
  how: string;
  lastStep: number;
  /** What the judgement rests on: the exit status, the exception, console lines. */
  evidence: string[];
}

export interface JobStory {
  /** `failed`: a rank failed on its own; `stopped`: every rank was stopped from outside (SIGTERM/SIGINT) together. */
  verdict: 'failed' | 'stopped';
  /** The rank(s) that failed first; two or more when their ends are too close to order. */
  first: RankFate[];
  /** Every other rank that did not finish, in the order they ended. */
  after: RankFate[];
  /** The first ranks' ends are too close to order (within the precision of the record). */
  unordered: boolean;
  /** When the first failure happened (seconds since the epoch). */
  at: number;
  /** The story in one line. */
  line: string;
}

/**
 * Errors that say a rank failed because a peer did: the collective's transport lost its peer (gloo, NCCL, the TCP
 * store), a watchdog timed out waiting, the launcher reported a child's failure.
 */
const CONSEQUENCE_PATTERNS: RegExp[] = [
  /connection closed by peer/i, /connection reset by peer/i, /broken pipe/i, /connection refused/i,
  /nccl.*(watchdog|timed? ?out|remote process exited|unhandled system error|remote error)/i, /watchdog caught collective operation timeout/i,
  /ChildFailedError/, /DistNetworkError|DistBackendError|DistStoreError/, /gloo.*(timed? ?out|closed|reset|EOF|Socket)/i,
  /socket timeout/i, /timed out waiting for/i, /recvBytes|Read error|Connection closed/i, /process group.*(abort|timeout)/i,
];

const TERMINATING = new Set(['SIGTERM', 'SIGINT', 'SIGHUP']);

function consequenceText(f: RankFate): string {
  for (const e of f.evidence) for (const p of CONSEQUENCE_PATTERNS) {
    const m = e.match(p);
    if (m) return m[0].toLowerCase();
  }
  return f.cause === 'terminated' ? 'stopped with the job' : 'a peer failed';
}

function matchesConsequence(text: string): boolean {
  return CONSEQUENCE_PATTERNS.some((p) => p.test(text));
}

/** The last "SomeError: message" line of a Python traceback among console lines, if any. */
export function tracebackError(lines: readonly string[]): { type: string; message: string } | null {
  let seen = false;
  for (let i = 0; i < lines.length; i++) if (lines[i].startsWith('Traceback (most recent call last)')) seen = true;
  if (!seen) return null;
  for (let i = lines.length - 1; i >= 0; i--) {
    const m = /^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Failure|Warning)|[A-Za-z_][\w.]*\.[A-Z]\w*):\s?(.*)$/.exec(lines[i].trim());
    if (m) return { type: m[1], message: m[2] };
  }
  return null;
}

function fateOf(r: StoryRank): RankFate {
  const e = r.end;
  const evidence: string[] = [];
  let cause: FailureCause = 'unknown';
  const exception = e?.exception ?? (e ? tracebackError(e.lastLines) : null);
  if (e?.signal) evidence.push(`${e.signal}${e.coreDumped ? ' (core dumped)' : ''} (${e.source === 'wait-status' ? "the exit status the kernel kept" : e.source})`);
  if (e?.oom) evidence.push(`OOM kill seen in ${e.oom}`);
  if (exception) evidence.push(`${exception.type}: ${firstLine(exception.message, 300)}`);
  if (e && e.exitCode !== null && e.exitCode !== 0) evidence.push(`exit code ${e.exitCode}`);
  if (r.nonFinite.length) evidence.push(`non-finite last values: ${r.nonFinite.slice(0, 5).join(', ')}`);
  if (!e && r.stateReason) evidence.push(r.stateReason);
  const lines = e?.lastLines ?? [];
  const tail = exception || e?.signal ? [] : lines.slice(-3).map((l) => `console: ${l}`);
  const text = [exception ? `${exception.type}: ${exception.message}` : '', ...lines.slice(-8), r.stateReason].join('\n');
  let consequence = false;
  if (e?.oom || (exception && /OutOfMemoryError|out of memory/i.test(`${exception.type} ${exception.message}`)) || /CUDA out of memory/.test(text)) cause = 'oom';
  else if (e?.signal === 'SIGKILL') cause = 'killed';
  else if (e?.signal && TERMINATING.has(e.signal)) cause = 'terminated';
  else if (e?.signal === 'SIGABRT') cause = matchesConsequence(text) ? 'collective' : 'abort';
  else if (e?.signal) cause = 'segfault';
  else if (exception && matchesConsequence(`${exception.type}: ${exception.message}`)) cause = 'collective';
  else if (r.nonFinite.length || (exception && /\bnan\b|\binf\b|non-finite|not finite/i.test(exception.message))) cause = 'nan';
  else if (exception) cause = 'exception';
  else if (e && e.exitCode !== null && e.exitCode >= 128 + 1 && e.exitCode <= 128 + 31 && e.source === 'signal-handler') cause = 'terminated';
  else if (e && e.exitCode !== null && e.exitCode !== 0) cause = matchesConsequence(text) ? 'collective' : 'exit';
  else if (!e && matchesConsequence(r.stateReason)) cause = 'collective';
  if (cause === 'collective') consequence = true;
  evidence.push(...tail);
  const how = e ? describeEnd(e) : r.stateReason ? `${r.state} (${r.stateReason})` : r.state;
  return {
    runId: r.runId, rank: r.rank, host: r.host || e?.host || '', pid: e?.pid ?? r.pid, at: e?.at ?? r.finishedAt, atWithinS: e?.atWithinS ?? 1,
    cause, consequence, how: cause === 'nan' && !exception ? `${how}; its last values were non-finite (${r.nonFinite.slice(0, 3).join(', ')})` : how,
    lastStep: e?.lastStep ?? -1, evidence,
  };
}

function who(f: RankFate): string {
  return f.rank === null ? `run ${f.runId}` : `rank ${f.rank}`;
}

function rankList(fs: RankFate[]): string {
  const named = fs.map((f) => (f.rank === null ? `run ${f.runId}` : String(f.rank)));
  const ranks = fs.every((f) => f.rank !== null);
  return `${ranks ? (fs.length === 1 ? 'rank ' : 'ranks ') : ''}${named.join(', ')}`;
}

function clock(at: number): string {
  return Number.isFinite(at) && at > 0 ? new Date(at * 1000).toISOString().slice(11, 19) : 'at an unknown time';
}

function secs(d: number): string {
  return d < 0.05 ? 'right after' : `${d < 10 ? d.toFixed(1) : Math.round(d)} s after`;
}

/** The fates' rough times: consequences only count after the ranks they follow. */
function byTime(a: RankFate, b: RankFate): number {
  return a.at - b.at || (a.rank ?? 1e9) - (b.rank ?? 1e9);
}

/**
 * The story of one job (the ranks of one launch), or null when it did not fail: every rank finished with exit
 * code 0, or some are still running and none failed. Ranks still running are left out of it.
 */
export function tellStory(ranks: readonly StoryRank[]): JobStory | null {
  const failed = ranks.filter((r) => r.state === 'crashed' || (r.state === 'killed' && r.end !== null && r.end.source !== 'daemon'));
  if (failed.length === 0) return null;
  const fates = failed.map(fateOf).sort(byTime);
  const terminatedAll = fates.every((f) => f.cause === 'terminated');
  if (terminatedAll) {
    const byRank = [...fates].sort((a, b) => (a.rank ?? 1e9) - (b.rank ?? 1e9));
    const line = `stopped: ${rankList(byRank)} ${fates.length === 1 ? 'was' : 'were'} stopped by ${[...new Set(fates.map((f) => f.how.replace(/^was killed by /, '')))].join(', ')} at ${clock(fates[0].at)}; no rank failed on its own`;
    return { verdict: 'stopped', first: [], after: fates, unordered: false, at: fates[0].at, line };
  }
  // The first failure is the earliest that does not follow from a peer's. A signal that stops a rank (SIGTERM,
  // SIGINT, SIGHUP) counts as one when it came first; after another failure it is the launcher stopping the job.
  const independent = fates.filter((f) => !f.consequence);
  let first: RankFate[];
  let unordered = false;
  if (independent.length === 0) {
    // Every failure follows a peer's: the rank that caused it is not among those seen (another node, or it left no record).
    first = [];
  } else {
    // A rank stopped by a signal is first only when it ended clearly before every other failure: a launcher stops
    // the others within milliseconds of the first failure, and their ends are not to be ordered against it.
    const window = (a: RankFate, b: RankFate) => Math.max(a.atWithinS, b.atWithinS, 0.002);
    const primary = independent.filter((f) => f.cause !== 'terminated');
    const p0 = primary[0];
    const stoppedBefore = p0 ? independent.filter((f) => f.cause === 'terminated' && f.at < p0.at - Math.max(window(f, p0), 0.05)) : [];
    const pool = !p0 || stoppedBefore.length ? independent : primary;
    const f0 = pool[0];
    first = pool.filter((f) => f === f0 || f.at - f0.at <= window(f, f0));
    if (first.length > 1) first.sort((a, b) => (a.rank ?? 1e9) - (b.rank ?? 1e9));
    unordered = first.length > 1;
  }
  const after = fates.filter((f) => !first.includes(f));
  for (const f of after) if (first.length && !f.consequence && f.cause === 'terminated') f.consequence = true;
  const at = first.length ? Math.min(...first.map((f) => f.at)) : fates[0].at;
  let line: string;
  if (first.length === 0) {
    line = `failed: ${rankList(fates)} failed because a peer did (${[...new Set(fates.map(consequenceText))].join('; ')}); the rank that failed first is not among the ranks seen here`;
  } else {
    const heads = first.map((f) => `${who(f)} (pid ${f.pid}${f.host ? `, ${f.host}` : ''}) ${f.how}${f.lastStep >= 0 ? ` at step ${f.lastStep}` : ''}`);
    line = unordered
      ? `failed: ${heads.join(' and ')}, ${clock(at)}, too close together to say which was first`
      : `failed: ${heads[0]}, ${clock(at)}`;
    const cons = after.filter((f) => f.consequence).sort((a, b) => (a.rank ?? 1e9) - (b.rank ?? 1e9));
    const indep = after.filter((f) => !f.consequence);
    if (cons.length) {
      const last = Math.max(...cons.map((f) => f.at));
      const d = Math.max(0, last - at);
      const when = secs(d);
      line += `; ${rankList(cons)} failed ${cons.length > 1 && when !== 'right after' ? 'within ' : ''}${when} ${first.length > 1 ? 'them' : 'it'} (${[...new Set(cons.map(consequenceText))].join('; ')})`;
    }
    if (indep.length) line += `; then ${indep.map((f) => `${who(f)} ${f.how}`).join('; ')}`;
  }
  return { verdict: 'failed', first, after, unordered, at, line };
}

/** The names of a summary's metrics whose value is NaN or ±Infinity (as JSON keeps them: the strings). */
export function nonFiniteKeys(summaryJson: string): string[] {
  try {
    const s = JSON.parse(summaryJson || '{}') as Record<string, unknown>;
    return Object.keys(s).filter((k) => !k.startsWith('_') && (s[k] === 'NaN' || s[k] === 'Infinity' || s[k] === '-Infinity'));
  } catch {
    return [];
  }
}

/** A run listing as the story reads it. */
export function storyRank(r: RunInfo): StoryRank {
  let m: { rank?: { rank?: number } | null; host?: string; node?: string; pid?: number } = {};
  try {
    m = JSON.parse(r.metadataJson || '{}') as typeof m;
  } catch {
    /* a listing without metadata: rank and host unknown */
  }
  const end = endOf(r.metadataJson);
  return {
    runId: r.id, rank: typeof m.rank?.rank === 'number' && m.rank.rank >= 0 ? m.rank.rank : end?.rank ?? null, host: m.node || m.host || end?.host || '',
    pid: m.pid ?? end?.pid ?? 0, state: r.state, stateReason: r.stateReason ?? '', exitCode: r.exitCode, finishedAt: Number(r.finishedAt) || 0, end,
    nonFinite: r.state === 'crashed' ? nonFiniteKeys(r.summaryJson) : [],
  };
}

/** The story of a group's runs (one job), or null when it did not fail. */
export function storyOfRuns(runs: readonly RunInfo[]): JobStory | null {
  return tellStory(runs.map(storyRank));
}
