// The logd daemon process: one per (user, data dir). Takes the lock, opens
// and recovers the store, serves gRPC on a private Unix socket (and TCP when
// asked), publishes its service file, and stops gracefully on a signal.
import { startAlerts } from './alerts/start.js';
import { infoFromRow } from './runs/index-rows.js';
import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { daemonTunables, resolvePaths, uploadTunables, LOGD_VERSION, type LogdPaths } from '../src/config.js';
import { DaemonRuns } from './upload/local-runs.js';
import { statusFile } from './upload/status.js';
import { serviceDefinition, warmCodecs } from '../src/proto.js';
import { Store } from './store/store.js';
import { Registry } from './runs/registry.js';
import { Finaliser } from './runs/finaliser.js';
import { buildService } from './grpc/server.js';
import { LiveRun } from './runs/run.js';
import { rowFromLive } from './runs/index-rows.js';
import { ingestAllSpool } from './runs/spool.js';
import { ingestAllJournals } from './runs/journal.js';
import { writeServiceFile, removeServiceFile, type ServiceFile } from '../src/service-file.js';
import { procStartTime } from '../src/proc.js';
import { raiseHttp2ReceiveWindow } from './grpc/http2-window.js';
import { privateRuntime } from '../src/runtime-dir.js';
import type { DataDirLock } from './process/data-dir-lock.js';
import { limitYoungGeneration, releaseMemoryWhenQuiet } from './process/memory.js';
import { stopWhenUninstalled } from './process/installed.js';
import { SystemMetrics } from './sampler/system-metrics.js';
import { acquireLock, refuseSecondDaemon, markStopping, EXIT_ALREADY_RUNNING } from './process/lock.js';
import { HealthMonitor, type HealthView } from './health/monitor.js';
import { isAlive } from './runs/liveness.js';
import { GitReader } from './code/git.js';
import { PackageReader } from './code/packages.js';

export interface ServeOptions {
  sidecar: boolean;
  port: number | null;
  host: string;
  allowRemote: boolean;
  /** Sampling interval; 0 turns system metrics off; undefined: LOGD_SAMPLE_INTERVAL_MS. */
  sampleIntervalMs?: number;
  /** The shared store to upload to (a postgres:// URL); undefined: LOGD_UPLOAD_URL; none: no uploading. */
  uploadUrl?: string;
  /** A shell command run when a rank or a job stalls (daemon/health/); undefined: LOGD_ON_STALL. */
  onStall?: string;
}

export { EXIT_ALREADY_RUNNING };

const log = (line: string) => process.stderr.write(`${new Date().toISOString()} ${line}\n`);

function bind(server: grpc.Server, address: string): Promise<number> {
  return new Promise((resolve, reject) =>
    server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (e, port) => (e ? reject(e) : resolve(port))),
  );
}

