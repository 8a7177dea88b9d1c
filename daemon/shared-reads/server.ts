// The shared store's reads, served over logd's own read calls: ListRuns, GetRun, ReadHistory, ReadConsole,
// ReadMedia and ReadImage answered from the shared PostgreSQL store (daemon/query's SharedSource) on a private
// socket. `logd.Api(store=URL)` (Python) starts one as a child process (`logd reads-server`) and reads through
// it with the very code that reads the node's daemon: the node's daemon never opens the shared store for a
// reader, so a notebook's large read cannot slow the trainers it serves.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { serviceDefinition } from '../../src/proto.js';
import { sameSecret } from '../../src/token.js';
import { TOKEN_METADATA_KEY, fitRuns, type RunInfo, type HistoryChunkMsg } from '../../src/wire.js';
import { parseFilter, selectRuns, runFields, type FilterTerm } from '../../src/run-filter.js';
import { RunNotFound, type QuerySource } from '../query/index.js';
import { historyChunks } from './chunks.js';

/** The longest one history read may take (as the node's daemon's, daemon/reads/history.ts). */
const READ_BUDGET_MS = 120_000;

type Handler = grpc.UntypedServiceImplementation[string];

/** The most entries one ReadConsole or ReadMedia answer holds (as the daemon's). */
const MAX_PAGE = 10_000;

class CallFailed extends Error {
  constructor(readonly code: grpc.status, message: string) {
    super(message);
  }
}

function status(e: unknown): grpc.ServiceError {
  const code = e instanceof CallFailed ? e.code : e instanceof RunNotFound ? grpc.status.NOT_FOUND : grpc.status.UNAVAILABLE;
  const details = (e instanceof CallFailed || e instanceof RunNotFound ? (e as Error).message : `the shared store: ${(e as Error)?.message ?? String(e)}`) as string & { toWellFormed(): string };
  return Object.assign(new Error(details), { code, details: details.toWellFormed(), metadata: new grpc.Metadata() });
}

/** The most runs one ReadHistories call may name. */
const MAX_HISTORIES = 4096;
const EMPTY = new Uint8Array();

/**
 * Runs `body` to write a server stream: `send` waits while the client is slow to read and answers false once the
 * call is gone (cancelled, or past READ_BUDGET_MS: a reader that stopped reading would hold the store's snapshot,
 * a transaction, for as long as it waits). The call ends when body returns, or with the error it threw.
 */
function streamed(call: grpc.ServerWritableStream<unknown, HistoryChunkMsg>, body: (send: (c: HistoryChunkMsg) => Promise<boolean>) => Promise<void>): void {
  let gone = false;
  call.once('cancelled', () => (gone = true));
  const budget = setTimeout(() => {
    gone = true;
    call.emit('error', { code: grpc.status.DEADLINE_EXCEEDED, details: `the read took more than ${READ_BUDGET_MS / 1000} s (a reader that stopped reading, or a very large run): read fewer metrics, or page through it` });
  }, READ_BUDGET_MS);
  const send = async (c: HistoryChunkMsg): Promise<boolean> => {
    if (gone || call.cancelled) return false;
    if (!call.write(c)) await new Promise<void>((res) => {
      const done = () => (call.off('drain', done), call.off('cancelled', done), clearInterval(poll), res());
      call.once('drain', done);
      call.once('cancelled', done);
      const poll = setInterval(() => gone && done(), 250);
    });
    return !gone;
  };
  void body(send).then(() => gone || call.end()).catch((e) => gone || call.emit('error', status(e))).finally(() => clearTimeout(budget));
}

export interface ReadsServer {
  /** `unix:/path`, for a client's ServiceAddress. */
  target: string;
  token: string;
  close(): Promise<void>;
}

/**
 * Serves `source` on a new socket in a private directory (0700) under the system's temp dir; every call needs
 * the token. `onCall` is told of each call (the command's idle deadline counts from the last).
 */
