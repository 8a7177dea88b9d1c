// Bad input against a real daemon, through a client built from the .proto
// with @grpc/proto-loader (independent of logd's own client code): each gets
// a clear status or is stored faithfully; the daemon stays up; other runs are
// unaffected.
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeEnv, startDaemon, script, runScript, cli, cliJson, exportJsonl, alive, ROOT, type TestEnv } from './helpers.js';

let t: TestEnv;
let daemonPid: number;
let svc: { socket: string; token: string };
let Logd: grpc.ServiceClientConstructor;

const def = protoLoader.loadSync(path.join(ROOT, 'proto/logd/v1/logd.proto'), { longs: Number, defaults: true, oneofs: true });
Logd = (grpc.loadPackageDefinition(def) as any).logd.v1.Logd;

function client(): any {
  return new Logd(svc.socket, grpc.credentials.createInsecure());
}
function md(token = svc.token): grpc.Metadata {
  const m = new grpc.Metadata();
  if (token) m.set('x-logd-token', token);
  return m;
}
function call(method: string, req: unknown, meta = md()): Promise<any> {
  return new Promise((resolve, reject) =>
    client()[method](req, meta, { deadline: Date.now() + 10_000 }, (e: grpc.ServiceError | null, r: unknown) => (e ? reject(e) : resolve(r))),
  );
}
const f64 = (a: number[]) => Buffer.from(new Float64Array(a).buffer);
const u32 = (a: number[]) => Buffer.from(new Uint32Array(a).buffer);

/** Opens a writer stream on a run and collects the daemon's answers. */
async function stream(run: any, keys: string[] = []) {
  const s = client().write(md());
  const msgs: any[] = [];
  s.on('data', (m: any) => msgs.push(m));
  s.on('error', () => {});
  s.write({ open: { runId: run.id, runToken: run.runToken, writerId: run.ownerWriterId, keys } });
  const waitFor = async (pred: (m: any) => boolean) => {
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      const m = msgs.find(pred);
      if (m) return m;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error('no answer from the daemon within 10 s');
  };
  await waitFor((m) => m.opened);
  return { s, msgs, waitFor };
}

beforeAll(async () => {
  t = makeEnv();
  daemonPid = (await startDaemon(t)).pid;
  svc = JSON.parse((await import('node:fs')).readFileSync(path.join(t.runtimeDir, 'service.json'), 'utf8'));
});
afterAll(async () => t && (await t.cleanup()));

