// Connection / service stage: gRPC handlers, authentication and validation of
// every message. A bad message gets a clear status; no handler throws past here.
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { sameSecret } from '../../src/token.js';
import { TOKEN_METADATA_KEY, fitRuns, type WriteRequestMsg, type RunInfo, type ClientInfo, type HistoryChunkMsg } from '../../src/wire.js';
import { LogdError, invalid, notFound, failedPrecondition, unavailable, exhausted } from '../../src/errors.js';
import { runWindow, type RunWindow } from '../sampler/system-metrics.js';
import { LOGD_VERSION, PROTOCOL_VERSION } from '../../src/config.js';
import { checkRunId } from '../../src/names.js';
import type { Registry } from '../runs/registry.js';
import type { Finaliser } from '../runs/finaliser.js';
import type { LiveRun, Writer, WriteCall } from '../runs/run.js';
import { rowFromLive, infoFromRow } from '../runs/index-rows.js';
import { editRun, removeRun } from '../runs/manage.js';
import { Undecodable } from '../../src/proto.js';
import { toJson } from '../../src/json.js';
import { MEDIA_KINDS } from '../../src/media.js';
import { checkEnvironment as parseEnvironment } from '../../src/environment.js';
import { summaryChunks } from '../store/summary.js';
import { HistoryAnswer } from '../reads/chunks.js';
import { streamLogHistory, TooManyMetrics, ReadsBusy } from '../reads/history.js';
import { isAlive } from '../runs/liveness.js';
import { parseFilter, selectRuns, runFields, type FilterTerm } from '../../src/run-filter.js';

export interface ServerContext {
  registry: Registry;
  finaliser: Finaliser;
  token: string;
  addresses: () => string[];
  sidecar: boolean;
  startedAt: number;
  requestShutdown: (why: string) => void;
}

type Handler = grpc.UntypedServiceImplementation[string];

function tokenOk(md: grpc.Metadata, token: string): boolean {
  const got = md.get(TOKEN_METADATA_KEY)[0];
  if (typeof got !== 'string') return false;
  return sameSecret(got, token);
}

const UNAUTH = { code: grpc.status.UNAUTHENTICATED, details: `missing or wrong ${TOKEN_METADATA_KEY}; take the token from the daemon's service file or LOGD_SERVICE` };

/**
 * A client of another wire protocol is refused on every call, with both logd
 * versions named: a mix is never silent. Clients send `x-logd-protocol` and
 * `x-logd-version` with each call; one that sends none (a client from before
 * they existed, or one written from the .proto alone) speaks protocol 1.
 */
export function wireRefusal(protocol: unknown, clientVersion: unknown): string | null {
  const p = typeof protocol === 'number' ? String(protocol) : protocol;
  if (p === undefined || p === '' || p === String(PROTOCOL_VERSION)) return null;
  const v = typeof clientVersion === 'string' && clientVersion ? `logd ${clientVersion}` : 'a logd client';
  return `${v} speaks wire protocol ${String(p)}, and this daemon (logd ${LOGD_VERSION}, pid ${process.pid}) speaks wire protocol ${PROTOCOL_VERSION}: ` +
    `use one logd version on this node (install logd ${LOGD_VERSION} where this client runs), or stop this daemon (\`logd stop\`) so that the client's own version starts`;
}

function refusedWire(md: grpc.Metadata): grpc.ServiceError | null {
  const why = wireRefusal(md.get('x-logd-protocol')[0], md.get('x-logd-version')[0]);
  return why ? (toStatus(failedPrecondition(why)) as grpc.ServiceError) : null;
}

/**
 * Status details travel in an HTTP/2 trailer that grpc-js URI-encodes, and
 * encodeURI throws on a lone surrogate. One got there from a client's input
 * (JSON.parse names a bad token by one UTF-16 unit, half an emoji) and took
 * the whole daemon down. Details are made well-formed first.
 */
function safeDetails(s: string): string {
  return (s as string & { toWellFormed(): string }).toWellFormed();
}

