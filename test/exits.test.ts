// How processes end (issue 9, cases 1 and 5): a child that shares a run and
// leaves with process.exit(), and a trainer that handles SIGTERM itself and
// logs on. Nothing they logged is lost, and logd never ends a run while its
// process goes on.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, script, runScript, spawnScript, cliJson, exportJsonl, waitUntil, type TestEnv } from './helpers.js';

let t: TestEnv;
afterEach(async () => t && (await t.cleanup()));

describe('issue 9 case 1: children that share a run and call process.exit()', () => {
  it('every row the children logged is stored, and the owner finish accounts for every writer', async () => {
    t = makeEnv();
    const child = script(t, 'child.mjs', `
      const run = await logd.attach(process.argv[2]);
      const k = Number(process.argv[3]);
      for (let s = 0; s < 50; s++) run.log({ ['child' + k]: s }, { step: s });
      setTimeout(() => process.exit(0), 200);
    `);
    const owner = script(t, 'owner.mjs', `
      import { fork } from 'node:child_process';
      const run = await logd.init({ project: 'exits', name: 'owner' });
      for (let s = 0; s < 50; s++) run.log({ owner: s }, { step: s });
      const kids = [0, 1, 2].map((k) => fork(${JSON.stringify(child)}, [run.handle(), String(k)]));
      await Promise.all(kids.map((c) => new Promise((r) => c.once('exit', r))));
      const res = await run.finish({ timeoutMs: 10000 });
      console.log(JSON.stringify({ id: run.id, ...res }));
    `);
    const r = await runScript(t, owner);
    expect(r.exitCode, r.stderr).toBe(0);
    const res = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(res).toMatchObject({ state: 'finished', timedOut: false });
    const info = await cliJson(t, ['show', res.id]);
    expect(info.historyRows).toBe(200);
    expect(info.metadata.writers).toHaveLength(4);
    const raw = await exportJsonl(t, res.id, ['--raw']);
    for (const key of ['owner', 'child0', 'child1', 'child2']) {
      expect(raw.filter((x) => key in x).map((x) => x[key])).toEqual(Array.from({ length: 50 }, (_, i) => i));
    }
    const spool = path.join(t.dataDir, 'spool');
    expect(fs.existsSync(spool) ? fs.readdirSync(spool) : []).toEqual([]);
  });
});
