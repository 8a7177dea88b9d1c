// One version, and versions that must not mix (issue 18), against this
// checkout's daemon (test/packaging/install.test.ts does the same from the
// installed wheel and tarball):
// - package.json's version is what `logd --version`, the daemon (service
//   file, Hello) and the Python package say (packaging/sync-version.mjs);
// - a client of another wire protocol is refused on every call, Hello,
//   unary and stream alike, with both logd versions named; a client that
//   sends no protocol is protocol 1;
// - a data dir stamped by a newer logd is refused before anything is written.
import fs from 'node:fs';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { execa } from 'execa';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeEnv, startDaemon, cli, ROOT, type TestEnv } from '../helpers.js';

const VERSION = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).version as string;
const def = protoLoader.loadSync(path.join(ROOT, 'proto/logd/v1/logd.proto'), { longs: Number, defaults: true, oneofs: true });
const Logd = (grpc.loadPackageDefinition(def) as any).logd.v1.Logd as grpc.ServiceClientConstructor;

describe('one version', () => {
  it('package.json, src/version.ts, python/logd/_version.py and `logd --version` agree', async () => {
    const check = await execa('node', [path.join(ROOT, 'packaging', 'sync-version.mjs'), '--check'], { reject: false, all: true });
    expect(check.exitCode, check.all).toBe(0);
    expect(fs.readFileSync(path.join(ROOT, 'python', 'logd', '_version.py'), 'utf8')).toContain(`__version__ = "${VERSION}"`);
    const t = makeEnv();
    try {
      expect((await cli(t, ['--version'])).stdout.trim()).toBe(VERSION);
    } finally {
      await t.cleanup();
    }
  });
});

describe('the wire version and the data format', () => {
  let t: TestEnv;
  let svc: { socket: string; token: string; pid: number; version: string };
  beforeAll(async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    await startDaemon(t);
    svc = JSON.parse(fs.readFileSync(path.join(t.runtimeDir, 'service.json'), 'utf8'));
  });
  afterAll(async () => t && (await t.cleanup()));

  function md(protocol?: string, version?: string): grpc.Metadata {
    const m = new grpc.Metadata();
    m.set('x-logd-token', svc.token);
    if (protocol !== undefined) m.set('x-logd-protocol', protocol);
    if (version !== undefined) m.set('x-logd-version', version);
    return m;
  }
  function call(method: string, req: unknown, meta: grpc.Metadata): Promise<any> {
    const c = new Logd(svc.socket, grpc.credentials.createInsecure()) as any;
    return new Promise((resolve, reject) =>
      c[method](req, meta, { deadline: Date.now() + 10_000 }, (e: grpc.ServiceError | null, r: unknown) => (c.close(), e ? reject(e) : resolve(r))),
    );
  }

  it('the service file and Hello carry package.json\'s version', async () => {
    expect(svc.version).toBe(VERSION);
    const hello = await call('hello', { protocolVersion: 1 }, md());
    expect(hello).toMatchObject({ protocolVersion: 1, daemonVersion: VERSION });
  });

  it('serves protocol 1, said or not; refuses another on every call, naming both versions', async () => {
    await expect(call('listRuns', {}, md())).resolves.toBeDefined();
    await expect(call('listRuns', {}, md('1', '0.0.9'))).resolves.toBeDefined();
    const why = `logd 9.9.9 speaks wire protocol 2, and this daemon (logd ${VERSION}, pid ${svc.pid}) speaks wire protocol 1`;
    for (const [method, req] of [['listRuns', {}], ['createRun', { project: 'p' }], ['status', {}]] as const) {
      const e = await call(method, req, md('2', '9.9.9')).catch((x: grpc.ServiceError) => x);
      expect(e.code, method).toBe(grpc.status.FAILED_PRECONDITION);
      expect(e.details).toContain(why);
      expect(e.details).toContain('use one logd version on this node');
    }
    // Hello with protocol 2 in its body, no header.
    const e = await call('hello', { protocolVersion: 2, client: { pid: 1, host: 'h', clientVersion: '9.9.9' } }, md()).catch((x: grpc.ServiceError) => x);
    expect(e.code).toBe(grpc.status.FAILED_PRECONDITION);
    expect(e.details).toContain(why);
    // The record stream too.
    const c = new Logd(svc.socket, grpc.credentials.createInsecure()) as any;
    const s = c.write(md('2', '9.9.9'));
    const err = await new Promise<grpc.ServiceError>((resolve) => s.on('error', resolve));
    c.close();
    expect(err.code).toBe(grpc.status.FAILED_PRECONDITION);
    expect(err.details).toContain(why);
    // Nothing of the refused create was stored.
    expect((await call('listRuns', {}, md())).runs).toHaveLength(0);
  });

  it('refuses a data dir stamped by a newer logd before writing anything; stamps a fresh one', async () => {
    expect(JSON.parse(fs.readFileSync(path.join(t.dataDir, 'format.json'), 'utf8'))).toEqual({ format: 1, createdBy: `logd ${VERSION}` });
    const u = makeEnv();
    try {
      fs.mkdirSync(u.dataDir, { recursive: true, mode: 0o700 });
      fs.writeFileSync(path.join(u.dataDir, 'format.json'), '{"format": 2, "createdBy": "logd 1.0.0"}\n');
      const before = fs.readdirSync(u.dataDir);
      const r = await cli(u, ['serve'], { reject: false });
      expect(r.exitCode).toBe(1);
      expect(r.stderr).toContain(`the data dir ${u.dataDir} was written by logd 1.0.0 (data format 2); this daemon is logd ${VERSION} (data format 1) and cannot read it`);
      expect(fs.readdirSync(u.dataDir)).toEqual(before); // no lock file, no index, no runs dir
      fs.writeFileSync(path.join(u.dataDir, 'format.json'), 'garbage');
      const d = await cli(u, ['serve'], { reject: false });
      expect(d.exitCode).toBe(1);
      expect(d.stderr).toContain('format.json is damaged');
    } finally {
      await u.cleanup();
    }
  });
});
