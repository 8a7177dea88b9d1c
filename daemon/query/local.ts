// The local source: this node's store, read through its daemon (started if
// none runs, as every query command does).
import type { ServiceAddress } from '../../src/wire.js';
// Status codes come from the client's transport: grpc-js would cost every CLI command tens of milliseconds to load.
import { connectionFor, CallError, Status, type Connection } from '../../client/connection.js';
import { findDaemon } from '../../client/discovery.js';
import { readHistory } from '../../client/history.js';
import type { QuerySource, RunFilter, RunPage, HistoryQuery, RunInfo, History } from './source.js';
import { RunNotFound } from './source.js';

const CALL_MS = 30_000;
/** How long a query keeps looking for a daemon that went away under it (a sidecar leaving, a restart). */
const REDISCOVER_MS = 15_000;

const gone = (e: unknown) => {
  const code = (e as { code?: number }).code;
  return code === Status.UNAVAILABLE || code === Status.CANCELLED;
};

export class LocalSource implements QuerySource {
  readonly kind = 'local' as const;
  private conn: Connection;

  constructor(address: ServiceAddress, readonly where: string) {
    this.conn = connectionFor(address);
  }

  async listRuns(f: RunFilter): Promise<RunPage> {
    const res = await this.call((c) => c.unary<unknown, { runs: RunInfo[]; total: number }>('listRuns', {
      project: f.project ?? '', group: f.group ?? '', state: f.state ?? '', tag: f.tag ?? '', text: f.text ?? '',
      limit: f.limit ?? 1000, offset: f.offset ?? 0,
    }, CALL_MS));
    return { runs: res.runs, total: res.total ?? res.runs.length };
  }

  getRun(id: string): Promise<RunInfo> {
    return this.call((c) => c.unary<unknown, RunInfo>('getRun', { runId: id }, CALL_MS), id);
  }

  history(id: string, q: HistoryQuery = {}): Promise<History> {
    return this.call((c) => readHistory(c, id, q), id);
  }

  async close(): Promise<void> {
    // The connection is pooled and shared with the rest of the process.
  }

  /**
   * One query, tried again on a daemon found anew when the one asked went
   * away mid-call (a sidecar that left as the call came in, a restart).
   */
  private async call<T>(fn: (c: Connection) => Promise<T>, runId?: string): Promise<T> {
    const deadline = Date.now() + REDISCOVER_MS;
    for (let attempt = 0; ; attempt++) {
      try {
        return await fn(this.conn);
      } catch (e) {
        const code = (e as { code?: number }).code;
        if (runId !== undefined && (code === Status.NOT_FOUND || (e instanceof CallError && e.code === Status.NOT_FOUND))) throw new RunNotFound(runId, this.where);
        if (!gone(e) || Date.now() > deadline) throw e;
        await new Promise((r) => setTimeout(r, Math.min(1000, 100 * 2 ** attempt)));
        this.conn = connectionFor(await findDaemon({ ignoreEnv: true }));
      }
    }
  }
}
