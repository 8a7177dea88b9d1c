// The one place that reads environment variables. Every tunable has a default
// here and is documented in the README's "Environment" table.
import os from 'node:os';
import path from 'node:path';
import { createHash } from 'node:crypto';
import { HEALTH_DEFAULTS, type HealthThresholds } from './health.js';

export interface LogdPaths {
  /** Durable store: run logs, the SQLite index, spill files. */
  dataDir: string;
  /** Private per-user, per-data-dir directory (0700): socket, service file, sidecar log. */
  runtimeDir: string;
  socketPath: string;
  serviceFile: string;
  daemonLog: string;
  /** The per-user parent of a default runtime dir (tightened to 0700); null when LOGD_RUNTIME_DIR is set. */
  runtimeParent: string | null;
  /**
   * Where the runtime dir goes instead when another user holds the default one
   * (src/runtime-dir.ts): under the user's own state dir, one per host; null when LOGD_RUNTIME_DIR is set.
   */
  runtimeFallback: string | null;
  /** Where the daemon that holds the lock says which runtime dir it serves on. */
  ownerFile: string;
  spoolDir: string;
}

function envInt(env: NodeJS.ProcessEnv, name: string, dflt: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return dflt;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0) {
    throw new Error(`config: ${name}=${JSON.stringify(raw)} is not a non-negative number; unset it or set e.g. ${name}=${dflt}`);
  }
  return n;
}

export function resolvePaths(env: NodeJS.ProcessEnv = process.env): LogdPaths {
  const home = os.homedir();
  const dataHome = env.XDG_DATA_HOME || path.join(home, '.local', 'share');
  const dataDir = path.resolve(env.LOGD_DIR || path.join(dataHome, 'logd'));
  const uid = typeof process.getuid === 'function' ? process.getuid() : 0;
  // One daemon per (user, data dir): the runtime dir is keyed by the data dir so
  // two jobs with different LOGD_DIRs never share a daemon by accident. Kept
  // short because a Unix socket path is limited to 107 bytes.
  const key = createHash('sha256').update(dataDir).digest('hex').slice(0, 12);
  const runtimeBase = env.XDG_RUNTIME_DIR && env.XDG_RUNTIME_DIR.length < 60 ? env.XDG_RUNTIME_DIR : os.tmpdir();
  const runtimeParent = env.LOGD_RUNTIME_DIR ? null : path.join(runtimeBase, `logd-${uid}`);
  const runtimeDir = path.resolve(env.LOGD_RUNTIME_DIR || path.join(runtimeParent!, key));
  return {
    dataDir,
    runtimeDir,
    ...runtimeFiles(runtimeDir),
    spoolDir: path.join(dataDir, 'spool'),
    runtimeParent,
    runtimeFallback: env.LOGD_RUNTIME_DIR ? null : fallbackRuntimeDir(env, home, key),
    ownerFile: path.join(dataDir, 'daemon.json'),
  };
}

/** What lives in a runtime dir. */
export function runtimeFiles(runtimeDir: string): Pick<LogdPaths, 'socketPath' | 'serviceFile' | 'daemonLog'> {
  return {
    socketPath: path.join(runtimeDir, 'logd.sock'),
    serviceFile: path.join(runtimeDir, 'service.json'),
    daemonLog: path.join(runtimeDir, 'daemon.log'),
  };
}

/**
 * `$XDG_STATE_HOME/logd/run-<host>/<key>` (else `~/.local/state/…`): no other
 * user can create it, and every process of this user on this host computes
 * the same one. The host keeps nodes that share a home apart; it becomes a
 * hash when the socket path would pass the 107 bytes a Unix socket allows.
 */
function fallbackRuntimeDir(env: NodeJS.ProcessEnv, home: string, key: string): string {
  const stateHome = env.XDG_STATE_HOME && path.isAbsolute(env.XDG_STATE_HOME) ? env.XDG_STATE_HOME : path.join(home, '.local', 'state');
  const host = os.hostname();
  const dir = path.resolve(stateHome, 'logd', `run-${host}`, key);
  if (Buffer.byteLength(path.join(dir, 'logd.sock')) <= 107) return dir;
  return path.resolve(stateHome, 'logd', `run-${createHash('sha256').update(host).digest('hex').slice(0, 12)}`, key);
}

