// Finding the daemon: LOGD_SERVICE first (inherited from the process that
// started the job), then the service file of this data dir, then, when
// allowed, starting a sidecar daemon and waiting for it with a deadline.
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { resolvePaths, clientTunables, daemonTunables, type LogdPaths } from '../src/config.js';
import { parseServiceAddress, formatServiceAddress, type ServiceAddress } from '../src/wire.js';
import { readServiceFile, serviceAlive, liveOwner, stoppedAt, stopMarker } from '../src/service-file.js';
import { privateRuntime } from '../src/runtime-dir.js';
import { untrustedDirReason } from '../src/private-dir.js';

export class DaemonStartError extends Error {
  override name = 'DaemonStartError';
  /** True when a later look may succeed (no daemon yet, or another one is taking over); false when the start itself failed. */
  constructor(message: string, readonly transient = false) {
    super(message);
  }
}

const EXIT_ALREADY_RUNNING = 3;
/** The `logd` command's entry point beside the client (dist/daemon/cli.js; the bundled client sits in dist/client too). */
export const cliPath = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'daemon', 'cli.js');

/**
 * The daemon that serves this data dir: the one named by the service file in the runtime dir privateRuntime()
 * picks (the fallback when another user took the default), else the one the data dir's owner file names,
 * wherever it serves from. A daemon started while another user squatted the default runtime dir, or by a
 * process with another XDG_RUNTIME_DIR or LOGD_RUNTIME_DIR, still holds the data dir: every process of the
 * user must find it, or it would try to start a second one and be refused. Throws UntrustedDirError when no
 * runtime dir is private to the user.
 */
export function fromServiceFile(paths: LogdPaths): ServiceAddress | null {
  const rt = privateRuntime(paths, false);
  const s = readServiceFile(rt.serviceFile);
  if (s && serviceAlive(s)) return { target: s.socket, token: s.token };
  return fromOwnerFile(paths, rt.runtimeDir);
}

/**
 * The daemon that holds the data dir's lock, from the owner file it wrote as it took it, when it serves from a
 * runtime dir other than `looked` (already looked at). Only a runtime dir private to this user is read (the
 * same trust a default one needs), and only a service file of the very daemon that owns the lock, for this data dir.
 */
function fromOwnerFile(paths: LogdPaths, looked: string): ServiceAddress | null {
  const owner = liveOwner(paths.ownerFile);
  if (!owner || path.resolve(owner.runtimeDir) === path.resolve(looked)) return null;
  if (!fs.existsSync(owner.runtimeDir) || untrustedDirReason(owner.runtimeDir) !== null) return null;
  const s = readServiceFile(path.join(owner.runtimeDir, 'service.json'));
  if (!s || s.pid !== owner.pid || path.resolve(s.dataDir) !== path.resolve(paths.dataDir) || !serviceAlive(s)) return null;
  return { target: s.socket, token: s.token };
}

/** A Unix socket's file exists (the daemon listens); a TCP address is taken as it is. */
function socketReady(addr: ServiceAddress): boolean {
  return !addr.target.startsWith('unix:') || fs.existsSync(addr.target.slice('unix:'.length));
}

/**
 * The daemon to use. `ignoreEnv`: LOGD_SERVICE proved unreachable, look again.
 * Exports LOGD_SERVICE so that children inherit the answer.
 */
/** Sidecar starts under way in this process (findDaemon), by data dir. */
const starting = new Map<string, Promise<ServiceAddress>>();

export async function findDaemon(opts: { ignoreEnv?: boolean; autoStart?: boolean; reader?: boolean } = {}): Promise<ServiceAddress> {
  const t = clientTunables();
  if (t.service && !opts.ignoreEnv) return parseServiceAddress(t.service);
  const paths = resolvePaths();
  let addr = fromServiceFile(paths);
  if (!addr) {
    if (!(opts.autoStart ?? t.autoStart)) {
      throw new DaemonStartError(`no logd daemon is running for ${paths.dataDir}; start one with \`logd serve\` (or unset LOGD_NO_AUTOSTART)`, true);
    }
    // A reader (the dashboard, `logd runs`) does not undo `logd stop`: only a trainer or `logd serve` does.
    const stopped = opts.reader ? stoppedAt(paths.dataDir) : null;
    if (stopped !== null) {
      throw new DaemonStartError(`the logd daemon of ${paths.dataDir} was stopped with \`logd stop\` at ${new Date(stopped).toISOString()} and stays stopped until a trainer starts one or you run \`logd serve\``, true);
    }
    // Calls of this process that find no daemon at once (a dashboard's requests) share one start.
    let start = starting.get(paths.dataDir);
    if (!start) {
      start = startSidecar(paths, t.startTimeoutMs).finally(() => starting.delete(paths.dataDir));
      starting.set(paths.dataDir, start);
    }
    addr = await start;
  }
  process.env.LOGD_SERVICE = formatServiceAddress(addr);
  return addr;
}

