// Reaching the daemon for init() and attach() through whatever happens to it
// meanwhile: killed and restarted, replaced by a sidecar, a zombie, stopped,
// or named by a stale LOGD_SERVICE. A call is tried again (on the daemon
// found anew) until the deadline: LOGD_CALL_TIMEOUT_MS + LOGD_START_TIMEOUT_MS
// in all, 20 s by default. The calls made through here are idempotent
// (CreateRun carries a client-chosen id and key, AttachRun a writer id), so a
// retry after a timeout never makes a second run. When time runs out, the
// promise rejects with a DaemonUnavailableError that says what was tried.
import { clientTunables } from '../src/config.js';
import type { ServiceAddress } from '../src/wire.js';
import { connectionFor, CallError, type Connection } from './connection.js';
import { findDaemon, DaemonStartError } from './discovery.js';
import { envService, showsStale, warnStale } from './stale-service.js';

export class DaemonUnavailableError extends Error {
  override name = 'DaemonUnavailableError';
  constructor(message: string, override readonly cause: unknown) {
    super(message);
  }
}

const UNAVAILABLE = 14;
const DEADLINE_EXCEEDED = 4;
const UNAUTHENTICATED = 16;

/** Failures that another try (on the daemon found anew) may cure. */
function retriable(e: unknown): boolean {
  if (e instanceof DaemonStartError) return e.transient; // no daemon yet (waiting for a restart), or a start race lost
  return e instanceof CallError && (e.code === UNAVAILABLE || e.code === DEADLINE_EXCEEDED || e.code === UNAUTHENTICATED);
}

/**
 * Runs `fn` against `first` (default: LOGD_SERVICE, else the daemon found as
 * usual) and, while it fails in a way a restart explains, against the daemon
 * found anew. Returns the answer and the address that gave it.
 */
export async function withDaemon<T>(what: string, fn: (c: Connection, timeoutMs: number) => Promise<T>, first?: ServiceAddress): Promise<{ value: T; address: ServiceAddress }> {
  const t = clientTunables();
  const budget = t.callTimeoutMs + t.startTimeoutMs;
  const deadline = Date.now() + budget;
  const fromEnv = first ? null : envService();
  let address: ServiceAddress | null = first ?? fromEnv;
  let lastError: unknown = null;
  let tries = 0;
  let backoff = 50;
  for (;;) {
    tries++;
    try {
      address ??= await findDaemon({ ignoreEnv: true });
      const left = deadline - Date.now();
      return { value: await fn(connectionFor(address), Math.max(1, Math.min(t.callTimeoutMs, left))), address };
    } catch (e) {
      if (!retriable(e)) throw e;
      lastError = e;
      if (fromEnv && address === fromEnv && showsStale(e)) warnStale(fromEnv, e);
    }
    if (Date.now() + backoff >= deadline) break;
    await new Promise((r) => setTimeout(r, backoff));
    backoff = Math.min(backoff * 2, 500);
    address = null; // look again: the daemon may have been restarted, replaced or started by someone else
  }
  const why = lastError instanceof Error ? lastError.message : String(lastError);
  throw new DaemonUnavailableError(
    `${what}: no logd daemon answered within ${budget} ms (${tries} tries; last: ${why}). ` +
      'Check `logd status`; start one with `logd serve`, or raise LOGD_START_TIMEOUT_MS / LOGD_CALL_TIMEOUT_MS',
    lastError,
  );
}
