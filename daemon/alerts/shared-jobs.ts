// A job spread over nodes, seen from the shared store (docs/alerts.md "Several nodes"): every node's daemon that
// sees one of its ranks fail reads the job's runs from the shared PostgreSQL store, waits until none of them is
// open there (or the story's wait is over), and claims the job's alert in the table logd_alert_claims. The one
// whose INSERT lands sends it, with the story of every node's ranks; the others say who did. The key is the job's
// first run (its earliest, from the store), which every node finds alike once the job's runs are uploaded.
import pg from 'pg';
import type { RunInfo } from '../../src/wire.js';
import { parseStoreUrl, redact, type StoreUrl } from '../upload/url.js';
import { pgOptions } from '../upload/pgpass.js';
import { SharedSource } from '../query/shared.js';

const TABLE = `CREATE TABLE IF NOT EXISTS logd_alert_claims (key text PRIMARY KEY, node text NOT NULL, claimed_at timestamptz NOT NULL DEFAULT now())`;
/** How many runs of one group are read (a group of 1 000 ranks over 128 nodes fits). */
const GROUP_RUNS = 4096;

export interface SharedJobs {
  /** The group's runs in the shared store, every node's. */
  groupRuns(project: string, group: string): Promise<RunInfo[]>;
  /** Claims `key` for this node: true when this node is the first; else the node that was. */
  claim(key: string): Promise<{ won: boolean; by: string }>;
  close(): Promise<void>;
}

export class PgSharedJobs implements SharedJobs {
  private readonly url: StoreUrl;
  private readonly pool: pg.Pool;
  private readonly source: SharedSource;
  private made = false;

  constructor(rawUrl: string, private readonly node: string) {
    this.url = parseStoreUrl(rawUrl);
    this.pool = new pg.Pool(pgOptions(this.url, { max: 1, connectionTimeoutMillis: 10_000, application_name: 'logd alerts', allowExitOnIdle: true }));
    this.pool.on('error', () => {});
    this.source = new SharedSource(this.url);
  }

  async groupRuns(project: string, group: string): Promise<RunInfo[]> {
    try {
      return (await this.source.listRuns({ project, group, limit: GROUP_RUNS })).runs;
    } catch (e) {
      throw new Error(redact((e as Error).message, this.url));
    }
  }

  async claim(key: string): Promise<{ won: boolean; by: string }> {
    try {
      if (!this.made) {
        await this.pool.query(TABLE);
        this.made = true;
      }
      const got = await this.pool.query<{ node: string }>('INSERT INTO logd_alert_claims (key, node) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING RETURNING node', [key, this.node]);
      if (got.rows.length) return { won: true, by: this.node };
      const held = await this.pool.query<{ node: string }>('SELECT node FROM logd_alert_claims WHERE key = $1', [key]);
      return { won: false, by: held.rows[0]?.node ?? 'another node' };
    } catch (e) {
      throw new Error(redact((e as Error).message, this.url));
    }
  }

  async close(): Promise<void> {
    await Promise.all([this.pool.end().catch(() => {}), this.source.close().catch(() => {})]);
  }
}