/** `heldLock`: the lock, taken already by the caller (`logd serve` takes it before loading this module). */
export async function serve(opts: ServeOptions, given: LogdPaths = resolvePaths(), heldLock: DataDirLock | null = null): Promise<void> {
  limitYoungGeneration();
  process.umask(0o077); // everything the daemon creates is private to the user
  const tunables = daemonTunables();
  const upload = uploadTunables(process.env, opts.uploadUrl);
  const startedAt = Date.now() / 1000;
  const lock = heldLock ?? acquireLock(given);
  if (!lock) refuseSecondDaemon(given, log);
  // The socket and service file go only into a directory no other user can write (src/private-dir.ts),
  // moved to the user's state dir when another user took the default one (src/runtime-dir.ts).
  const paths = privateRuntime(given, true);

  const store = Store.open(paths.dataDir, log);
  // Writers' spill files and crash journals go here; it exists before any writer looks for it.
  fs.mkdirSync(paths.spoolDir, { recursive: true, mode: 0o700 });
  // Clients register a stack dump here (daemon/health/stacks.ts); the daemon asks for it when their group stalls.
  const stacksDir = path.join(paths.dataDir, 'stacks');
  fs.mkdirSync(stacksDir, { recursive: true, mode: 0o700 });
  const registry = new Registry(store, tunables, log);
  const gitReader = new GitReader();
  registry.gitFacts = (cwd, withDiff) => gitReader.facts(cwd, withDiff) as Promise<Record<string, unknown> | null>;
  const packageReader = new PackageReader();
  registry.nodePackages = (cwd) => packageReader.list(cwd);
  if (opts.sampleIntervalMs !== 0) registry.system = new SystemMetrics(paths.dataDir, opts.sampleIntervalMs ?? tunables.sampleIntervalMs, log);
  const finaliser = new Finaliser(registry);
  recover(registry, finaliser);
  // A bad upload URL leaves runs local and says so (log, `logd status`); training goes on.
  // Its module (and PostgreSQL's client) loaded only when there is a store to upload to.
  const uploader = upload.url ? (await import('./upload/start.js')).startUploader(uploadFeed(registry), upload, log) : null;
  registry.shared = uploader; // init(resume=...) of a run only the shared store has (docs/shared-store.md)
  // Rank health: which rank stalls or lags a job, judged once a tick from the runs' step progress.
  // Alerts (daemon/alerts/): failed jobs with their story and health events, to the webhooks of the environment.
  const alerts = startAlerts(paths.dataDir, process.env, {
    log, sharedUrl: upload.url ?? null, node: upload.node,
    groupRuns: (project, group) => registry.store.index.list({ project, group, limit: 4096 }).map((r) => registry.runs.get(r.id)?.info() ?? infoFromRow(r)),
    openRuns: () => registry.openRuns().map((r) => ({ id: r.id, name: r.meta.name, project: r.meta.project, group: r.meta.group, lastStep: r.summary.lastStep, createdAt: r.meta.createdAt, lastRowAt: r.progress.lastStepAt, latest: (k: string) => r.latest(k) })),
  });
  if (alerts) {
    registry.finalListeners.push((info) => alerts.runEnded(info));
    registry.userAlert = (info, a) => alerts.userAlert(info, a);
  }
  const health = tunables.healthTickMs > 0
    ? new HealthMonitor(healthView(registry, stacksDir), { tickMs: tunables.healthTickMs, defaults: tunables.health, onStall: opts.onStall ?? tunables.onStall, onStallTimeoutMs: tunables.onStallTimeoutMs, log,
      onEvent: alerts ? (e, project) => alerts.healthEvent(e, project) : undefined })
    : null;
  health?.start();
  if (!upload.url) fs.rmSync(statusFile(paths.dataDir), { force: true }); // a previous daemon's upload status is not ours

  const token = randomBytes(24).toString('hex');
  const addresses: string[] = [];
  raiseHttp2ReceiveWindow();
  const server = new grpc.Server({
    'grpc.max_receive_message_length': tunables.maxMessageBytes,
    'grpc.max_send_message_length': tunables.maxMessageBytes,
    // Clients may ping an idle connection; never punish them for it.
    'grpc.keepalive_permit_without_calls': 1,
    'grpc.http2.min_ping_interval_without_data_ms': 1000,
  });
  let shuttingDown = false;
  const requestShutdown = (why: string) => void shutdown(why);
  server.addService(serviceDefinition, buildService({ registry, finaliser, token, addresses: () => addresses, sidecar: opts.sidecar, startedAt, requestShutdown }));

  fs.rmSync(paths.socketPath, { force: true }); // stale socket of a dead daemon: we hold the lock
  await bind(server, `unix:${paths.socketPath}`);
  fs.chmodSync(paths.socketPath, 0o600);
  addresses.push(`unix:${paths.socketPath}`);
  let tcp: string | null = null;
  if (opts.port !== null) {
    const loopback = opts.host === '127.0.0.1' || opts.host === 'localhost' || opts.host === '::1';
    if (!loopback && !opts.allowRemote) throw new Error(`serve: refusing to listen on ${opts.host}: that exposes logd beyond this machine; add --allow-remote if you mean it`);
    if (!loopback) log(`serve: WARNING: listening on ${opts.host}:${opts.port}, reachable from other machines; every call still needs the token`);
    const hostPart = opts.host.includes(':') ? `[${opts.host}]` : opts.host;
    const port = await bind(server, `${hostPart}:${opts.port}`);
    tcp = `${hostPart}:${port}`;
    addresses.push(tcp);
  }

  const service: ServiceFile = {
    pid: process.pid, version: LOGD_VERSION, socket: `unix:${paths.socketPath}`, tcp, token,
    dataDir: paths.dataDir, sidecar: opts.sidecar, startedAt, procStart: procStartTime(process.pid) ?? undefined,
  };
  writeServiceFile(paths.serviceFile, service);
  // A sidecar's idle time counts from now, when it can first be called, not from when it began to start: one that
  // took seconds to open a large store must not stop before its starter's first call arrives.
  registry.touch();
  log(`server: logd ${LOGD_VERSION} pid ${process.pid} serving ${paths.dataDir} on ${addresses.join(' and ')}${opts.sidecar ? ' (sidecar)' : ''}`);
  warmCodecs(['Hello', 'CreateRun', 'Write', 'SetEnvironment', 'FinishRun']); // while the first client connects

  async function shutdown(why: string): Promise<void> {
    if (shuttingDown) return;
    shuttingDown = true;
    log(`server: stopping (${why}); finalising ${registry.openRuns().length} open run(s)`);
    registry.stopping = why;
    markStopping(paths, why);
    const failsafe = setTimeout(() => {
      log(`server: graceful stop took longer than ${tunables.shutdownTimeoutMs} ms; exiting anyway`);
      process.exit(1);
    }, tunables.shutdownTimeoutMs);
    failsafe.unref();
    health?.stop();
    alerts?.stop(); // what is pending stays on disk: the next daemon sends it
    try {
      await finaliser.killAll(`daemon stopped (${why})`);
      await registry.system?.stop();
      await registry.flushAll(tunables.shutdownTimeoutMs);
    } catch (e) {
      log(`server: error while stopping: ${(e as Error).message}`);
    }
    finaliser.stop();
    await uploader?.stop();
    server.forceShutdown();
    removeServiceFile(paths.serviceFile, process.pid);
    fs.rmSync(paths.ownerFile, { force: true });
    fs.rmSync(paths.socketPath, { force: true });
    store.close();
    lock?.release();
    log('server: stopped');
    process.exit(0);
  }

  let signals = 0;
  for (const sig of ['SIGTERM', 'SIGINT'] as const) {
    process.on(sig, () => {
      signals++;
      if (signals > 1) {
        log(`server: second signal (${sig}); exiting now`);
        process.exit(130);
      }
      void shutdown(sig);
    });
  }

  if (opts.sidecar) {
    // A sidecar leaves once nobody needs it: no open run, no attached writer,
    // no call for idleTimeoutMs, and no upload backlog (for at most
    // LOGD_UPLOAD_DRAIN_MS after the rest went idle: the next daemon resumes it).
    let drainingSince = 0;
    const idle = setInterval(() => {
      const busy = registry.openRuns().length > 0;
      if (busy) {
        registry.touch();
        drainingSince = 0;
        return;
      }
      if (Date.now() - registry.lastActivity <= tunables.idleTimeoutMs) return;
      if (uploader?.hasBacklog) {
        if (drainingSince === 0) {
          drainingSince = Date.now();
          log(`server: sidecar idle; staying up to upload its backlog (at most ${upload.sidecarDrainMs / 1000} s)`);
        }
        if (Date.now() - drainingSince < upload.sidecarDrainMs) return;
        log('server: sidecar gave up draining its upload backlog; the next daemon on this node resumes it');
      }
      void shutdown('sidecar idle');
    }, Math.min(1000, Math.max(50, tunables.idleTimeoutMs / 4)));
    idle.unref();
  }
  // Records stored and runs open: when neither moves, a busy spell is over.
  releaseMemoryWhenQuiet(() => `${registry.recordsStored}/${registry.openRuns().length}`, log);
  // `pip uninstall logd` has no hook to stop the daemons it started: they notice instead.
  stopWhenUninstalled(requestShutdown);
  // The gRPC server keeps the process alive until shutdown.
}

