// Opens the source a reader asked for: `--store URL` (or LOGD_STORE_URL) reads
// the shared PostgreSQL store; otherwise the node's local store through its daemon.
import { resolvePaths } from '../../src/config.js';
import { checkedDaemon } from '../../client/stale-service.js';
import type { QuerySource } from './source.js';
import { LocalSource } from './local.js';

export * from './source.js';

export interface OpenOptions {
  /** A postgres:// URL; empty or missing: LOGD_STORE_URL, then the local store. */
  store?: string;
  /** The node's store even when LOGD_STORE_URL is set (commands that change runs name the shared store explicitly). */
  localOnly?: boolean;
  /** Told when the local source's daemon went away and a new one is looked for (the dashboard logs it). */
  onReconnect?: (line: string) => void;
}

export async function openSource(opts: OpenOptions = {}): Promise<QuerySource> {
  const url = opts.store || (opts.localOnly ? '' : process.env.LOGD_STORE_URL) || '';
  if (url) {
    const { openSharedSource } = await import('./shared.js');
    return openSharedSource(url);
  }
  // A stale LOGD_SERVICE (a daemon since gone or restarted) is reported once and passed over.
  const addr = await checkedDaemon({ timeoutMs: 5_000, reader: true });
  return new LocalSource(addr!, `the local store (${resolvePaths().dataDir})`, opts.onReconnect);
}