function toStatus(e: unknown): grpc.ServiceError {
  if (e instanceof LogdError) return Object.assign(new Error(e.message), { code: e.code, details: safeDetails(e.message), metadata: new grpc.Metadata() });
  const msg = safeDetails(`internal error: ${(e as Error)?.message ?? String(e)}`);
  return Object.assign(new Error(msg), { code: grpc.status.INTERNAL, details: msg, metadata: new grpc.Metadata() });
}

/** Why a call is refused before its handler runs: a missing or wrong token, or a wire version this daemon does not speak; null when it may go on. */
function refusal(ctx: ServerContext, md: grpc.Metadata): grpc.ServiceError | null {
  if (!tokenOk(md, ctx.token)) return UNAUTH as grpc.ServiceError;
  return refusedWire(md);
}

/** A unary handler with authentication and error mapping. */
function unary<Req, Res>(ctx: ServerContext, fn: (req: Req, call: grpc.ServerUnaryCall<Req, Res>) => Res | Promise<Res>): Handler {
  return ((call: grpc.ServerUnaryCall<Req, Res>, cb: grpc.sendUnaryData<Res>) => {
    const refused = refusal(ctx, call.metadata);
    if (refused) return void cb(refused);
    // Any call counts as activity: a sidecar must not leave under a reader's feet.
    ctx.registry.touch();
    if (call.request instanceof Undecodable) return void cb(toStatus(invalid(call.request.reason)));
    Promise.resolve()
      .then(() => fn(call.request, call))
      .then((res) => cb(null, res), (e) => cb(toStatus(e)));
  }) as Handler;
}

/** A server-streaming read with authentication and error mapping; `touch`: it counts as activity, as a unary call does. */
function reading<Req, Res>(ctx: ServerContext, touch: boolean, fn: (call: grpc.ServerWritableStream<Req, Res>) => Promise<void>): Handler {
  return ((call: grpc.ServerWritableStream<Req, Res>) => {
    const refused = refusal(ctx, call.metadata);
    if (refused) return void call.emit('error', refused);
    if (touch) ctx.registry.touch();
    const req = call.request as unknown;
    if (req instanceof Undecodable) return void call.emit('error', toStatus(invalid(req.reason)));
    void fn(call).catch((e) => call.emit('error', toStatus(e)));
  }) as Handler;
}

