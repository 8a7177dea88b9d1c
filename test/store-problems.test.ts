// Issue 9, "also": what the store and the listing used to leave unsaid.
// - `logd runs` says when it shows fewer runs than match;
// - a run directory the daemon cannot read is reported (a log line and
//   `logd status`) after an index rebuild, not silently left out;
// - a run whose owner died before opening its stream does not stay `running`.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { makeEnv, script, runScript, cli, cliJson, killDaemon, startDaemon, serviceFile, waitUntil, ROOT, type TestEnv } from './helpers.js';

let t: TestEnv;
afterEach(async () => t && (await t.cleanup()));

const five = `
  for (let i = 0; i < 5; i++) {
    const run = await logd.init({ project: 'many', name: 'r' + i });
    run.log({ x: i });
    await run.finish();
    console.log('run ' + run.id);
  }
`;

describe('issue 9: the listing and the store say what they leave out', () => {
  it('`logd runs` says when it cut the list, and how to see the rest', async () => {
    t = makeEnv();
    await startDaemon(t);
    const r = await runScript(t, script(t, 'five.mjs', five));
    expect(r.exitCode, r.stderr).toBe(0);
    const cut = await cli(t, ['runs', '--limit', '3']);
    expect(cut.stdout.trim().split('\n')).toHaveLength(4); // header + 3
    expect(cut.stderr).toBe('logd: showing 3 of 5 runs, newest first; see more with --limit 5');
    const json = await cli(t, ['runs', '--limit', '3', '--json']);
    expect(JSON.parse(json.stdout)).toHaveLength(3);
    expect(json.stderr).toMatch(/showing 3 of 5 runs/);
    const filtered = await cli(t, ['runs', '--project', 'many', '--state', 'finished', '--limit', '4']);
    expect(filtered.stderr).toMatch(/showing 4 of 5 runs/);
    const all = await cli(t, ['runs']);
    expect(all.stdout.trim().split('\n')).toHaveLength(6);
    expect(all.stderr).toBe('');
  });

  it('a run directory that cannot be read is reported after an index rebuild', async () => {
    t = makeEnv();
    const r = await runScript(t, script(t, 'five.mjs', five));
    expect(r.exitCode, r.stderr).toBe(0);
    const ids = r.stdout.trim().split('\n').filter((l) => l.startsWith('run ')).map((l) => l.slice(4));
    await killDaemon(t.dir);
    // One log that cannot be read as a file (root reads any mode, so not chmod),
    // and one run directory whose log is gone.
    const broken = path.join(t.dataDir, 'runs', ids[1], 'records.log');
    fs.rmSync(broken);
    fs.mkdirSync(broken);
    fs.rmSync(path.join(t.dataDir, 'runs', ids[2], 'records.log'));
    fs.rmSync(path.join(t.dataDir, 'index.db'));
    const d = await startDaemon(t);
    const listed = (await cliJson(t, ['runs'])).map((x: { id: string }) => x.id);
    expect(listed.sort()).toEqual([ids[0], ids[3], ids[4]].sort());
    expect(d.stderr()).toMatch(new RegExp(`store: run ${ids[1]} is left out of the index, its directory cannot be read: .*EISDIR`));
    expect(d.stderr()).toMatch(new RegExp(`store: run ${ids[2]} is left out of the index, its directory cannot be read: .*records.log is missing`));
    const st = await cliJson(t, ['status']);
    expect(st.storeProblems).toEqual(expect.arrayContaining([
      expect.stringMatching(new RegExp(`^run ${ids[1]}: cannot be read, left out of \`logd runs\`: .*EISDIR`)),
      expect.stringMatching(new RegExp(`^run ${ids[2]}: cannot be read, left out of \`logd runs\`: .*missing`)),
    ]));
    expect((await cli(t, ['status'])).stdout).toMatch(new RegExp(`STORED DATA PROBLEM: run ${ids[1]}: cannot be read`));
  });

  it('a run whose owner gave no pid and never opened its stream is crashed after the recovery grace', async () => {
    t = makeEnv({ LOGD_RECOVERY_GRACE_MS: '6000' }); // long enough for a `logd show` to start on a loaded box before it runs out
    await startDaemon(t);
    const svc = serviceFile(t.runtimeDir)!;
    const def = protoLoader.loadSync(path.join(ROOT, 'proto/logd/v1/logd.proto'), { longs: Number, defaults: true, oneofs: true });
    const Logd = (grpc.loadPackageDefinition(def) as any).logd.v1.Logd;
    const client = new Logd(svc.socket, grpc.credentials.createInsecure());
    const md = new grpc.Metadata();
    md.set('x-logd-token', svc.token);
    // A client in another language that creates a run and dies before its stream opens.
    const run = await new Promise<any>((resolve, reject) =>
      client.CreateRun({ project: 'orphan' }, md, { deadline: Date.now() + 10_000 }, (e: Error | null, r: unknown) => (e ? reject(e) : resolve(r))));
    client.close();
    const first = await cliJson(t, ['show', run.id]); expect(first.state, first.stateReason).toBe('running');
    await waitUntil(async () => (await cliJson(t, ['show', run.id])).state !== 'running', 15_000, 'the run to leave running');
    expect(await cliJson(t, ['show', run.id])).toMatchObject({
      state: 'crashed', stateReason: 'its owner gave no pid and did not open its record stream within 6000 ms of creating the run',
    });
  });
});
