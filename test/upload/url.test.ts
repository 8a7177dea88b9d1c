// The store URL: every form the driver takes is accepted, and its password is
// cut out of everything shown.
import { describe, expect, it } from 'vitest';
import { parseStoreUrl, redact, redactUrl } from '../../dist/daemon/upload/url.js';

describe('store URL', () => {
  it('redacts the password in the TCP, Unix-socket and query forms', () => {
    expect(redactUrl('postgres://logd:s3cret@db.example:5432/logd')).toBe('postgres://logd:***@db.example:5432/logd');
    expect(redactUrl('postgres://logd:s3cret@/logd?host=/run/postgresql&port=5433')).toBe('postgres://logd:***@/logd?host=/run/postgresql&port=5433');
    expect(redactUrl('postgresql://logd@db/logd?sslmode=require&password=s3cret')).toBe('postgresql://logd@db/logd?sslmode=require&password=***');
    expect(redactUrl('postgres:///logd?host=/tmp/pg')).toBe('postgres:///logd?host=/tmp/pg');
  });

  it('cuts the password, raw or URL-encoded, out of any message', () => {
    const u = parseStoreUrl('postgres://logd:p%40ss%2Fw0rd@h:5/db');
    expect(u.password).toBe('p@ss/w0rd');
    const msg = redact(`connect to ${u.raw} failed: password "p@ss/w0rd" (p%40ss%2Fw0rd) rejected`, u);
    expect(msg).toBe('connect to postgres://logd:***@h:5/db failed: password "***" (***) rejected');
  });

  it('refuses what is not a postgres URL, saying what one looks like', () => {
    expect(() => parseStoreUrl('mysql://a:b@c/d')).toThrow('the store URL must start with postgres:// (got mysql://…)');
    expect(() => parseStoreUrl('db.example:5432')).toThrow(/must look like postgres:\/\/user:password@host:5432\/db/);
    // The refusal never echoes what it was given (it may hold a password).
    expect(() => parseStoreUrl('mysql://a:s3cret@c/d')).not.toThrow(/s3cret/);
  });
});

describe('a store that is away', () => {
  it('is "cannot reach" for a refused socket, a server shutting down or starting up, and a broken connection; not for a refused login', async () => {
    const { unreachable } = await import('../../dist/daemon/upload/uploader.js');
    const pgError = (code: string, message: string) => Object.assign(new Error(message), { code });
    expect(unreachable(pgError('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:5432'))).toBe(true);
    expect(unreachable(pgError('57P03', 'the database system is shutting down'))).toBe(true);
    expect(unreachable(pgError('57P03', 'the database system is starting up'))).toBe(true);
    expect(unreachable(pgError('57P01', 'terminating connection due to administrator command'))).toBe(true);
    expect(unreachable(pgError('08006', 'connection failure'))).toBe(true);
    expect(unreachable(pgError('28P01', 'password authentication failed for user "logd"'))).toBe(false);
    expect(unreachable(pgError('42P01', 'relation "logd_rows" does not exist'))).toBe(false);
  });
});