export function buildService(ctx: ServerContext): grpc.UntypedServiceImplementation {
  const { registry: reg, finaliser: fin } = ctx;
  const clients = new Map<number, ClientInfo & { lastSeen: number }>();

  const runInfo = (id: string): RunInfo => {
    const live = reg.runs.get(id);
    if (live) return withDamage(reg, live.info());
    const bad = checkRunId(id);
    const row = bad ? undefined : reg.store.index.get(id);
    if (!row) throw notFound(`run ${JSON.stringify(id.slice(0, 80))} does not exist (data dir ${reg.store.dataDir}); list runs with \`logd runs\``);
    return withDamage(reg, infoFromRow(row));
  };

  return {
    hello: unary(ctx, (req: { protocolVersion: number; client?: ClientInfo }) => {
      if (req.protocolVersion !== PROTOCOL_VERSION) throw failedPrecondition(wireRefusal(req.protocolVersion, req.client?.clientVersion)!);
      if (req.client) {
        clients.set(req.client.pid, { ...req.client, lastSeen: Date.now() });
        reg.heardFrom(req.client.host, req.client.pid); // a client's keep-alive: its writers live
      }
      reg.touch();
      return { protocolVersion: PROTOCOL_VERSION, daemonVersion: LOGD_VERSION, daemonPid: process.pid, maxMessageBytes: reg.tunables.maxMessageBytes };
    }),

    createRun: unary(ctx, async (req: Parameters<Registry['createRun']>[0], call) => {
      const continuing = req.id || req.resumeFrom?.runId;
      // A run just finished may still be getting its checkpoint (store/seal.ts): its log is opened again after that.
      // A run whose client deferred it (no answer to its CreateRun in time) exists only as spill files until the
      // daemon reads them: a restarted job's init(resume_from=...) must find it, not be told it does not exist.
      const continues = req.resume === 'allow' || req.resume === 'must' || !!req.resumeFrom;
      if (continues && continuing && typeof continuing === 'string' && checkRunId(continuing) === null && !reg.runs.has(continuing) && !reg.store.exists(continuing)) {
        const read = fin.ingestDeferred(continuing);
        if (read) reg.log(`server: run ${continuing}: made from ${read} deferred spill file(s) before a new attempt continues it`);
      }
      if (continuing && typeof continuing === 'string') await reg.store.sealed(continuing);
      if ((req.resume === 'allow' || req.resume === 'must' || req.resumeFrom) && continuing) {
        // A new attempt (a restarted worker) may come before the daemon noticed the last one's owner died: end it first.
        const open = reg.runs.get(continuing);
        const owner = open && !open.final ? open.writers.get(open.meta.ownerWriterId) : undefined;
        if (open && owner?.local && !isAlive(owner.meta.pid, owner.startTime)) {
          // What that owner spilled (its rows, and its exit: 128 + n from its signal handler) and journaled goes in
          // first, as when its death is noticed: a torchrun survivor ended by SIGTERM and restarted at once lost
          // its last rows here. The final states are written in order, so the finalise below waits for the one
          // the spill or the journal started (and is a no-op after it).
          fin.writerGone(open, owner, 'seen when a new attempt continued the run');
          await fin.finalise(open, 'crashed', `owner pid ${owner.meta.pid} exited without finish (seen when a new attempt continued the run)`, -1);
        }
      }
      await reg.continueFromStore(req); // a run only the shared store has (another node logged it) becomes local first
      const run = reg.createRun(req); // the same run again for a retry with the same create key
      fin.armOwnerWithoutPid(run);
      if (req.client) clients.set(req.client.pid, { ...req.client, lastSeen: Date.now() });
      run.createsInFlight++;
      let durable: boolean;
      try {
        // A disk that refuses writes (full) answers at once: the client then keeps its rows elsewhere (deferred).
        durable = await reg.flushAll(reg.tunables.shutdownTimeoutMs, true);
      } finally {
        run.createsInFlight--;
      }
      if (!durable && reg.storageProblem && !run.createAnswered) {
        reg.abandon(run, `the data dir cannot store it: ${reg.storageProblem}`);
        throw exhausted(`run ${run.id} cannot be stored: ${reg.storageProblem.replace(/; records are kept in memory.*$/, '')} (free space in the data dir)`);
      }
      if (call.cancelled && !run.createAnswered) {
        reg.abandon(run);
        throw unavailable(`createRun: the caller gave up before the answer; run ${run.id} was not kept`);
      }
      run.createAnswered = true;
      reg.store.index.upsert(rowFromLive(run));
      return { ...run.info(true), spoolDir: path.join(reg.store.dataDir, 'spool') };
    }),

    attachRun: unary(ctx, (req: { runId: string; runToken: string; client?: ClientInfo; writerId?: string }) => {
      const run = reg.attach(req.runId, req.runToken, req.writerId ?? '', req.client ?? null);
      return { ...run.info(true), ownerWriterId: '', spoolDir: path.join(reg.store.dataDir, 'spool') };
    }),

    finishRun: unary(ctx, async (req: { runId: string; runToken: string; writerId: string; exitCode: number; timeoutMs: number; lastSeq: number; exceptionType?: string; exceptionMessage?: string; endedAt?: number }) => {
      let run: LiveRun;
      try {
        run = reg.authorizedRun(req.runId, req.runToken, req.writerId);
      } catch (e) {
        // Finishing a run that is already final answers with its final state.
        if (e instanceof LogdError && e.code === grpc.status.FAILED_PRECONDITION) return { run: runInfo(req.runId), message: e.message, timedOut: false };
        throw e;
      }
      const timeout = req.timeoutMs > 0 ? req.timeoutMs : reg.tunables.finishTimeoutMs;
      const out = await fin.finish(run, req.writerId, req.exitCode, timeout, req.lastSeq, { exceptionType: req.exceptionType, exceptionMessage: req.exceptionMessage, endedAt: req.endedAt });
      // A stop overtook this finish: the run is only paused (killed, resumable).
      // The client sends its finish again to the next daemon, which resumes the run and ends it as asked.
      if (reg.stopping && out.run.state === 'killed') throw unavailable(`finishRun: the daemon stopped (${reg.stopping}) before run ${run.id} was finished; send the finish to the next daemon`);
      return { run: out.run.info(), message: out.message, timedOut: out.timedOut };
    }),

    listRuns: unary(ctx, (req: { project: string; group: string; state: string; limit: number; offset: number; tag: string; text: string; filter?: string }) => {
      const filter = { project: req.project, group: req.group, state: req.state, tag: req.tag, text: req.text };
      const limit = req.limit > 0 ? req.limit : 1000;
      const infoOf = (r: Parameters<typeof infoFromRow>[0]) => withDamage(reg, reg.runs.get(r.id)?.info() ?? infoFromRow(r));
      let terms: FilterTerm[] = [];
      try {
        terms = req.filter ? parseFilter(req.filter) : [];
      } catch (e) {
        throw invalid(`filter: ${(e as Error).message}`);
      }
      // A filter expression looks at every run the other fields match, then pages (as `logd runs --filter` does).
      let picked: RunInfo[] | null = null;
      if (terms.length) {
        const all = reg.store.index.list({ ...filter, limit: 2 ** 31 - 1, offset: 0 }).map((r) => {
          const info = infoOf(r);
          return { info, ...runFields(info) };
        });
        picked = selectRuns(all, terms).map((x) => x.info);
      }
      const page = picked ? picked.slice(req.offset, req.offset + limit) : reg.store.index.list({ ...filter, limit, offset: req.offset }).map(infoOf);
      // Summaries are capped per run; the page is also cut by size, so no
      // number or size of runs ever makes the answer exceed the message limit.
      const runs = fitRuns(page, reg.tunables.maxMessageBytes / 4);
      const nextOffset = runs.length < page.length ? req.offset + runs.length : 0;
      return { runs, total: picked ? picked.length : reg.store.index.countMatching(filter), nextOffset };
    }),

    getRun: unary(ctx, (req: { runId: string }) => {
      // One run is shown: its whole log's checksums are checked (once per change of the file).
      if (checkRunId(req.runId) === null && reg.store.exists(req.runId)) reg.store.verify(req.runId);
      return runInfo(req.runId);
    }),

    readConsole: unary(ctx, (req: { runId: string; afterOffset: number; limit: number }) => {
      if (checkRunId(req.runId) !== null || !reg.store.exists(req.runId)) throw notFound(`run ${JSON.stringify(req.runId.slice(0, 80))} does not exist; list runs with \`logd runs\``);
      const limit = req.limit > 0 ? Math.min(req.limit, MAX_CONSOLE_PAGE) : MAX_CONSOLE_PAGE;
      // Pages stay well under the message limit whatever the lines hold.
      const page = reg.store.readConsole(req.runId, Number(req.afterOffset) || 0, limit, reg.tunables.maxMessageBytes / 4);
      return { entriesJson: page.entries, nextOffset: page.nextOffset };
    }),

    readMedia: unary(ctx, (req: { runId: string; afterOffset: number; limit: number; kind: string; key: string }) => {
      if (checkRunId(req.runId) !== null || !reg.store.exists(req.runId)) throw notFound(`run ${JSON.stringify(req.runId.slice(0, 80))} does not exist; list runs with \`logd runs\``);
      if (req.kind && !(MEDIA_KINDS as readonly string[]).includes(req.kind)) throw invalid(`kind ${JSON.stringify(req.kind.slice(0, 40))} is none of ${MEDIA_KINDS.join(', ')}`);
      const limit = req.limit > 0 ? Math.min(req.limit, MAX_CONSOLE_PAGE) : MAX_CONSOLE_PAGE;
      const page = reg.store.readMedia(req.runId, Number(req.afterOffset) || 0, limit, reg.tunables.maxMessageBytes / 4, req.kind, req.key);
      return { entriesJson: page.entries, nextOffset: page.nextOffset };
    }),

    readImage: unary(ctx, (req: { runId: string; sha256: string }) => {
      if (checkRunId(req.runId) !== null || !reg.store.exists(req.runId)) throw notFound(`run ${JSON.stringify(req.runId.slice(0, 80))} does not exist; list runs with \`logd runs\``);
      const img = reg.store.readImage(req.runId, req.sha256);
      if (!img) throw notFound(`run ${req.runId} has no image ${JSON.stringify(req.sha256.slice(0, 80))}; its images are listed by \`logd media ${req.runId} --kind image\``);
      return { data: img.data, format: img.format };
    }),

    status: unary(ctx, () => {
      const cutoff = Date.now() - 60_000;
      for (const [pid, c] of clients) if (c.lastSeen < cutoff) clients.delete(pid);
      const writerClients: ClientInfo[] = [];
      for (const run of reg.runs.values()) {
        for (const w of run.writers.values()) {
          if (!w.detached) writerClients.push({ pid: w.meta.pid, host: w.meta.host, rank: w.meta.rank, clientVersion: '' });
        }
      }
      const seen = new Set(writerClients.map((c) => c.pid));
      return {
        pid: process.pid, version: LOGD_VERSION, addresses: ctx.addresses(), dataDir: reg.store.dataDir,
        startedAt: ctx.startedAt, sidecar: ctx.sidecar, openRuns: reg.openRuns().map((r) => r.info()),
        clients: [...writerClients, ...[...clients.values()].filter((c) => !seen.has(c.pid))], recordsStored: reg.recordsStored,
        storageProblem: reg.storageProblem ?? '', storeProblems: reg.store.problems.lines(),
      };
    }),

    alert: unary(ctx, (req: { runId: string; runToken: string; title: string; text: string; level: string; alertId: string }) => {
      const run = reg.authorizedRun(req.runId, req.runToken);
      const level = req.level || 'info';
      if (!['info', 'warn', 'error'].includes(level)) throw invalid(`alert: level must be info, warn or error, not ${JSON.stringify(level.slice(0, 40))}`);
      if (!req.title.trim()) throw invalid('alert: the title is empty');
      if (!reg.userAlert) return { queued: false, message: 'no alert sink is configured for this daemon (LOGD_ALERT_WEBHOOK or LOGD_ALERTS; docs/alerts.md)' };
      return reg.userAlert(run.info(), { title: req.title.slice(0, 200), text: req.text.slice(0, 4000), level, id: req.alertId.slice(0, 64) });
    }),

    setEnvironment: unary(ctx, (req: { runId: string; runToken: string; writerId: string; environmentJson: string }) => {
      const run = reg.authorizedRun(req.runId, req.runToken);
      const w = run.writers.get(req.writerId);
      if (!w) throw invalid(`setEnvironment: run ${run.id} has no writer ${JSON.stringify(req.writerId.slice(0, 40))}`);
      let env: Record<string, unknown>;
      try {
        env = parseEnvironment(req.environmentJson);
      } catch (e) {
        throw invalid((e as Error).message);
      }
      // A client that did not read git itself (logd's own clients leave it to the daemon: daemon/code) has its
      // working directory read here, once per directory for every run started there within a few seconds; and a
      // TypeScript one its package.json's dependencies as installed (a Python client sends its own list).
      const cwd = typeof env.cwd === 'string' ? env.cwd : null;
      const git = cwd && !('git' in env) && reg.gitFacts ? reg.gitFacts(cwd, env.saveDiff !== false) : null;
      const packages = cwd && env.client === 'typescript' && !('packages' in env) && env.savePackages !== false && reg.nodePackages ? reg.nodePackages(cwd) : null;
      if (git || packages) {
        run.setEnvironmentWith(w, env, Promise.all([git, packages]).then(([g, pk]) => ({ ...(git ? { git: g } : {}), ...(pk ? { packages: pk } : {}) })));
      } else run.setEnvironment(w, env);
      return {};
    }),

    reportExit: unary(ctx, (req: { pid: number; exitCode: number; signal: string; endedAt: number }) => ({ runs: fin.exitReported(req.pid, req.exitCode, req.signal, req.endedAt) })),

    shutdown: unary(ctx, () => {
      const n = reg.openRuns().length;
      setImmediate(() => ctx.requestShutdown('a Shutdown call (logd stop)'));
      return { runsKilled: n };
    }),

    editRun: unary(ctx, (req: { runId: string; setName: boolean; name: string; addTags: string[]; removeTags: string[]; setNotes: boolean; notes: string }) =>
      editRun(reg, req.runId, { name: req.setName ? req.name : undefined, addTags: req.addTags, removeTags: req.removeTags, notes: req.setNotes ? req.notes : undefined })),

    deleteRun: unary(ctx, async (req: { runId: string }) => {
      await removeRun(reg, req.runId);
      return {};
    }),

    readHistory: reading<HistoryRequest, HistoryChunkMsg>(ctx, true, (call) => streamHistory(reg, call)),

    readSummary: reading<{ runId: string }, { summaryJson: string; statsJson: string }>(ctx, false, (call) => streamSummary(reg, call)),

    write: ((call: WriteCall) => {
      const refused = refusal(ctx, call.metadata);
      if (refused) return void call.emit('error', refused);
      handleWrite(ctx, call);
    }) as Handler,
  };
}

