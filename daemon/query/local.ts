// The local source: this node's store, read through its daemon (started if
// none runs, as every query command does).
import os from 'node:os';
import { LOGD_VERSION, PROTOCOL_VERSION } from '../../src/config.js';
import type { ServiceAddress } from '../../src/wire.js';
// Status codes come from the client's transport: grpc-js would cost every CLI command tens of milliseconds to load.
import { connectionFor, CallError, Status, type Connection } from '../../client/connection.js';
import { findDaemon } from '../../client/discovery.js';
import { readHistory, readSummary } from '../../client/history.js';
import type { QuerySource, RunFilter, RunPage, HistoryQuery, RunInfo, History, ConsoleLine, MediaItem, RunEditAsk } from './source.js';
import { RunNotFound } from './source.js';
import { downsampleHistory } from './downsampled.js';

const CALL_MS = 30_000;
/** How long a query keeps looking for a daemon that went away under it (a sidecar leaving, a restart). */
const REDISCOVER_MS = 15_000;

/** The daemon asked is gone (killed, stopped, a sidecar that left) or was replaced (a restart: a new token). */
const gone = (e: unknown) => {
  const code = (e as { code?: number }).code;
  return code === Status.UNAVAILABLE || code === Status.CANCELLED || code === Status.UNAUTHENTICATED;
};

export class LocalSource implements QuerySource {
  readonly kind = 'local' as const;
  private conn: Connection;

  /** `onReconnect`: told (for people) each time the daemon went away and a new one is looked for. */
  constructor(address: ServiceAddress, readonly where: string, private readonly onReconnect?: (line: string) => void) {
    this.conn = connectionFor(address);
  }

  async listRuns(f: RunFilter): Promise<RunPage> {
    const limit = f.limit && f.limit > 0 ? f.limit : 1000;
    const out: RunPage = { runs: [], total: 0 };
    // The daemon answers in pages that stay under the message limit (nextOffset > 0: ask again).
    for (let offset = f.offset ?? 0; ;) {
      const page = await this.call((c) => c.unary<unknown, { runs: RunInfo[]; total: number; nextOffset: number }>('listRuns', {
        project: f.project ?? '', group: f.group ?? '', state: f.state ?? '', tag: f.tag ?? '', text: f.text ?? '',
        limit: limit - out.runs.length, offset,
      }, CALL_MS));
      out.runs.push(...page.runs);
      out.total = page.total;
      if (!page.nextOffset || out.runs.length >= limit || page.runs.length === 0) return out;
      offset = page.nextOffset;
    }
  }

  wholeSummary(id: string): Promise<{ summary: Record<string, unknown>; stats: Record<string, unknown> }> {
    return this.call((c) => readSummary(c, id), id);
  }

  async editRun(id: string, e: RunEditAsk): Promise<{ name: string; tags: string[]; notes: string }> {
    const r = await this.call((c) => c.unary<unknown, RunInfo>('editRun', {
      runId: id, setName: e.name !== undefined, name: e.name ?? '', addTags: e.addTags ?? [], removeTags: e.removeTags ?? [], setNotes: e.notes !== undefined, notes: e.notes ?? '',
    }, CALL_MS), id);
    return { name: r.name, tags: r.tags, notes: r.notes };
  }

  async removeRun(id: string): Promise<void> {
    await this.call((c) => c.unary('deleteRun', { runId: id }, CALL_MS), id);
  }

  getRun(id: string): Promise<RunInfo> {
    return this.call((c) => c.unary<unknown, RunInfo>('getRun', { runId: id }, CALL_MS), id);
  }

  history(id: string, q: HistoryQuery = {}): Promise<History> {
    return this.call(async (c) => {
      const h = await readHistory(c, id, q);
      // A daemon older than `points` answers rows: bucket them here.
      return q.points && q.points > 0 && !h.buckets ? downsampleHistory(h, q.keys ?? [], q.points) : h;
    }, id);
  }

  console(id: string, after: number): Promise<{ entries: ConsoleLine[]; next: number }> {
    return this.call(async (c) => {
      const page = await c.unary<unknown, { entriesJson: string[]; nextOffset: number }>('readConsole', { runId: id, afterOffset: after, limit: 0 }, CALL_MS);
      return { entries: page.entriesJson.map((j) => JSON.parse(j) as ConsoleLine), next: Number(page.nextOffset) };
    }, id);
  }

  media(id: string, after: number, filter: { kind?: string; key?: string } = {}): Promise<{ entries: MediaItem[]; next: number }> {
    return this.call(async (c) => {
      const page = await c.unary<unknown, { entriesJson: string[]; nextOffset: number }>('readMedia', { runId: id, afterOffset: after, limit: 0, kind: filter.kind ?? '', key: filter.key ?? '' }, CALL_MS);
      return { entries: page.entriesJson.map((j) => JSON.parse(j) as MediaItem), next: Number(page.nextOffset) };
    }, id);
  }

  image(id: string, sha256: string): Promise<{ data: Uint8Array; format: 'png' | 'jpeg' } | null> {
    return this.call(async (c) => {
      try {
        const r = await c.unary<unknown, { data: Uint8Array; format: 'png' | 'jpeg' }>('readImage', { runId: id, sha256 }, CALL_MS);
        return r;
      } catch (e) {
        if ((e as { code?: number }).code === 5 && /has no image/.test((e as Error).message)) return null;
        throw e;
      }
    }, id);
  }

  async keepAlive(): Promise<void> {
    await this.call((c) => c.unary('hello', { protocolVersion: PROTOCOL_VERSION, client: { pid: process.pid, host: os.hostname(), rank: null, clientVersion: LOGD_VERSION } }, CALL_MS));
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
        if (attempt === 0) this.onReconnect?.(`the daemon went away (${(e as Error).message.split('\n')[0].slice(0, 160)}); reconnecting`);
        await new Promise((r) => setTimeout(r, Math.min(1000, 100 * 2 ** attempt)));
        this.conn = connectionFor(await findDaemon({ ignoreEnv: true, reader: true }));
      }
    }
  }
}
