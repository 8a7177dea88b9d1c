// The local source: this node's store, read through its daemon (started if
// none runs, as every query command does).
import os from 'node:os';
import * as grpc from '@grpc/grpc-js';
import { LOGD_VERSION, PROTOCOL_VERSION } from '../../src/config.js';
import type { ServiceAddress } from '../../src/wire.js';
import { connectionFor, CallError, type Connection } from '../../client/connection.js';
import { readHistory } from '../../client/history.js';
import type { QuerySource, RunFilter, RunPage, HistoryQuery, RunInfo, History } from './source.js';
import { RunNotFound } from './source.js';

const CALL_MS = 30_000;

export class LocalSource implements QuerySource {
  readonly kind = 'local' as const;
  private conn: Connection;

  constructor(address: ServiceAddress, readonly where: string) {
    this.conn = connectionFor(address);
  }

  async listRuns(f: RunFilter): Promise<RunPage> {
    const res = await this.conn.unary<unknown, { runs: RunInfo[]; total: number }>('listRuns', {
      project: f.project ?? '', group: f.group ?? '', state: f.state ?? '', tag: f.tag ?? '', text: f.text ?? '',
      limit: f.limit ?? 1000, offset: f.offset ?? 0,
    }, CALL_MS);
    return { runs: res.runs, total: res.total ?? res.runs.length };
  }

  async getRun(id: string): Promise<RunInfo> {
    try {
      return await this.conn.unary<unknown, RunInfo>('getRun', { runId: id }, CALL_MS);
    } catch (e) {
      throw this.notFound(e, id);
    }
  }

  async history(id: string, q: HistoryQuery = {}): Promise<History> {
    try {
      return await readHistory(this.conn, id, q);
    } catch (e) {
      throw this.notFound(e, id);
    }
  }

  async keepAlive(): Promise<void> {
    await this.conn.unary('hello', { protocolVersion: PROTOCOL_VERSION, client: { pid: process.pid, host: os.hostname(), rank: null, clientVersion: LOGD_VERSION } }, CALL_MS);
  }

  async close(): Promise<void> {
    // The connection is pooled and shared with the rest of the process.
  }

  private notFound(e: unknown, id: string): unknown {
    if (e instanceof CallError && e.code === grpc.status.NOT_FOUND) return new RunNotFound(id, this.where);
    if ((e as { code?: number }).code === grpc.status.NOT_FOUND) return new RunNotFound(id, this.where);
    return e;
  }
}