/** A run whose log is known to be damaged says so in its metadata (`damage`). */
function withDamage(reg: Registry, info: RunInfo): RunInfo {
  const damage = reg.store.problems.damageOf(info.id);
  if (!damage) return info;
  const meta = JSON.parse(info.metadataJson || '{}') as Record<string, unknown>;
  return { ...info, metadataJson: toJson({ ...meta, damage }) };
}

/** The most console entries one ReadConsole answer holds. */
const MAX_CONSOLE_PAGE = 10_000;

type HistoryRequest = { runId: string; keys: string[]; tailRows: number; system: boolean; points: number; allAttempts?: boolean };

async function streamHistory(reg: Registry, call: grpc.ServerWritableStream<HistoryRequest, HistoryChunkMsg>): Promise<void> {
  const id = call.request.runId;
  if (checkRunId(id) !== null || !reg.store.exists(id)) throw notFound(`run ${JSON.stringify(id.slice(0, 80))} does not exist; list runs with \`logd runs\``);
  // Downsampled (points > 0): the wanted metrics' points are collected as the log is read, then bucketed; only
  // the buckets travel. Charts show the latest timeline: superseded rows come only to a reader that asks for every attempt's.
  const points = call.request.points > 0 ? call.request.points : 0;
  const ask = { keys: call.request.keys, points, allAttempts: !!call.request.allAttempts && !points };
  const sink = {
    cancelled: () => call.cancelled,
    write: async (c: HistoryChunkMsg | Uint8Array) => {
      if (!call.write(c as HistoryChunkMsg)) await new Promise((r) => call.once('drain', r)); // bytes: sent as they are (src/proto.ts)
    },
  };
  if (call.request.system || (call.request.tailRows > 0 && !points)) {
    // Bounded reads, inline: the node's samples over the run's life, or the last rows of its log.
    const chunks: HistoryChunkMsg[] = [];
    const answer = new HistoryAnswer(ask, (c) => chunks.push(c));
    if (call.request.system) {
      if (!reg.system) throw failedPrecondition('system metrics are off on this daemon (it was started with --sample-interval 0)');
      reg.system.readForRun(windowOf(reg, id), new Set(), (b, added) => answer.onChunk(b, added, 0, { attempt: 0, superseded: false }));
    } else {
      reg.store.readHistoryTail(id, call.request.tailRows, answer.onChunk, { attempts: reg.runs.get(id)?.attempts ?? reg.store.attemptsOf(id), allAttempts: ask.allAttempts });
    }
    answer.end();
    for (const c of chunks) {
      if (call.cancelled) return;
      await sink.write(c);
    }
    return void call.end();
  }
  // The whole log: off the main thread when it is large (daemon/reads), streamed as the reader takes it.
  const view = { attempts: reg.runs.get(id)?.attempts ?? reg.store.attemptsOf(id), allAttempts: ask.allAttempts };
  let got;
  try {
    got = await streamLogHistory(reg.store.logPath(id), view, ask, sink);
  } catch (e) {
    if (e instanceof TooManyMetrics || e instanceof ReadsBusy) throw exhausted(`history of run ${id}: ${(e as Error).message}`);
    throw e;
  }
  if (!got) return;
  reg.store.problems.noteDamage(id, got.damaged, got.rows, reg.store.logPath(id));
  call.end();
}