describe('bad input', () => {
  it('a missing or wrong token is UNAUTHENTICATED', async () => {
    await expect(call('ListRuns', {}, md(''))).rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED });
    await expect(call('ListRuns', {}, md('nope'))).rejects.toMatchObject({ code: grpc.status.UNAUTHENTICATED });
    await expect(call('ListRuns', {})).resolves.toBeTruthy();
  });

  it('unknown run ids and wrong run tokens get clear statuses', async () => {
    await expect(call('GetRun', { runId: 'nope' })).rejects.toMatchObject({ code: grpc.status.NOT_FOUND });
    await expect(call('GetRun', { runId: '../../etc' })).rejects.toMatchObject({ code: grpc.status.NOT_FOUND });
    await expect(call('AttachRun', { runId: 'nope', runToken: 'x' })).rejects.toMatchObject({ code: grpc.status.NOT_FOUND });
    const run = await call('CreateRun', { project: 'bad' });
    await expect(call('AttachRun', { runId: run.id, runToken: 'wrong' })).rejects.toMatchObject({ code: grpc.status.PERMISSION_DENIED });
    await expect(call('CreateRun', { id: '../escape' })).rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT });
    await expect(call('CreateRun', { id: run.id })).rejects.toMatchObject({ code: grpc.status.ALREADY_EXISTS });
    await expect(call('CreateRun', { configJson: '[1,2' })).rejects.toMatchObject({ code: grpc.status.INVALID_ARGUMENT });
  });

  it('malformed batches are refused with a reason and nothing of them is stored', async () => {
    const run = await call('CreateRun', { project: 'bad' });
    const { s, waitFor } = await stream(run, ['a']);
    const bad = [
      { seq: 1, rows: 2, steps: f64([0]), times: f64([1, 1]), counts: u32([1, 1]), keyIds: u32([0, 0]), values: f64([1, 2]) },
      { seq: 2, rows: 1, steps: f64([0]), times: f64([1]), counts: u32([2]), keyIds: u32([0]), values: f64([1]) },
      { seq: 3, rows: 1, steps: f64([0]), times: f64([1]), counts: u32([1]), keyIds: u32([9]), values: f64([1]) },
      { seq: 4, rows: 1, steps: f64([-5]), times: f64([1]), counts: u32([1]), keyIds: u32([0]), values: f64([1]) },
      { seq: 5, rows: 1, steps: f64([0.5]), times: f64([1]), counts: u32([1]), keyIds: u32([0]), values: f64([1]) },
      { seq: 6, rows: 0, newKeys: [''], newKeysFirst: 1 },
      { seq: 7, rows: 0, newKeys: ['x'.repeat(300)], newKeysFirst: 1 },
      { seq: 8, rows: 0, newKeys: ['b'], newKeysFirst: 5 },
      { seq: 9, rows: 0, summaryJson: ['{not json'] },
    ];
    for (const b of bad) s.write({ batch: b });
    for (const b of bad) {
      const m = await waitFor((x) => x.control?.kind === 'rejected' && x.control.seq === b.seq);
      expect(m.control.message).toMatch(/refused: .+/);
    }
    // A good batch after the bad ones is stored.
    s.write({ batch: { seq: 10, rows: 1, steps: f64([3]), times: f64([1]), counts: u32([1]), keyIds: u32([0]), values: f64([42]) } });
    await waitFor((x) => x.ack && x.ack.seq >= 10);
    s.end();
    const rows = await exportJsonl(t, run.id);
    expect(rows).toEqual([expect.objectContaining({ _step: 3, a: 42 })]);
    expect(alive(daemonPid)).toBe(true);
  });

  it('a batch with its columns left off the wire (only a config update) is stored, from any client', async () => {
    // proto3 omits empty bytes fields: a client that does not write them out
    // (Python's protobuf, among others) sends a batch without columns.
    const run = await call('CreateRun', { project: 'columnless' });
    const { s, waitFor } = await stream(run);
    s.write({ batch: { seq: 1, rows: 0, configJson: ['{"lr":0.5}'], summaryJson: ['{"best":1}'] } });
    const m = await waitFor((x) => (x.ack && x.ack.seq >= 1) || x.control?.kind === 'rejected');
    expect(m.control, JSON.stringify(m.control)).toBeFalsy();
    s.end();
    const shown = await cliJson(t, ['show', run.id]);
    expect(shown.config).toMatchObject({ lr: 0.5 });
    expect(shown.summary).toMatchObject({ best: 1 });
  });

  it('a finish whose last batch was refused does not wait for its deadline', async () => {
    const run = await call('CreateRun', { project: 'bad' });
    const { s, waitFor } = await stream(run);
    s.write({ batch: { seq: 1, rows: 0, newKeys: [''], newKeysFirst: 0 } });
    await waitFor((x) => x.control?.kind === 'rejected' && x.control.seq === 1);
    const t0 = Date.now();
    const f = await call('FinishRun', { runId: run.id, runToken: run.runToken, writerId: run.ownerWriterId, lastSeq: 1, timeoutMs: 8000 });
    expect(f.timedOut).toBe(false);
    expect(f.run.state).toBe('finished');
    expect(Date.now() - t0).toBeLessThan(4000);
    s.end();
  });

  it('an oversized message is refused by size and the daemon stays up', async () => {
    const run = await call('CreateRun', { project: 'bad' });
    const { s } = await stream(run);
    const err = new Promise<grpc.ServiceError>((r) => s.on('error', r));
    const n = 9_000_000; // 9 M pairs: over 64 MiB
    s.write({ batch: { seq: 1, rows: 1, steps: f64([0]), times: f64([1]), counts: u32([n]), keyIds: Buffer.alloc(n * 4), values: Buffer.alloc(n * 8), newKeys: ['k'], newKeysFirst: 0 } });
    expect((await err).code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(alive(daemonPid)).toBe(true);
    await expect(call('ListRuns', {})).resolves.toBeTruthy();
  });

  it('NaN and infinities are stored as they are; 100 000 keys in one call are stored faithfully', async () => {
    const w = script(t, 'w.mjs', `
      const run = await logd.init({ project: 'values' });
      run.log({ loss: NaN, up: Infinity, down: -Infinity, ok: 1.5 }, { step: 0 });
      const wide = {};
      for (let i = 0; i < 100000; i++) wide['k' + i] = i;
      run.log(wide, { step: 1 });
      let threw = [];
      for (const bad of [{ '': 1 }, { ['x'.repeat(300)]: 1 }, { s: 'text' }]) {
        try { run.log(bad); } catch (e) { threw.push(e.name); }
      }
      const r = await run.finish();
      console.log(JSON.stringify({ id: run.id, threw, state: r.state }));
    `);
    const r = await runScript(t, w, [], { LOGD_SERVICE: `${svc.socket}#${svc.token}` });
    expect(r.exitCode, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim());
    expect(out.threw).toEqual(['TypeError', 'TypeError', 'TypeError']);
    const rows = await exportJsonl(t, out.id, ['--raw']);
    expect(rows).toHaveLength(2);
    expect(rows[0]).toMatchObject({ loss: 'NaN', up: 'Infinity', down: '-Infinity', ok: 1.5 });
    expect(Object.keys(rows[1])).toHaveLength(100_000 + 3);
    expect(rows[1]).toMatchObject({ k0: 0, k99999: 99999 });
    const info = await cliJson(t, ['show', out.id]);
    expect(info.summary.loss).toBe('NaN');
    expect(info.metadata.stats.ok).toEqual({ last: 1.5, min: 1.5, max: 1.5, count: 1 });
  });

  it('steps that go backwards are kept, in arrival order, and counted', async () => {
    const w = script(t, 'back.mjs', `
      const run = await logd.init({ project: 'values' });
      for (const s of [5, 6, 2, 3]) run.log({ v: s }, { step: s });
      await run.finish();
      console.log(run.id);
    `);
    const r = await runScript(t, w, [], { LOGD_SERVICE: `${svc.socket}#${svc.token}` });
    const id = r.stdout.trim();
    const raw = await exportJsonl(t, id, ['--raw']);
    expect(raw.map((x) => x._step)).toEqual([5, 6, 2, 3]);
    expect((await cliJson(t, ['show', id])).metadata.stepsBackwards).toBe(2);
  });

  it('issue 9 case 13: names that collide are refused in log() with a TypeError; __proto__ is a name like any other', async () => {
    const w = script(t, 'collide.mjs', `
      const run = await logd.init({ project: 'collide' });
      const refused = [];
      for (const row of [{ _step: 1 }, { _time: 2 }, { _writer: 3 }, { 'a/b': 1, a: { b: 2 } }, { x: { y: 1 }, 'x/y': 2 }]) {
        try { run.log(row); refused.push(null); } catch (e) { refused.push(e.name + ': ' + e.message); }
      }
      run.log(JSON.parse('{"__proto__": 5, "a/b": 1, "a": {"c": 2}, "step": 7}'), { step: 0 });
      run.summary.update(JSON.parse('{"constructor": 1}'));
      run.config.update(JSON.parse('{"__proto__": {"polluted": 1}}'));
      await run.finish();
      console.log(JSON.stringify({ id: run.id, refused }));
    `);
    const r = await runScript(t, w);
    expect(r.exitCode, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim().split('\n').at(-1)!);
    for (const [i, name] of ['_step', '_time', '_writer'].entries()) {
      expect(out.refused[i]).toBe(`TypeError: logd: metric name "${name}" is reserved: exports use _step, _time and _writer for the row's own step, time and writer; log it under another name (for example "${name.slice(1)}"), or pass the step as log(data, { step })`);
    }
    expect(out.refused[3]).toMatch(/^TypeError: logd: metric name "a\/b" appears twice in one row/);
    expect(out.refused[4]).toMatch(/^TypeError: logd: metric name "x\/y" appears twice in one row/);
    const shown = await cliJson(t, ['show', out.id]);
    const own = (o: object, k: string) => (Object.getOwnPropertyDescriptor(o, k) ?? { value: undefined }).value;
    expect(own(shown.summary, '__proto__')).toBe(5);
    expect(own(shown.summary, 'constructor')).toBe(1);
    expect(own(shown.metadata.stats, '__proto__')).toMatchObject({ last: 5, count: 1 });
    expect(own(shown.config, '__proto__')).toEqual({ polluted: 1 });
    expect(own(shown.lastRows[0], '__proto__')).toBe(5);
    expect(shown.historyRows).toBe(1); // the refused rows left nothing behind
    const line = (await cli(t, ['export', out.id, '--format', 'jsonl'])).stdout.trim();
    expect(line).toMatch(/^\{"_step":0,"_time":[0-9.]+,/);
    const keys = [...line.matchAll(/"([^"]+)":/g)].map((m) => m[1]);
    expect(keys.sort()).toEqual(['__proto__', '_step', '_time', 'a/b', 'a/c', 'step']);
    const csvHeader = (await cli(t, ['export', out.id, '--format', 'csv'])).stdout.split('\n')[0];
    expect(csvHeader).toBe('_step,_time,__proto__,a/b,a/c,step');
  });

  it('issue 9 case 13: the daemon refuses reserved names and a key twice in one row from any client', async () => {
    const run = await call('CreateRun', { project: 'collide-raw' });
    // In OpenWriter's dictionary: the stream fails with INVALID_ARGUMENT.
    const opened = client().write(md());
    const status = new Promise<any>((resolve, reject) => {
      opened.on('error', resolve);
      setTimeout(() => reject(new Error('the stream got no status within 10 s')), 10_000).unref();
    });
    opened.on('data', () => {});
    opened.write({ open: { runId: run.id, runToken: run.runToken, writerId: run.ownerWriterId, keys: ['ok', '_step'] } });
    expect(await status).toMatchObject({ code: grpc.status.INVALID_ARGUMENT, details: expect.stringMatching(/metric name "_step" is reserved/) });
    // In a batch: refused with a reason, nothing stored.
    const { s, waitFor } = await stream(run, ['a']);
    s.write({ batch: { seq: 1, rows: 0, newKeys: ['_time'], newKeysFirst: 1 } });
    s.write({ batch: { seq: 2, rows: 2, steps: f64([0, 1]), times: f64([1, 1]), counts: u32([1, 2]), keyIds: u32([0, 0, 0]), values: f64([1, 2, 3]) } });
    expect((await waitFor((x) => x.control?.kind === 'rejected' && x.control.seq === 1)).control.message).toMatch(/metric name "_time" is reserved/);
    expect((await waitFor((x) => x.control?.kind === 'rejected' && x.control.seq === 2)).control.message).toMatch(/row 1: metric name "a" appears twice in one row/);
    s.write({ batch: { seq: 3, rows: 1, steps: f64([5]), times: f64([1]), counts: u32([1]), keyIds: u32([0]), values: f64([9]) } });
    await waitFor((x) => x.ack && x.ack.seq >= 3);
    s.end();
    expect(await exportJsonl(t, run.id)).toEqual([expect.objectContaining({ _step: 5, a: 9 })]);
  });
});