/** Runs that were open when the last daemon stopped come back and wait for their writers. */
function recover(registry: Registry, finaliser: Finaliser): void {
  const { store } = registry;
  const known = new Set<string>();
  const candidates = new Set(store.index.nonFinal().map((r) => r.id));
  for (const id of fs.readdirSync(store.runsDir)) {
    if (!store.index.get(id)) candidates.add(id); // created but never indexed
    known.add(id);
  }
  for (const id of candidates) {
    if (!known.has(id) || !store.exists(id)) continue;
    try {
      const { run: r, log: rlog } = store.replay(id, true);
      const run = new LiveRun(r.meta, rlog!, r.keys, r.summary, r.userSummary, r.config);
      run.attempts = r.attempts;
      run.media = r.media;
      if (r.final) {
        run.state = r.final.state;
        run.reason = r.final.reason;
        run.exitCode = r.final.exitCode;
        run.finishedAt = r.final.finishedAt;
        store.index.upsert(rowFromLive(run));
        rlog!.close();
        continue;
      }
      for (const w of r.writers) if (w) run.restoreWriter(w, r.maxSeq[w.idx] ?? 0);
      registry.runs.set(id, run);
      registry.adopt(run);
      store.index.upsert(rowFromLive(run));
      finaliser.armRecoveryTimer(run);
      log(`store: recovered open run ${id} (${r.summary.rows} rows); waiting for its writers`);
    } catch (e) {
      log(`store: could not recover run ${id}: ${(e as Error).message}`);
    }
  }
  ingestAllSpool(registry, finaliser.finaliseRun);
  ingestAllJournals(registry); // writers that died with the last daemon: every row their log() accepted
}

