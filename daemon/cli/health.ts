// `logd health [GROUP|RUN]`: each rank's progress and the health events of
// a group (daemon/health/ judges them; they travel in each run's
// metadata.health, so the local store and the shared one read the same; the
// dashboard's merge, daemon/ui/health.ts, makes one view of a group).
import { runRank } from '../../src/run-rank.js';
import type { Command } from 'commander';
import { openSource, RunNotFound, type QuerySource, type RunInfo } from '../query/index.js';
import { urlOption, urlFileOption, urlOrExit, type UrlOptions } from './store-url.js';
import { rankLabel, type StepRatePoint } from '../../src/health.js';
import { mergeGroupHealth, type GroupHealth as MergedHealth } from '../ui/health.js';
import type { JobStory } from '../../src/story/story.js';
import { splitJobs, pickJob } from '../../src/story/jobs.js';

export interface GroupHealth extends MergedHealth {
  project: string;
  group: string;
}


/** The health of the groups `target` names (a run id, or a group), or of every open group when none. */
export async function groupsHealth(src: QuerySource, target: string | undefined, job?: string): Promise<GroupHealth[]> {
  let runs: RunInfo[];
  if (!target) {
    const open = (await src.listRuns({ state: 'running', limit: 1000 })).runs.filter((r) => r.group || runRank(r) !== null);
    const keys = new Set(open.map((r) => `${r.project}\u0000${r.group}`));
    runs = [];
    for (const k of keys) {
      const [project, group] = k.split('\u0000');
      runs.push(...(group ? (await src.listRuns({ project, group, limit: 1000 })).runs : open.filter((r) => r.project === project && !r.group)));
    }
  } else {
    let one: RunInfo | null = null;
    try {
      one = await src.getRun(target);
    } catch (e) {
      if (!(e instanceof RunNotFound)) throw e;
    }
    if (one) runs = one.group ? (await src.listRuns({ project: one.project, group: one.group, limit: 1000 })).runs : [one];
    else {
      runs = (await src.listRuns({ group: target, limit: 1000 })).runs.filter((r) => r.group === target);
      if (runs.length === 0) throw new Error(`no run and no group named ${JSON.stringify(target.slice(0, 80))} in ${src.where}; list them with \`logd runs\``);
    }
  }
  const byGroup = new Map<string, RunInfo[]>();
  for (const r of runs) {
    const k = r.group ? `${r.project}\u0000${r.group}` : `${r.project}\u0000\u0000${r.id}`;
    (byGroup.get(k) ?? byGroup.set(k, []).get(k)!).push(r);
  }
  return [...byGroup.values()].map((members) => {
    if (!members[0].group) return { project: members[0].project, group: '', ...mergeGroupHealth(members) };
    // One launch of the group (src/story/jobs.ts): the one holding the run named, else --job, else the latest.
    const jobs = splitJobs(members);
    const holding = !job && target ? jobs.find((j) => j.runs.some((r) => r.id === target)) : undefined;
    const picked = holding ?? pickJob(jobs, job);
    const info = { n: picked.n, of: jobs.length, jobs: jobs.map((j) => ({ n: j.n, startedAt: j.startedAt, endedAt: j.endedAt, runs: j.runs.length })) };
    return { project: members[0].project, group: members[0].group, ...mergeGroupHealth(picked.runs), job: info };
  });
}

function ago(at: number): string {
  if (!at) return '-';
  const s = Date.now() / 1000 - at;
  return s < 1 ? 'now' : s < 120 ? `${s.toFixed(1)} s ago` : `${Math.round(s / 60)} min ago`;
}

function clock(at: number): string {
  return new Date(at * 1000).toISOString().slice(11, 19);
}

function table(rows: string[][]): string {
  const w = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  return rows.map((r) => r.map((c, i) => c.padEnd(w[i])).join('  ').trimEnd()).join('\n');
}

/** Points of a rank's step rate drawn in the text table: 2 min at one sample per 5 s. */
const SPARK_POINTS = 24;
const BARS = '▁▂▃▄▅▆▇█';

/**
 * A rank's recent step rate as one character per sample, scaled to `max`
 * (the group's highest, so a slower rank reads lower); `·` is no step at all.
 */
export function sparkline(rate: readonly StepRatePoint[], max: number): string {
  return rate.slice(-SPARK_POINTS).map((p) => (p.stepsPerS <= 0 || max <= 0 ? '·' : BARS[Math.min(BARS.length - 1, Math.floor((p.stepsPerS / max) * BARS.length))])).join('');
}

/** The job's story: its line, then each rank that did not finish, in the order they ended. */
export function storyText(s: JobStory): string {
  const lines = [`  ${s.line}`];
  const rows = [['', 'rank', 'run', 'host', 'pid', 'ended', 'step', 'cause', 'how']];
  for (const f of [...s.first, ...s.after]) {
    const role = s.first.includes(f) ? (s.unordered ? 'first?' : 'FIRST') : f.consequence ? 'after' : 'also';
    rows.push([role, f.rank === null ? '-' : String(f.rank), f.runId, f.host || '-', String(f.pid || '-'), `${clockMs(f.at)}${f.atWithinS >= 0.05 ? ` (±${f.atWithinS.toFixed(2)} s)` : ''}`,
      f.lastStep < 0 ? '-' : String(f.lastStep), f.consequence && f.cause !== 'terminated' ? 'consequence' : f.cause, f.how]);
  }
  lines.push(table(rows).split('\n').map((l) => `  ${l}`).join('\n'));
  const evidence = [...s.first, ...s.after].filter((f) => f.evidence.length);
  for (const f of evidence.slice(0, 8)) lines.push(`  evidence, ${f.rank === null ? `run ${f.runId}` : `rank ${f.rank}`}: ${f.evidence.slice(0, 4).join(' | ')}`);
  return lines.join('\n');
}

