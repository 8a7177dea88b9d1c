// Eight ranks start at once with no daemon: exactly one daemon wins, every
// rank uses it, every run is stored.
import { afterEach, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { makeEnv, script, runScript, cliJson, cli, daemonPids, startDaemon, waitUntil, alive, type TestEnv } from './helpers.js';

let t: TestEnv;
afterEach(async () => t && (await t.cleanup()));

describe('auto-start', () => {
  it('eight processes starting at once share one daemon and all their runs are stored', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '20000' });
    const worker = script(t, 'rank.mjs', `
      const run = await logd.init({ project: 'race', group: 'g8', name: 'rank-' + process.env.RANK });
      for (let s = 0; s < 100; s++) run.log({ loss: 1 / (s + 1), rank: Number(process.env.RANK) }, { step: s });
      const res = await run.finish();
      console.log(JSON.stringify({ service: process.env.LOGD_SERVICE, state: res.state }));
    `);
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, r) => runScript(t, worker, [], { RANK: String(r), WORLD_SIZE: '8', LOCAL_RANK: String(r) })),
    );
    for (const r of results) expect(r.exitCode, r.stderr).toBe(0);
    const outs = results.map((r) => JSON.parse(r.stdout.trim().split('\n').pop()!));
    expect(new Set(outs.map((o) => o.service)).size).toBe(1);
    expect(outs.every((o) => o.state === 'finished')).toBe(true);
    // The sidecars that lost the start race exit on their own; on a loaded machine that can take a moment.
    await waitUntil(() => daemonPids(t.runtimeDir).length === 1, 10_000, 'the losing sidecars to exit').catch(() => {});
    expect(daemonPids(t.runtimeDir)).toHaveLength(1);
    // One start per rank at most: a rank whose sidecar lost the race waits for the winner (named in the data dir's
    // owner file as it takes the lock) however long it takes to come up, rather than start another after 2 s.
    const losers = fs.readFileSync(path.join(t.runtimeDir, 'daemon.log'), 'utf8').match(/not starting a second one/g) ?? [];
    expect(losers.length).toBeLessThanOrEqual(7);
    const runs = await cliJson(t, ['runs', '--project', 'race']);
    expect(runs).toHaveLength(8);
    expect(runs.every((r: any) => r.group === 'g8' && r.state === 'finished' && r.historyRows === 100)).toBe(true);
    expect(runs.map((r: any) => r.metadata.rank.rank).sort()).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(runs.every((r: any) => r.metadata.rank.worldSize === 8)).toBe(true);
  });

  it('a second daemon for the same data dir refuses to start, even from another runtime dir, and says where the first is; a client with another runtime dir finds the first (issue 41)', async () => {
    t = makeEnv();
    const parent = path.join(t.dir, 'parent');
    fs.mkdirSync(parent, { mode: 0o755 });
    t.env.LOGD_RUNTIME_DIR = t.runtimeDir = path.join(parent, 'rt');
    const first = await startDaemon(t);
    expect(fs.statSync(parent).mode & 0o777).toBe(0o755); // a directory the user named is left alone
    const other = { ...t, env: { ...t.env, LOGD_RUNTIME_DIR: path.join(t.dir, 'rt2') } };
    const r = await cli(other, ['serve'], { reject: false });
    expect(r.exitCode).toBe(3);
    expect(r.stderr).toContain(`pid ${first.pid}`);
    // Every process of the user finds the daemon that holds the data dir, wherever it serves from (the owner file):
    // another LOGD_RUNTIME_DIR, or XDG_RUNTIME_DIR set in one shell and not in another.
    const q = await cli(other, ['runs', '--json'], { reject: false });
    expect(q.exitCode, q.stderr).toBe(0);
    expect((await cliJson(other, ['status'])).pid).toBe(first.pid);
    const login = { ...t, env: { ...t.env, XDG_RUNTIME_DIR: path.join(t.dir, 'xdg') } };
    delete login.env.LOGD_RUNTIME_DIR;
    fs.mkdirSync(login.env.XDG_RUNTIME_DIR!, { mode: 0o700 });
    expect((await cliJson(login, ['status'])).pid).toBe(first.pid);
    const stop = await cli(login, ['stop'], { reject: false });
    expect(stop.exitCode, stop.stderr).toBe(0);
    await waitUntil(() => !alive(first.pid), 15_000, 'the daemon to stop');
  });
});
