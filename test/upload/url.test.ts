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