async function streamSummary(reg: Registry, call: grpc.ServerWritableStream<{ runId: string }, { summaryJson: string; statsJson: string }>): Promise<void> {
  const id = call.request.runId;
  if (checkRunId(id) !== null || !reg.store.exists(id)) throw notFound(`run ${JSON.stringify(id.slice(0, 80))} does not exist; list runs with \`logd runs\``);
  const live = reg.runs.get(id);
  const src = live ?? reg.store.replay(id, false).run; // a final run's summary is rebuilt from its log
  for (const part of summaryChunks(src.summary, src.keys, src.userSummary)) {
    if (call.cancelled) return;
    if (!call.write({ summaryJson: toJson(part.summary), statsJson: toJson(part.stats) })) await new Promise((r) => call.once('drain', r));
  }
  call.end();
}

/** A run's lifetime and processes, live or from the index. */
function windowOf(reg: Registry, id: string): RunWindow {
  const live = reg.runs.get(id);
  if (live) return runWindow(live.span());
  const row = reg.store.index.get(id);
  if (!row) throw notFound(`run ${id} is not in the index`);
  const meta = JSON.parse(row.metadata_json || '{}') as { pid?: number; writers?: Array<{ idx: number; pid: number }> };
  return runWindow({ createdAt: row.created_at, finishedAt: row.finished_at, ownerPid: meta.pid ?? 0, writers: meta.writers ?? [] });
}

