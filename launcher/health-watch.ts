// While a job runs, `logd launch` watches its group's rank health (judged by
// the node's daemon, daemon/health/) and prints one line per new event:
//   launch: health: job stalled: ranks 0, 1, 2, 3; likely cause: rank 2 (…)
// It asks the daemon every 2 s with a deadline per call; a daemon that does
// not answer only skips a round.
import { connectionFor } from '../client/connection.js';
import { parseServiceAddress, type RunInfo } from '../src/wire.js';
import { rankLabel, type HealthEvent, type RunHealth } from '../src/health.js';

const EVERY_MS = 2000;
const CALL_MS = 5000;

export function eventLine(e: HealthEvent): string {
  const who = e.ranks.map((r, i) => rankLabel(r, e.runIds[i])).join(', ');
  const cause = e.cause ? `; likely cause: ${e.cause.ranks.map((r, i) => rankLabel(r, e.cause!.runIds[i])).join(', ')} (${e.cause.why})` : '';
  return `launch: health: ${e.kind}: ${who}${cause}`;
}

/** Starts watching `group` through the daemon at `service` (a LOGD_SERVICE value); the stop function asks a last time. */
export function watchHealth(service: string, group: string, print: (line: string) => void): () => Promise<void> {
  let conn: ReturnType<typeof connectionFor>;
  try {
    conn = connectionFor(parseServiceAddress(service));
  } catch {
    return async () => {};
  }
  const seen = new Set<string>();
  let busy = false;
  const round = async () => {
    if (busy) return;
    busy = true;
    try {
      const page = await conn.unary<unknown, { runs: RunInfo[] }>('listRuns', { project: '', group, state: '', tag: '', text: '', limit: 1000, offset: 0 }, CALL_MS);
      const fresh: HealthEvent[] = [];
      for (const r of page.runs) {
        if (r.group !== group) continue;
        let h: RunHealth | undefined;
        try {
          h = (JSON.parse(r.metadataJson || '{}') as { health?: RunHealth }).health;
        } catch {
          continue;
        }
        for (const e of h?.events ?? []) {
          const key = `${e.at}|${e.kind}|${e.runIds.join(',')}`;
          if (seen.has(key)) continue;
          seen.add(key);
          fresh.push(e);
        }
      }
      for (const e of fresh.sort((a, b) => a.at - b.at)) print(eventLine(e));
    } catch {
      /* the daemon is busy or gone: the next round asks again */
    } finally {
      busy = false;
    }
  };
  const timer = setInterval(() => void round(), EVERY_MS);
  timer.unref();
  return async () => {
    clearInterval(timer);
    while (busy) await new Promise((r) => setTimeout(r, 50));
    await round(); // what happened since the last round, the end of the job included
  };
}

/** Tells the daemon how a rank's process ended (ReportExit): the launcher collected its exit status, the daemon cannot. */
export function reportExit(service: string | undefined, pid: number | undefined, code: number | null, signal: NodeJS.Signals | null): void {
  if (!service || !pid) return;
  try {
    const conn = connectionFor(parseServiceAddress(service));
    void conn.unary('reportExit', { pid, exitCode: code ?? -1, signal: signal ?? '', endedAt: Date.now() / 1000 }, CALL_MS).catch(() => {});
  } catch {
    /* no daemon to tell: its liveness check still ends the run */
  }
}

/**
 * After the job: the runs the ranks (these pids) made, once they are all final (up to `waitMs`), and the groups
 * they used (a script may pass group= and not use the launcher's). Null when the daemon cannot be asked.
 */
export async function jobRuns(service: string | undefined, pids: number[], since: number, waitMs: number): Promise<RunInfo[] | null> {
  if (!service || pids.length === 0) return null;
  let conn: ReturnType<typeof connectionFor>;
  try {
    conn = connectionFor(parseServiceAddress(service));
  } catch {
    return null;
  }
  const deadline = Date.now() + waitMs;
  const mine = new Set(pids);
  for (;;) {
    let runs: RunInfo[];
    try {
      const page = await conn.unary<unknown, { runs: RunInfo[] }>('listRuns', { project: '', group: '', state: '', tag: '', text: '', limit: 1000, offset: 0 }, CALL_MS);
      runs = page.runs.filter((r) => r.createdAt >= since - 1 && mine.has(pidOf(r)));
    } catch {
      return null;
    }
    if (runs.every((r) => r.state !== 'running' && r.state !== 'finishing') || Date.now() >= deadline) return runs;
    await new Promise((r) => setTimeout(r, 200));
  }
}

function pidOf(r: RunInfo): number {
  try {
    return (JSON.parse(r.metadataJson || '{}') as { pid?: number }).pid ?? -1;
  } catch {
    return -1;
  }
}