/** The health monitor's view of the open runs: group, rank, the owner's process, step progress. */
function healthView(reg: Registry, stacksDir: string): HealthView {
  return {
    stacksDir,
    storageProblem: () => reg.storageProblem,
    runs: () => [...reg.runs.values()].map((run) => {
      const owner = run.writers.get(run.meta.ownerWriterId) ?? run.writerList.find(Boolean);
      const local = owner?.local ?? false;
      const startTicks = local ? owner!.startTime : null;
      const final = run.final || run.state === 'finishing';
      return {
        id: run.id, project: run.meta.project, group: run.meta.group, rank: run.meta.rank?.rank ?? null,
        host: run.meta.host, pid: run.meta.pid, startTicks,
        alive: !final && (!local || isAlive(run.meta.pid, startTicks)),
        ended: run.final ? { state: run.state, at: run.finishedAt, reason: run.reason } : null,
        progress: run.progress, config: run.config,
        setHealth: (h, changed) => {
          run.health = h;
          if (changed && !run.final) {
            try {
              reg.store.index.upsert(rowFromLive(run));
            } catch {
              /* the index is unwritable now: the next update carries it */
            }
          }
        },
      };
    }),
    finalOf: (id) => {
      const row = reg.store.index.get(id);
      return row && row.state !== 'running' ? { state: row.state, at: row.finished_at, reason: row.state_reason } : null;
    },
  };
}

/** The uploader's view of this daemon's runs: open ones through the registry (their durable length moves), the rest through the index. */
function uploadFeed(reg: Registry): DaemonRuns {
  return new DaemonRuns(reg.store.runsDir, reg.store.dataDir, reg.store.index, {
    durableBytes: (id) => {
      const live = reg.runs.get(id);
      return live && !live.log.closed ? live.log.durableBytes : null;
    },
    historyRows: (id) => reg.runs.get(id)?.summary.rows ?? null,
    mode: (id) => reg.runs.get(id)?.meta.mode ?? null,
    row: (id) => {
      const live = reg.runs.get(id);
      return live ? rowFromLive(live) : null;
    },
    continued: (id) => reg.continued.delete(id),
  });
}
