// The throwaway PostgreSQL itself: it starts, answers over TCP with a password
// and over its private socket, survives a stop/start, and is gone afterwards.
import { describe, expect, test } from 'vitest';
import pg from 'pg';
import { pgUnavailable, startPg } from './cluster.js';

const why = pgUnavailable();

describe.skipIf(why !== null)(`throwaway PostgreSQL${why ? ` (skipped: ${why})` : ''}`, () => {
  test('starts, takes passwords over TCP and the socket, restarts, and is removed on destroy', async () => {
    const pgc = await startPg();
    try {
      for (const url of [pgc.url, pgc.socketUrl]) {
        const c = new pg.Client({ connectionString: url });
        await c.connect();
        expect((await c.query('SELECT current_user AS u, current_database() AS d')).rows[0]).toEqual({ u: 'logd', d: 'logd' });
        await c.end();
      }
      const bad = new pg.Client({ connectionString: pgc.urlFor('logd', 'wrong') });
      await expect(bad.connect()).rejects.toThrow(/password authentication failed/);
      pgc.stop();
      const down = new pg.Client({ connectionString: pgc.url });
      await expect(down.connect()).rejects.toThrow(/ECONNREFUSED/);
      pgc.start();
      expect(pgc.psql('SELECT 41 + 1')).toBe('42\n');
    } finally {
      pgc.destroy();
    }
    const after = new pg.Client({ connectionString: pgc.url });
    await expect(after.connect()).rejects.toThrow(/ECONNREFUSED/);
  });
});