function tail(file: string, bytes = 2000): string {
  try {
    const s = fs.readFileSync(file, 'utf8');
    return s.slice(-bytes).trim();
  } catch {
    return '(no daemon log)';
  }
}

/** Starts a detached daemon (its own session) and waits for its service file. */
export async function startSidecar(given: LogdPaths, timeoutMs: number): Promise<ServiceAddress> {
  // The sidecar gets the runtime dir chosen here (LOGD_RUNTIME_DIR), so it never chooses another.
  const paths = privateRuntime(given, true);
  const logStart = fs.existsSync(paths.daemonLog) ? fs.statSync(paths.daemonLog).size : 0;
  const env: NodeJS.ProcessEnv = { ...process.env, LOGD_DIR: paths.dataDir, LOGD_RUNTIME_DIR: paths.runtimeDir };
  delete env.LOGD_SERVICE;
  // node:child_process loads only here: most processes find a daemon running.
  const { spawn } = createRequire(import.meta.url)('node:child_process') as typeof import('node:child_process');
  let exitCode: number | null = null;
  const launch = () => {
    const logFd = fs.openSync(paths.daemonLog, 'a', 0o600);
    const child = spawn(process.execPath, [cliPath, 'serve', '--sidecar'], { detached: true, stdio: ['ignore', logFd, logFd], env });
    fs.closeSync(logFd);
    child.unref();
    exitCode = null;
    child.once('exit', (code, signal) => (exitCode = code ?? (signal ? 128 : 1)));
    child.once('error', () => (exitCode = 127));
  };
  // A trainer needs a daemon: `logd stop` is undone (readers start one again too from now on).
  try {
    fs.rmSync(stopMarker(paths.dataDir), { force: true });
  } catch {
    /* a data dir that is no directory: the daemon's start says what is wrong */
  }
  launch();
  let relaunches = 0;
  let startedAt = Date.now();
  let deadline = startedAt + timeoutMs;
  // A daemon that is stopping (finalising and sealing its runs; at most its stop deadline) hands the data dir to the
  // one started here, which waits for the lock (daemon/process/lock.ts): wait that long on top.
  const handoverCap = startedAt + timeoutMs + daemonTunables().shutdownTimeoutMs + 2000;
  let lastOwnerLook = 0;
  while (Date.now() < deadline) {
    if (Date.now() - lastOwnerLook > 250) {
      lastOwnerLook = Date.now();
      if (liveOwner(paths.ownerFile)?.stopping) deadline = Math.min(handoverCap, Math.max(deadline, Date.now() + 2000));
    }
    const addr = fromServiceFile(paths);
    if (addr && socketReady(addr)) return addr;
    if (exitCode !== null && exitCode !== EXIT_ALREADY_RUNNING) {
      const log = fs.readFileSync(paths.daemonLog, 'utf8').slice(logStart).trim() || tail(paths.daemonLog);
      throw new DaemonStartError(`the logd daemon exited with code ${exitCode} while starting:\n${log}\n(full log: ${paths.daemonLog})`);
    }
    if (exitCode === EXIT_ALREADY_RUNNING) {
      // Lost the start race. The winner named itself in the owner file as it took the lock: while it lives, it is
      // starting (on a loaded node that takes seconds), here or in another private runtime dir (fromServiceFile
      // finds it there), so wait for it rather than start another. One whose runtime dir this user cannot trust,
      // or none known after 2 s: say so.
      const owner = liveOwner(paths.ownerFile);
      const elsewhere = owner !== null && owner.runtimeDir !== paths.runtimeDir && untrustedDirReason(owner.runtimeDir) !== null;
      // The daemon it lost to is gone without serving (it was stopping, or died starting): start one again.
      if (owner === null && !fromServiceFile(paths) && relaunches < 3 && Date.now() - startedAt > 100) {
        relaunches++;
        startedAt = Date.now();
        launch();
        continue;
      }
      if (elsewhere || (owner === null && Date.now() - startedAt > 2000)) {
        const log = fs.readFileSync(paths.daemonLog, 'utf8').slice(logStart).trim();
        throw new DaemonStartError(`${log || 'another logd daemon serves this data dir'}${elsewhere ? ` (from the runtime dir ${owner.runtimeDir}; give this process LOGD_RUNTIME_DIR=${owner.runtimeDir})` : ''}\n(full log: ${paths.daemonLog})`, true);
      }
    }
    await new Promise((r) => setTimeout(r, exitCode === EXIT_ALREADY_RUNNING ? 10 : 5));
  }
  // Transient when the winner of the start race still lives: it is slow to start, and a later look may find it.
  const starting = exitCode === EXIT_ALREADY_RUNNING && liveOwner(paths.ownerFile) !== null;
  throw new DaemonStartError(`the logd daemon did not come up within ${timeoutMs} ms (raise LOGD_START_TIMEOUT_MS, or start it with \`logd serve\`); its log says:\n${tail(paths.daemonLog)}`, starting);
}