export interface DaemonTunables {
  /** A sidecar exits after this long with no clients and no open runs. */
  idleTimeoutMs: number;
  /** How long a run whose owner vanished may wait for it to re-attach before it is `crashed`. */
  crashGraceMs: number;
  /** How often the daemon looks at its local run owners' processes, so that one that died is seen with its exit status (issue 34); 0: only with the 500 ms liveness check. */
  exitWatchMs: number;
  /** After a daemon restart, how long recovered open runs wait for their writers. */
  recoveryGraceMs: number;
  /**
   * An owner on another host (not watched by pid) that sent nothing for this
   * long, not even its client's keep-alive, is gone: its run is `crashed`.
   */
  ownerLeaseMs: number;
  /** Default wait of an owner's finish for other writers. */
  finishTimeoutMs: number;
  /** Graceful shutdown deadline (SIGTERM), after which the daemon exits anyway. */
  shutdownTimeoutMs: number;
  /** Largest message the daemon accepts. */
  maxMessageBytes: number;
  /** System-metric sampling interval. */
  sampleIntervalMs: number;
  /** Rank health (daemon/health/): how often groups are judged (0: off), the default thresholds, the --on-stall command. */
  healthTickMs: number;
  health: HealthThresholds;
  onStall: string | null;
  onStallTimeoutMs: number;
}

export function daemonTunables(env: NodeJS.ProcessEnv = process.env): DaemonTunables {
  return {
    idleTimeoutMs: envInt(env, 'LOGD_IDLE_TIMEOUT_MS', 15_000),
    crashGraceMs: envInt(env, 'LOGD_CRASH_GRACE_MS', 3_000),
    exitWatchMs: envInt(env, 'LOGD_EXIT_WATCH_MS', 50),
    recoveryGraceMs: envInt(env, 'LOGD_RECOVERY_GRACE_MS', 10_000),
    ownerLeaseMs: envInt(env, 'LOGD_OWNER_LEASE_MS', 60_000),
    finishTimeoutMs: envInt(env, 'LOGD_FINISH_TIMEOUT_MS', 10_000),
    shutdownTimeoutMs: envInt(env, 'LOGD_SHUTDOWN_TIMEOUT_MS', 10_000),
    maxMessageBytes: envInt(env, 'LOGD_MAX_MESSAGE_MB', 64) * 1024 * 1024,
    sampleIntervalMs: envInt(env, 'LOGD_SAMPLE_INTERVAL_MS', 2_000),
    healthTickMs: envInt(env, 'LOGD_HEALTH_TICK_MS', 1_000),
    health: {
      ...HEALTH_DEFAULTS,
      stallK: envInt(env, 'LOGD_HEALTH_STALL_K', HEALTH_DEFAULTS.stallK),
      stallFloorS: envInt(env, 'LOGD_HEALTH_STALL_FLOOR_S', HEALTH_DEFAULTS.stallFloorS),
      stragglerPct: envInt(env, 'LOGD_HEALTH_STRAGGLER_PCT', HEALTH_DEFAULTS.stragglerPct),
      windowSteps: envInt(env, 'LOGD_HEALTH_WINDOW_STEPS', HEALTH_DEFAULTS.windowSteps),
    },
    onStall: env.LOGD_ON_STALL || null,
    onStallTimeoutMs: envInt(env, 'LOGD_ON_STALL_TIMEOUT_MS', 10_000),
  };
}

export interface ClientTunables {
  /** Explicit daemon to use: `unix:/path#token` or `host:port#token`. */
  service: string | null;
  mode: 'online' | 'offline' | 'disabled' | null;
  /** Background flush period while records are pending. */
  flushIntervalMs: number;
  /** Unacknowledged data kept in memory before spilling to disk. */
  maxBufferBytes: number;
  /** Size of each writer's crash journal (docs/journal.md); 0 turns it off. */
  journalMb: number;
  /** While runs are open, the client tells its daemon it lives this often (a Hello): an owner on another host is judged by it. */
  keepaliveMs: number;
  /** How long a client waits for an auto-started daemon. */
  startTimeoutMs: number;
  /** Deadline of unary calls. */
  callTimeoutMs: number;
  /** Whether a client may auto-start a sidecar daemon when none answers. */
  autoStart: boolean;
  /** LOGD_CONSOLE=0 turns off console capture in every init() (docs/api.md, "Console output"). */
  console: boolean;
}