function handleWrite(ctx: ServerContext, call: WriteCall): void {
  const { registry: reg, finaliser: fin } = ctx;
  let run: LiveRun | null = null;
  let writer: Writer | null = null;
  let ended = false;
  const end = (abrupt: boolean) => {
    if (ended) return;
    ended = true;
    call.removeAllListeners('data');
    reg.backpressure.forget(call);
    if (run && writer && writer.stream === call) fin.streamEnded(run, writer, abrupt);
  };
  const fail = (code: grpc.status, details: string) => {
    end(false);
    call.emit('error', { code, details: safeDetails(details) });
  };
  call.on('data', (msg: WriteRequestMsg | Undecodable) => {
    try {
      if (msg instanceof Undecodable) return fail(grpc.status.INVALID_ARGUMENT, msg.reason);
      if (msg.open) {
        if (run) return fail(grpc.status.INVALID_ARGUMENT, 'the stream is already open; send OpenWriter once, first');
        ({ run, writer } = reg.openWriter(call, msg.open));
        call.write({ opened: { writerId: writer.meta.writerId, lastSeq: writer.durableSeq, runState: run.state } });
        return;
      }
      if (msg.batch) {
        if (!run || !writer) return fail(grpc.status.FAILED_PRECONDITION, 'send OpenWriter before any RecordBatch');
        if (run.final) {
          call.write({ control: { kind: 'run_final', seq: msg.batch.seq, message: `run ${run.id} is ${run.state}; the batch was not stored` } });
          return;
        }
        const err = reg.onBatch(run, writer, msg.batch);
        if (err) call.write({ control: { kind: 'rejected', seq: msg.batch.seq, message: `batch ${msg.batch.seq} refused: ${err}` } });
        return;
      }
      return fail(grpc.status.INVALID_ARGUMENT, 'empty WriteRequest: set open or batch');
    } catch (e) {
      const s = toStatus(e);
      return fail(s.code, s.details);
    }
  });
  call.on('end', () => {
    end(false);
    if (!call.writableEnded) call.end();
  });
  call.on('cancelled', () => end(true));
  call.on('error', () => end(true));
  call.on('close', () => end(true));
}
