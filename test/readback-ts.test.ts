// Issue 33 from TypeScript: api.runs(), api.run() and api.history() read a
// real daemon's runs back: every stored row as columns, NaN where a row has no
// value, NaN and ±Infinity logged kept, config and summary parsed.
import { afterEach, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import * as grpc from '@grpc/grpc-js';
import { makeEnv, startDaemon, killDaemon, script, runScript, serviceFile, waitUntil, type TestEnv } from './helpers.js';
import { serviceDefinition } from '../src/proto.js';
import { TOKEN_METADATA_KEY } from '../src/wire.js';

let t: TestEnv;
afterEach(async () => {
  if (t) {
    await killDaemon(t.dir);
    await t.cleanup();
  }
});

describe('reading runs back from TypeScript', () => {
  it('api.history gives every stored row as columns; api.runs lists the runs with their config and summary', async () => {
    t = makeEnv();
    await startDaemon(t);
    const file = script(t, 'rb.mjs', `
      const run = await logd.init({ project: 'rb', name: 'a', config: { lr: 0.01 } });
      for (let s = 0; s < 100; s++) {
        const row = { loss: s === 10 ? NaN : s === 11 ? Infinity : s === 12 ? -Infinity : 1 / (s + 1) };
        if (s % 10 === 0) row.acc = s / 100;
        run.log(row, { step: s });
      }
      await run.finish();
      const h = await logd.api.history(run.id);
      const only = await logd.api.history(run.id, { keys: ['acc', 'nothing'] });
      const runs = await logd.api.runs({ project: 'rb' });
      const one = await logd.api.run(run.id);
      let missing = '';
      try { await logd.api.run('no-such-run'); } catch (e) { missing = e.message; }
      const kept = (await logd.api.runs({ filter: 'lr < 0.05; summary.acc.max >= 0.9' })).map((r) => r.name);
      const dropped = (await logd.api.runs({ filter: 'lr >= 0.05' })).length;
      const table = await logd.api.historyArrow(run.id);
      const arrowCols = table.schema.fields.map((f) => f.name);
      const arrowLoss = Array.from(table.getChild('loss').toArray()).map(String);
      const objs = await logd.api.historyRows(run.id);
      const objAcc = await logd.api.historyRows(run.id, { keys: ['acc'] });
      let badFilter = '';
      try { await logd.api.runs({ filter: 'lr <' }); } catch (e) { badFilter = e.message; }
      console.log(JSON.stringify({
        rows: h.rows, keys: h.keys, steps: Array.from(h.step), loss: Array.from(h.columns.loss).map(String), acc: Array.from(h.columns.acc).map(String),
        onlyKeys: only.keys, nothing: Array.from(only.columns.nothing).every(Number.isNaN), accRows: only.rows,
        runs: runs.map((r) => [r.name, r.state, r.config.lr, r.rows]), objs: [objs.length, objs[0], objs[1], String(objs[10].loss), Object.keys(objs[11]).sort()], objAcc: [objAcc.length, objAcc[1]], one: [one.id === run.id, one.summary.acc], missing, kept, dropped, badFilter, arrowRows: table.numRows, arrowCols, arrowLoss,
      }));
    `);
    const r = await runScript(t, file);
    expect(r.exitCode, r.stderr).toBe(0);
    const got = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(got.rows).toBe(100);
    expect(got.keys).toEqual(['loss', 'acc']);
    expect(got.steps).toEqual(Array.from({ length: 100 }, (_, i) => i));
    expect(got.loss).toEqual(Array.from({ length: 100 }, (_, s) => String(s === 10 ? NaN : s === 11 ? Infinity : s === 12 ? -Infinity : 1 / (s + 1))));
    expect(got.acc).toEqual(Array.from({ length: 100 }, (_, s) => String(s % 10 === 0 ? s / 100 : NaN)));
    expect(got.onlyKeys).toEqual(['acc', 'nothing']);
    expect(got.nothing).toBe(true);
    expect(got.runs).toEqual([['a', 'finished', 0.01, 100]]);
    expect(got.one).toEqual([true, 0.9]);
    expect(got.kept).toEqual(['a']);
    expect(got.dropped).toBe(0);
    expect(got.badFilter).toMatch(/^listRuns: filter: /);
    // An Apache Arrow table of the same columns (the test's own apache-arrow, a devDependency).
    expect(got.arrowRows).toBe(100);
    expect(got.arrowCols).toEqual(['_step', '_time', 'loss', 'acc']);
    expect(got.arrowLoss).toEqual(got.loss);
    expect(got.missing).toMatch(/no-such-run/);
    // Rows as objects: exactly the metrics each row logged (a NaN logged is NaN, and JSON says null).
    expect(got.objs[0]).toBe(100);
    expect(got.objs[1]).toEqual({ _step: 0, _time: expect.any(Number), loss: 1, acc: 0 });
    expect(got.objs[2]).toEqual({ _step: 1, _time: expect.any(Number), loss: 0.5 });
    expect(got.objs[3]).toBe('NaN');
    expect(got.objs[4]).toEqual(['_step', '_time', 'loss']);
    expect(got.objAcc).toEqual([10, { _step: 10, _time: expect.any(Number), acc: 0.1 }]); // rows with none of the keys asked are left out
  }, 60_000);

  it("a large history is read on a thread of its own at nice 10 (it gives way to the node's trainers); a reader that stops reading holds that thread, not the daemon", async () => {
    t = makeEnv();
    const { pid } = await startDaemon(t);
    const r = await runScript(t, script(t, 'big.mjs', `
      const run = await logd.init({ project: 'rb', name: 'big' });
      const row = {};
      for (let s = 0; s < 200000; s++) {
        for (let k = 0; k < 10; k++) row['m' + k] = s + k;
        run.log(row, { step: s });
      }
      await run.finish();
      console.log(run.id);
    `), [], {}, 120_000);
    expect(r.exitCode, r.stderr).toBe(0);
    const id = r.stdout.trim().split('\n').pop()!;
    const svc = serviceFile(t.runtimeDir)!;
    const Client = grpc.makeGenericClientConstructor(serviceDefinition as grpc.ServiceDefinition, 'Logd');
    const client = new Client(svc.socket.startsWith("unix:") ? svc.socket : `unix:${svc.socket}`, grpc.credentials.createInsecure()) as grpc.Client & Record<string, Function>;
    const md = new grpc.Metadata();
    md.set(TOKEN_METADATA_KEY, svc.token);
    // A thread may end between the listing and the read of its stat (ENOENT): it is skipped.
    const niceThreads = () => fs.readdirSync(`/proc/${pid}/task`).flatMap((tid) => {
      let st: string;
      try {
        st = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'ENOENT' || (e as NodeJS.ErrnoException).code === 'ESRCH') return [];
        throw e;
      }
      return [Number(st.slice(st.lastIndexOf(')') + 2).split(' ')[16])];
    });
    expect(niceThreads().every((n) => n === 0)).toBe(true);
    const call = client.readHistory({ runId: id, keys: [], tailRows: 0, system: false, points: 0 }, md) as grpc.ClientReadableStream<unknown>;
    let chunks = 0;
    call.on('data', () => {
      chunks++;
      call.pause(); // one chunk taken, then the reader stops reading
    });
    let failed = '';
    call.on('error', (e: Error) => (failed = e.message));
    await waitUntil(() => chunks > 0 || failed !== '', 30_000, 'the first chunk');
    expect(failed).toBe('');
    // The read's worker thread is at nice 10; the daemon's own threads are not.
    await waitUntil(() => niceThreads().includes(10), 10_000, 'a thread at nice 10 in the daemon');
    expect(niceThreads().filter((n) => n === 10)).toHaveLength(1);
    // The daemon still answers (its main thread is not held by the stalled read).
    const list = await runScript(t, script(t, 'ls.mjs', `console.log((await logd.api.runs({ project: 'rb' })).length);`));
    expect(list.stdout.trim()).toBe('1');
    call.cancel();
    await waitUntil(() => !niceThreads().includes(10), 15_000, 'the read thread to end when the reader went away');
    client.close();
  }, 180_000);
});