export function clientTunables(env: NodeJS.ProcessEnv = process.env): ClientTunables {
  const mode = env.LOGD_MODE || null;
  if (mode !== null && mode !== 'online' && mode !== 'offline' && mode !== 'disabled') {
    throw new Error(`config: LOGD_MODE=${JSON.stringify(mode)} must be online, offline or disabled`);
  }
  return {
    service: env.LOGD_SERVICE || null,
    mode,
    flushIntervalMs: envInt(env, 'LOGD_FLUSH_INTERVAL_MS', 200),
    maxBufferBytes: envInt(env, 'LOGD_MAX_BUFFER_MB', 64) * 1024 * 1024,
    // 64: a 56 MiB journal spared a fresh process one garbage collection in its first init() (V8 counts the
    // mapping as external memory; 0.3-2.6 ms), but its smaller ring let a full-speed writer outrun a lagging
    // daemon past the journal in the kill matrix (test/journal/kill.test.ts failed 2 runs in 6). Rows first.
    journalMb: envInt(env, 'LOGD_JOURNAL_MB', 64),
    keepaliveMs: envInt(env, 'LOGD_KEEPALIVE_MS', 15_000),
    startTimeoutMs: envInt(env, 'LOGD_START_TIMEOUT_MS', 10_000),
    callTimeoutMs: envInt(env, 'LOGD_CALL_TIMEOUT_MS', 10_000),
    autoStart: env.LOGD_NO_AUTOSTART !== '1',
    console: env.LOGD_CONSOLE !== '0',
  };
}

/** The torchrun environment: -1 where a variable is not set. */
export interface RankEnv { rank: number; localRank: number; worldSize: number; nodeRank: number; localWorldSize: number }

export function rankEnv(env: NodeJS.ProcessEnv = process.env): RankEnv {
  const int = (v: string | undefined) => (v !== undefined && /^\d+$/.test(v) ? Number(v) : -1);
  return {
    rank: int(env.RANK),
    localRank: int(env.LOCAL_RANK),
    worldSize: int(env.WORLD_SIZE),
    nodeRank: int(env.GROUP_RANK ?? env.NODE_RANK),
    localWorldSize: int(env.LOCAL_WORLD_SIZE),
  };
}

export const PROTOCOL_VERSION = 1;
/** package.json's version, written into src/version.ts by packaging/sync-version.mjs. */
export { LOGD_VERSION } from './version.js';

export interface UploadTunables {
  /** Where the uploader copies runs: a postgres:// URL; null: uploading is off. */
  url: string | null;
  /** This node's name in the shared store: LOGD_NODE, else the hostname. */
  node: string;
  /** How long a sidecar with nothing else to do stays up to drain its upload backlog. */
  sidecarDrainMs: number;
  /** How often the uploader looks for newly durable records. */
  pollMs: number;
  /** The longest wait between two tries while the store is unreachable (backoff starts at 500 ms). */
  backoffMaxMs: number;
  /** Log bytes per upload transaction. */
  sliceBytes: number;
  /** The longest init(resume=...) waits for the shared store when it continues a run this node does not have (below the client's call deadline). */
  resumeStoreTimeoutMs: number;
  /** A run the store shows running whose node uploaded nothing for this long may be continued elsewhere (that node is taken for gone). */
  takeoverAfterMs: number;
  /** The share of wall time the daemon's uploader may be busy (1-100): it yields the rest to ingest. */
  dutyPercent: number;
}

export function uploadTunables(env: NodeJS.ProcessEnv = process.env, url?: string): UploadTunables {
  return {
    url: url || env.LOGD_UPLOAD_URL || null,
    node: env.LOGD_NODE || os.hostname(),
    sidecarDrainMs: envInt(env, 'LOGD_UPLOAD_DRAIN_MS', 600_000),
    pollMs: envInt(env, 'LOGD_UPLOAD_POLL_MS', 250),
    backoffMaxMs: envInt(env, 'LOGD_UPLOAD_BACKOFF_MAX_MS', 60_000),
    sliceBytes: envInt(env, 'LOGD_UPLOAD_SLICE_MB', 32) * 1024 * 1024,
    dutyPercent: Math.min(100, Math.max(1, envInt(env, 'LOGD_UPLOAD_DUTY_PERCENT', 50))),
    resumeStoreTimeoutMs: envInt(env, 'LOGD_RESUME_STORE_TIMEOUT_MS', 5000),
    takeoverAfterMs: envInt(env, 'LOGD_TAKEOVER_AFTER_S', 3600) * 1000,
  };
}