export async function serveSharedReads(source: QuerySource, onCall: () => void = () => {}): Promise<ReadsServer> {
  const token = randomBytes(24).toString('hex');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'logd-reads-'));
  fs.chmodSync(dir, 0o700);
  const socket = path.join(dir, 'reads.sock');

  const authed = (md: grpc.Metadata): boolean => {
    const got = md.get(TOKEN_METADATA_KEY)[0];
    return typeof got === 'string' && sameSecret(got, token);
  };
  const unauth = () => status(new CallFailed(grpc.status.UNAUTHENTICATED, `missing or wrong ${TOKEN_METADATA_KEY}`));
  const unary = <Req, Res>(fn: (req: Req) => Promise<Res>): Handler =>
    ((call: grpc.ServerUnaryCall<Req, Res>, cb: grpc.sendUnaryData<Res>) => {
      if (!authed(call.metadata)) return void cb(unauth());
      onCall();
      fn(call.request).then((res) => cb(null, res), (e) => cb(status(e)));
    }) as Handler;

  const service: grpc.UntypedServiceImplementation = {
    listRuns: unary(async (req: { project: string; group: string; state: string; limit: number; offset: number; tag: string; text: string; filter?: string }) => {
      const filter = { project: req.project, group: req.group, state: req.state, tag: req.tag, text: req.text };
      const limit = req.limit > 0 ? req.limit : 1000;
      let terms: FilterTerm[] = [];
      try {
        terms = req.filter ? parseFilter(req.filter) : [];
      } catch (e) {
        throw new CallFailed(grpc.status.INVALID_ARGUMENT, `filter: ${(e as Error).message}`);
      }
      if (!terms.length) {
        const page = await source.listRuns({ ...filter, limit, offset: req.offset });
        return fitted(page.runs, page.total, req.offset);
      }
      // A filter expression looks at every run the other fields match, then pages (as the daemon does).
      const all: RunInfo[] = [];
      for (let offset = 0; ; ) {
        const page = await source.listRuns({ ...filter, limit: 5000, offset });
        all.push(...page.runs);
        offset += page.runs.length;
        if (page.runs.length === 0 || offset >= page.total) break;
      }
      const picked = selectRuns(all.map((info) => ({ info, ...runFields(info) })), terms).map((x) => x.info);
      return fitted(picked.slice(req.offset, req.offset + limit), picked.length, req.offset);
    }),

    getRun: unary((req: { runId: string }) => source.getRun(req.runId)),

    readHistory: ((call: grpc.ServerWritableStream<{ runId: string; keys: string[]; tailRows: number; system: boolean; points: number; allAttempts?: boolean }, HistoryChunkMsg>) => {
      if (!authed(call.metadata)) return void call.emit('error', unauth());
      onCall();
      const r = call.request;
      const ask = { keys: r.keys, tailRows: r.tailRows, system: r.system, points: r.points, allAttempts: !!r.allAttempts };
      // In pieces where the source can (a slice of the run sent while the store reads the next), whole otherwise.
      const pieces = source.historyPieces ? source.historyPieces(r.runId, ask) : (async function* () {
        yield await source.history(r.runId, ask);
      })();
      streamed(call, async (send) => {
        let first = true;
        for await (const h of pieces) {
          for (const c of historyChunks(h, !!r.allAttempts && !r.points)) {
            if (!first) {
              if (!c.rows) continue;
              c.keys = []; // the first chunk named every key
            }
            first = false;
            if (!(await send(c))) return;
          }
        }
      });
    }) as Handler,

    // A group's runs at once (SharedSource.historyBatches: a few statements per batch of runs, not per run).
    readHistories: ((call: grpc.ServerWritableStream<{ runIds: string[]; keys: string[] }, HistoryChunkMsg>) => {
      if (!authed(call.metadata)) return void call.emit('error', unauth());
      onCall();
      const ids = [...new Set(call.request.runIds)];
      if (!source.historyBatches) return void call.emit('error', status(new CallFailed(grpc.status.UNIMPLEMENTED, `${source.where} reads run by run`)));
      if (ids.length > MAX_HISTORIES) return void call.emit('error', status(new CallFailed(grpc.status.INVALID_ARGUMENT, `ReadHistories: at most ${MAX_HISTORIES} runs in one call, not ${ids.length}`)));
      const batches = source.historyBatches(ids.map((id) => ({ id, rows: -1 })), { keys: call.request.keys.length ? call.request.keys : undefined });
      streamed(call, async (send) => {
        for await (const batch of batches) {
          for (const [id, h] of batch) {
            let first = true;
            for (const c of historyChunks(h, false)) {
              if (!first && !c.rows) continue;
              first = false;
              if (!(await send({ ...c, runId: id }))) return;
            }
            // A run with neither keys nor rows still says it is there.
            if (first && !(await send({ runId: id, keys: [], rows: 0, steps: EMPTY, times: EMPTY, counts: EMPTY, keyIds: EMPTY, values: EMPTY, writer: 0 }))) return;
          }
        }
      });
    }) as Handler,

    readConsole: unary(async (req: { runId: string; afterOffset: number | string; limit: number }) => {
      if (!source.console) throw new CallFailed(grpc.status.UNIMPLEMENTED, `${source.where} keeps no console output`);
      const page = await source.console(req.runId, Number(req.afterOffset) || 0);
      return { entriesJson: page.entries.slice(0, req.limit > 0 ? Math.min(req.limit, MAX_PAGE) : MAX_PAGE).map((e) => JSON.stringify(e)), nextOffset: page.next };
    }),

    readMedia: unary(async (req: { runId: string; afterOffset: number | string; kind: string; key: string }) => {
      if (!source.media) throw new CallFailed(grpc.status.UNIMPLEMENTED, `${source.where} keeps no media`);
      const page = await source.media(req.runId, Number(req.afterOffset) || 0, { kind: req.kind || undefined, key: req.key || undefined });
      return { entriesJson: page.entries.map((e) => JSON.stringify(e)), nextOffset: page.next };
    }),

    readImage: unary(async (req: { runId: string; sha256: string }) => {
      const img = source.image ? await source.image(req.runId, req.sha256) : null;
      if (!img) throw new CallFailed(grpc.status.NOT_FOUND, `run ${req.runId} has no image ${req.sha256.slice(0, 80)} in ${source.where}`);
      return { data: img.data, format: img.format };
    }),
  };

  const server = new grpc.Server({ 'grpc.max_send_message_length': 64 * 1024 * 1024 });
  server.addService(serviceDefinition, service);
  await new Promise<void>((resolve, reject) => server.bindAsync(`unix:${socket}`, grpc.ServerCredentials.createInsecure(), (e) => (e ? reject(e) : resolve())));
  fs.chmodSync(socket, 0o600);
  return {
    target: `unix:${socket}`,
    token,
    close: () => new Promise<void>((resolve) => {
      server.tryShutdown(() => {
        fs.rmSync(dir, { recursive: true, force: true });
        resolve();
      });
    }),
  };
}

/** A page of runs, cut by size as the daemon's (src/wire.ts fitRuns). */
function fitted(page: RunInfo[], total: number, offset: number): { runs: RunInfo[]; total: number; nextOffset: number } {
  const runs = fitRuns(page, 16 * 1024 * 1024);
  return { runs, total, nextOffset: runs.length < page.length ? offset + runs.length : 0 };
}
