// An inherited LOGD_SERVICE can outlive its daemon: a launcher exported it,
// the daemon died (or was restarted with a new token), and every process
// started later still carries it. Such an address is recognised by how a
// call to it fails; the client and the CLI then fall back to discovery (and
// auto-start), and say so once on stderr.
import { clientTunables } from '../src/config.js';
import { parseServiceAddress, type ServiceAddress } from '../src/wire.js';
import { CallError, connectionFor } from './connection.js';
import { findDaemon } from './discovery.js';
import { PROTOCOL_VERSION } from '../src/config.js';

const UNAVAILABLE = 14;
const UNAUTHENTICATED = 16;

/** The address LOGD_SERVICE names, or null when it is unset. */
export function envService(): ServiceAddress | null {
  const s = clientTunables().service;
  return s ? parseServiceAddress(s) : null;
}

/** True when `e`, from a call to `addr`, shows that addr is not (or no longer) a daemon that takes our token. */
export function showsStale(e: unknown): boolean {
  return e instanceof CallError && (e.code === UNAVAILABLE || e.code === UNAUTHENTICATED);
}

let warned = false;

/** Says once per process that LOGD_SERVICE was stale, and why. */
export function warnStale(addr: ServiceAddress, e: unknown): void {
  if (warned) return;
  warned = true;
  const why = e instanceof CallError && e.code === UNAUTHENTICATED ? 'the daemon there refuses its token (it was restarted)' : 'no daemon answers there';
  process.stderr.write(`logd: LOGD_SERVICE (${addr.target}) is stale: ${why}; using the daemon of this data dir instead (found or started anew, and exported to child processes)\n`);
}

/**
 * For the CLI: the daemon to use, checked with a Hello when it comes from
 * LOGD_SERVICE. A stale one is reported and replaced through discovery
 * (which may start a sidecar when `autoStart`); null when none runs and none
 * may be started.
 */
export async function checkedDaemon(opts: { autoStart?: boolean; timeoutMs: number; reader?: boolean }): Promise<ServiceAddress | null> {
  const env = envService();
  if (env) {
    try {
      await connectionFor(env).unary('hello', { protocolVersion: PROTOCOL_VERSION }, opts.timeoutMs);
      return env;
    } catch (e) {
      if (!showsStale(e)) throw e;
      warnStale(env, e);
    }
  }
  try {
    return await findDaemon({ ignoreEnv: true, autoStart: opts.autoStart, reader: opts.reader });
  } catch (e) {
    if (opts.autoStart === false) return null;
    throw e;
  }
}
