// A sidecar (started by a client, uploading to the store named in that
// client's environment) stays up while it has an upload backlog, at most
// LOGD_UPLOAD_DRAIN_MS; the next daemon on the node resumes what is left.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { pgUnavailable, startPg, type PgCluster } from '../pg/cluster.js';
import { alive, daemonPids, runScript, script, serviceFile, startDaemon, waitUntil, type TestEnv } from '../helpers.js';
import { nodeEnv, waitUploaded } from './helpers.js';

const why = pgUnavailable();
let pgc: PgCluster;
let t: TestEnv | undefined;

async function sidecarRun(env: TestEnv): Promise<{ id: string; pid: number }> {
  const w = script(env, 'w.mjs', `
    const run = await logd.init({ project: 'sidecar' });
    for (let s = 0; s < 300; s++) run.log({ v: s }, { step: s });
    await run.finish();
    console.log(run.id);
  `);
  const r = await runScript(env, w);
  expect(r.exitCode, r.stderr).toBe(0);
  const pid = serviceFile(env.runtimeDir)!.pid;
  return { id: r.stdout.trim(), pid };
}

describe.skipIf(why !== null)(`a sidecar with an upload backlog${why ? ` (skipped: ${why})` : ''}`, () => {
  beforeAll(async () => {
    pgc = await startPg();
  });
  afterAll(() => pgc?.destroy());
  afterEach(async () => {
    pgc.start();
    await t?.cleanup();
    t = undefined;
  });

  it('stays up past its idle timeout until the backlog is uploaded, then exits', async () => {
    t = nodeEnv('node-side', pgc.url, { LOGD_IDLE_TIMEOUT_MS: '1500' });
    pgc.stop();
    const { id, pid } = await sidecarRun(t);
    // Well past the idle timeout, the sidecar is still there: the run is not uploaded.
    await new Promise((r) => setTimeout(r, 5000));
    expect(alive(pid)).toBe(true);
    pgc.start();
    await waitUploaded(t, pgc.url, id, 300);
    await waitUntil(() => !alive(pid), 30_000, 'the sidecar to exit once its backlog is uploaded');
    const log = fs.readFileSync(path.join(t.runtimeDir, 'daemon.log'), 'utf8');
    expect(log).toMatch(/staying up to upload its backlog \(at most 600 s\)/);
  });

  it('gives up after LOGD_UPLOAD_DRAIN_MS, and the next daemon on the node resumes the upload', async () => {
    t = nodeEnv('node-side2', pgc.url, { LOGD_IDLE_TIMEOUT_MS: '1500', LOGD_UPLOAD_DRAIN_MS: '3000' });
    pgc.stop();
    const { id, pid } = await sidecarRun(t);
    await waitUntil(() => !alive(pid), 30_000, 'the sidecar to give up draining');
    expect(fs.readFileSync(path.join(t.runtimeDir, 'daemon.log'), 'utf8')).toMatch(/gave up draining its upload backlog; the next daemon on this node resumes it/);
    expect(daemonPids(t.dir)).toEqual([]);
    pgc.start();
    await startDaemon(t);
    await waitUploaded(t, pgc.url, id, 300);
  });
});
