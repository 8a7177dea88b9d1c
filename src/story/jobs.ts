// The jobs of a group: each launch of a job under the same group name is a
// job of its own (issue 34). A run belongs to the launch that was still going
// when it was created: a run created after every run of the latest job had
// ended, and that repeats a rank (or, for runs of no rank, a name) that job
// already has, starts a new job; runs made one after another with new ranks
// or names (a sweep's trials in one group) stay one job. torchrun's run id (config.torchrun.TORCHELASTIC_RUN_ID,
// `--rdzv-id`, a fresh uuid with `--standalone`) separates jobs that overlap
// in time; its default "none" (a static rendezvous) says nothing, and time
// decides. Pure: the CLI, the dashboard and the story split a group alike.
import type { RunInfo } from '../wire.js';
import { runRank } from '../run-rank.js';

export interface GroupJob {
  /** 1 for the oldest launch of the group. */
  n: number;
  runs: RunInfo[];
  /** When its first run was created, and when its last run ended (0 while one runs). */
  startedAt: number;
  endedAt: number;
}

function torchrunId(r: RunInfo): string {
  try {
    const c = JSON.parse(r.configJson || '{}') as { torchrun?: { TORCHELASTIC_RUN_ID?: unknown } };
    const id = c.torchrun?.TORCHELASTIC_RUN_ID;
    return typeof id === 'string' && id !== '' && id !== 'none' ? id : '';
  } catch {
    return '';
  }
}


const open = (r: RunInfo) => r.state === 'running' || r.state === 'finishing' || !(Number(r.finishedAt) > 0);

/** The group's jobs, oldest first (runs of other groups are not looked at: pass one group's runs). */
export function splitJobs(runs: readonly RunInfo[]): GroupJob[] {
  const sorted = [...runs].sort((a, b) => a.createdAt - b.createdAt || a.id.localeCompare(b.id));
  // Per job the ranks and names (of runs without a rank) it has, and per torchrun id its job: one look each, so
  // that a group of a thousand ranks splits in linear time (a rank's metadata is parsed once).
  type Job = { runs: RunInfo[]; ids: Set<string>; ranks: Set<number>; names: Set<string>; endedAt: number; anyOpen: boolean };
  const jobs: Job[] = [];
  const byId = new Map<string, Job>();
  for (const r of sorted) {
    const id = torchrunId(r);
    const rank = runRank(r);
    let job = id ? byId.get(id) : undefined;
    if (!job) {
      const last = jobs[jobs.length - 1];
      const overlaps = last && (last.anyOpen || r.createdAt <= last.endedAt);
      // Runs made one after another are one job (a sweep's trials, ranks started in turn) unless the run repeats
      // a rank (or, without ranks, a name) the job already has: then the job was launched again.
      const repeats = last && (rank !== null ? last.ranks.has(rank) : last.names.has(r.name));
      const sameLaunch = last && (overlaps || !repeats) && (!id || last.ids.size === 0 || last.ids.has(id));
      job = sameLaunch ? last : undefined;
    }
    if (!job) {
      job = { runs: [], ids: new Set(), ranks: new Set(), names: new Set(), endedAt: 0, anyOpen: false };
      jobs.push(job);
    }
    job.runs.push(r);
    if (id) {
      job.ids.add(id);
      if (!byId.has(id)) byId.set(id, job);
    }
    if (rank !== null) job.ranks.add(rank);
    else job.names.add(r.name);
    if (open(r)) job.anyOpen = true;
    else job.endedAt = Math.max(job.endedAt, Number(r.finishedAt));
  }
  return jobs.map((j, i) => ({ n: i + 1, runs: j.runs, startedAt: j.runs[0].createdAt, endedAt: j.anyOpen ? 0 : j.endedAt }));
}

/**
 * The job `which` names: a number (1 = the oldest), `latest` (the default) or `all` (every run of the group as one).
 * Throws with the choices when there is no such job.
 */
export function pickJob(jobs: GroupJob[], which: string | undefined): GroupJob {
  if (jobs.length === 0) throw new Error('the group has no runs');
  if (!which || which === 'latest') return jobs[jobs.length - 1];
  if (which === 'all') return { n: 0, runs: jobs.flatMap((j) => j.runs), startedAt: jobs[0].startedAt, endedAt: jobs.some((j) => j.endedAt === 0) ? 0 : Math.max(...jobs.map((j) => j.endedAt)) };
  const n = Number(which);
  if (!Number.isInteger(n) || n < 1 || n > jobs.length) throw new Error(`no job ${JSON.stringify(which.slice(0, 40))} in this group: it has ${jobs.length} job(s), 1 (the oldest) to ${jobs.length} (the latest), or all`);
  return jobs[n - 1];
}
