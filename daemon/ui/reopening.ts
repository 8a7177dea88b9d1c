// The dashboard outlives daemons: when the node's daemon goes away (killed,
// restarted, an on-demand daemon that stopped), the next call opens the
// source again — which finds the new daemon or starts one — and retries once.
import * as grpc from '@grpc/grpc-js';
import type { QuerySource, RunFilter, RunPage, HistoryQuery, RunInfo, History } from '../query/index.js';

/** A call failed because the daemon behind the source is gone or was replaced. */
export function daemonLost(e: unknown): boolean {
  const code = (e as { code?: unknown }).code;
  if (code === grpc.status.UNAVAILABLE || code === grpc.status.UNAUTHENTICATED) return true;
  return /No connection established|ECONNREFUSED|ENOENT|UNAVAILABLE|wrong x-logd-token/.test((e as Error)?.message ?? '');
}

export class ReopeningSource implements QuerySource {
  readonly kind: QuerySource['kind'];
  readonly where: string;
  private current: Promise<QuerySource> | null;

  constructor(first: QuerySource, private reopen: () => Promise<QuerySource>, private log: (line: string) => void = () => {}) {
    this.kind = first.kind;
    this.where = first.where;
    this.current = Promise.resolve(first);
  }

  private source(): Promise<QuerySource> {
    if (!this.current) {
      const next = this.reopen().catch((e: Error) => {
        if (this.current === next) this.current = null; // try again on the next call
        throw new Error(`the dashboard lost its daemon and could not reach a new one: ${e.message}`);
      });
      this.current = next;
    }
    return this.current;
  }

  private async call<T>(f: (s: QuerySource) => Promise<T>): Promise<T> {
    const held = this.source();
    const s = await held;
    try {
      return await f(s);
    } catch (e) {
      if (!daemonLost(e)) throw e;
      if (this.current === held) {
        this.log(`ui: the daemon went away (${(e as Error).message.split('\n')[0].slice(0, 160)}); reconnecting`);
        this.current = null;
      }
      return f(await this.source());
    }
  }

  listRuns(f: RunFilter): Promise<RunPage> {
    return this.call((s) => s.listRuns(f));
  }
  getRun(id: string): Promise<RunInfo> {
    return this.call((s) => s.getRun(id));
  }
  history(id: string, q?: HistoryQuery): Promise<History> {
    return this.call((s) => s.history(id, q));
  }
  keepAlive(): Promise<void> {
    return this.call(async (s) => s.keepAlive?.());
  }
  async close(): Promise<void> {
    await (await this.current?.catch(() => null))?.close();
  }
}