function clockMs(at: number): string {
  return Number.isFinite(at) && at > 0 ? new Date(at * 1000).toISOString().slice(11, 23) : '-';
}

export function healthText(g: GroupHealth, withStacks: boolean): string {
  const lines: string[] = [];
  const jobNote = g.job && g.job.of > 1 ? (g.job.n === 0 ? `, all ${g.job.of} jobs` : `, job ${g.job.n} of ${g.job.of}${g.job.n === g.job.of ? ' (the latest; --job N for an earlier one)' : ''}`) : '';
  const title = g.group ? `group ${g.group} (project ${g.project}${jobNote})` : `run ${g.ranks[0]?.runId} (project ${g.project})`;
  const s = g.story;
  const verdict = s?.verdict === 'failed' ? 'FAILED' : s?.verdict === 'stopped' ? 'stopped' : g.stalled ? 'STALLED' : g.ranks.some((r) => r.state === 'straggler') ? 'a straggler'
    : g.ranks.some((r) => r.runState === 'crashed' || r.runState === 'killed') ? 'ended (a rank did not finish)' : 'healthy';
  lines.push(`${title}: ${verdict}`);
  if (s) lines.push(storyText(s));
  const max = Math.max(0, ...g.ranks.flatMap((r) => r.rate.slice(-SPARK_POINTS).map((p) => p.stepsPerS)));
  const rows = [['rank', 'run', 'host', 'state', 'step', 'steps/s', 'last step', 'lag', 'cpu/step', `steps/s over time (5 s each, max ${max.toFixed(2)})`]];
  for (const r of g.ranks) {
    rows.push([r.rank === null ? '-' : String(r.rank), r.runId, r.host || '-', r.state, r.step < 0 ? '-' : String(r.step),
      r.stepsPerS === null ? '-' : r.stepsPerS.toFixed(2), ago(r.stepAt), String(r.lag), r.cpuPerStepS === null ? '-' : `${r.cpuPerStepS.toFixed(3)} s`,
      r.rate.length ? sparkline(r.rate, max) : '-']);
  }
  lines.push(table(rows));
  if (g.events.length === 0 && !s) lines.push('no health events');
  else if (g.events.length) lines.push('events (oldest first):');
  for (const e of g.events) {
    const who = e.ranks.map((r, i) => rankLabel(r, e.runIds[i])).join(', ');
    lines.push(`  ${clock(e.at)}  ${e.kind}: ${who}`);
    if (e.cause) lines.push(`    likely cause: ${e.cause.ranks.map((r, i) => rankLabel(r, e.cause!.runIds[i])).join(', ')}: ${e.cause.why}`);
    lines.push(`    evidence: ${e.evidence}`);
    for (const s of e.stacks ?? []) {
      lines.push(`    stack of ${rankLabel(s.rank, s.runId)} (pid ${s.pid}, ${s.inCollective ? 'in a collective' : 'OUTSIDE a collective'}${s.cpuPercent === null ? '' : `, ${Math.round(s.cpuPercent)} % CPU`}): ${s.top}`);
      if (withStacks) for (const l of s.text.split('\n')) lines.push(`      ${l}`);
    }
  }
  return lines.join('\n');
}

export function registerHealthCommand(program: Command, fail: (msg: string, code?: number) => never): void {
  program
    .command('health')
    .description('which rank stalls or lags a job: each rank\'s progress and the health events of a group (or of every open group)')
    .argument('[target]', 'a group name or a run id (default: every group with an open run)')
    .addOption(urlOption('store', 'read the shared PostgreSQL store (every node of the job) instead of the local one'))
    .addOption(urlFileOption('store'))
    .option('--watch', 'print again every 2 s until interrupted (with --json: one JSON line each time)')
    .option('--stacks', 'print the whole stacks taken at a stall, not only their innermost frame')
    .option('--job <n>', 'which launch of the group: 1 (the oldest) to N, latest (the default) or all')
    .option('--json', 'machine-readable output: an array of groups')
    .action(async (target: string | undefined, o: { watch?: boolean; stacks?: boolean; json?: boolean; job?: string } & UrlOptions) => {
      const store = urlOrExit('store', o);
      const src = await openSource({ store }).catch((e: Error) => fail(e.message));
      const once = async () => {
        const groups = await groupsHealth(src, target, o.job).catch((e: Error) => fail(e.message));
        if (o.json) console.log(o.watch ? JSON.stringify(groups) : JSON.stringify(groups, null, 2));
        else if (groups.length === 0) console.log(`no open run of a group or a rank in ${src.where}; name a group or a run to see a finished one`);
        else console.log(groups.map((g) => healthText(g, !!o.stacks)).join('\n\n'));
      };
      await once();
      if (!o.watch) {
        await src.close();
        return;
      }
      for (;;) {
        await new Promise((r) => setTimeout(r, 2000));
        if (!o.json) console.log(`\n--- ${new Date().toISOString()}`);
        await once();
      }
    });
}
