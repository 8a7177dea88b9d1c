// The shared source: the PostgreSQL store that every node's uploader fills.
import type { QuerySource } from './source.js';

export async function openSharedSource(_url: string): Promise<QuerySource> {
  throw new Error('reading a shared store (--store, LOGD_STORE_URL) is not available in this build of logd; unset LOGD_STORE_URL and drop --store to read the local store');
}
