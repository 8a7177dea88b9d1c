// Opens the source a reader asked for: `--store URL` (or LOGD_STORE_URL) reads
// the shared PostgreSQL store; otherwise the node's local store through its daemon.
import { resolvePaths } from '../../src/config.js';
import { findDaemon } from '../../client/discovery.js';
import type { QuerySource } from './source.js';
import { LocalSource } from './local.js';

export * from './source.js';

export interface OpenOptions {
  /** A postgres:// URL; empty or missing: LOGD_STORE_URL, then the local store. */
  store?: string;
}

export async function openSource(opts: OpenOptions = {}): Promise<QuerySource> {
  const url = opts.store || process.env.LOGD_STORE_URL || '';
  if (url) {
    const { openSharedSource } = await import('./shared.js');
    return openSharedSource(url);
  }
  return new LocalSource(await findDaemon(), `the local store (${resolvePaths().dataDir})`);
}
