// Saved views of the shared store: the table logd_views in its database,
// made on the first save (the dashboard's role needs CREATE there, or an
// administrator makes it: docs/dashboard.md). Reading views never writes.
import pg from 'pg';
import type { StoreUrl } from '../upload/url.js';
import { pgOptions } from '../upload/pgpass.js';
import { redact } from '../upload/url.js';
import { BadView, MAX_VIEWS, type SavedView, type ViewStore } from './views.js';

const TABLE = `CREATE TABLE IF NOT EXISTS logd_views (name text PRIMARY KEY, url text NOT NULL, saved_at timestamptz NOT NULL DEFAULT now())`;

export class SharedViews implements ViewStore {
  readonly where: string;
  private readonly pool: pg.Pool;

  constructor(private readonly url: StoreUrl) {
    this.where = `the table logd_views of ${url.shown}`;
    this.pool = new pg.Pool(pgOptions(url, { max: 2, connectionTimeoutMillis: 15_000, application_name: 'logd ui views', allowExitOnIdle: true }));
    this.pool.on('error', () => {});
  }

  private async query<T extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<pg.QueryResult<T>> {
    try {
      return await this.pool.query<T>(text, values);
    } catch (e) {
      throw new Error(redact(`saved views in ${this.where}: ${(e as Error).message}`, this.url));
    }
  }

  async list(): Promise<SavedView[]> {
    const exists = await this.query<{ t: string | null }>(`SELECT to_regclass('logd_views')::text AS t`);
    if (!exists.rows[0]?.t) return [];
    const res = await this.query<{ name: string; url: string; saved_at: Date }>('SELECT name, url, saved_at FROM logd_views ORDER BY saved_at');
    return res.rows.map((r) => ({ name: r.name, url: r.url, savedAt: r.saved_at.toISOString() }));
  }

  async save(view: { name: string; url: string }): Promise<SavedView> {
    await this.query(TABLE);
    const n = await this.query<{ n: string }>('SELECT count(*)::text AS n FROM logd_views WHERE name <> $1', [view.name]);
    if (Number(n.rows[0].n) >= MAX_VIEWS) throw new BadView(`${MAX_VIEWS} views are saved already; delete some first`);
    const res = await this.query<{ saved_at: Date }>(
      'INSERT INTO logd_views (name, url, saved_at) VALUES ($1, $2, now()) ON CONFLICT (name) DO UPDATE SET url = EXCLUDED.url, saved_at = now() RETURNING saved_at',
      [view.name, view.url]);
    return { ...view, savedAt: res.rows[0].saved_at.toISOString() };
  }

  async remove(name: string): Promise<boolean> {
    const exists = await this.query<{ t: string | null }>(`SELECT to_regclass('logd_views')::text AS t`);
    if (!exists.rows[0]?.t) return false;
    const res = await this.query('DELETE FROM logd_views WHERE name = $1', [name]);
    return (res.rowCount ?? 0) > 0;
  }

  async close(): Promise<void> {
    await this.pool.end().catch(() => {});
  }
}
