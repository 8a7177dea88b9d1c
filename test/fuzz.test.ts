// A fuzzer on the gRPC surface, through raw bytes (not logd's client): random
// and mutated messages, invalid UTF-8, unknown fields, nasty names, negative
// and huge steps and sequence numbers, duplicated and out-of-order batches.
// The daemon must never exit, answer each with a clear status, never store
// invalid data, and store exactly what a model of the protocol says.
// Seeded: the seed is printed; LOGD_FUZZ_SEED=N replays it, LOGD_FUZZ_ITERS=N
// (or LOGD_SOAK=1) runs longer.
import fs from 'node:fs';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeEnv, startDaemon, alive, exportJsonl, cliJson, type TestEnv } from './helpers.js';
import { prng, RawClient, NASTY_STRINGS, mutate, randomBytes, enc, lenField, intField, f64, u32, type Rng } from './fuzz-wire.js';

const SEED = Number(process.env.LOGD_FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));
const TEST_MS = process.env.LOGD_SOAK === '1' || process.env.LOGD_FUZZ_ITERS ? 1_800_000 : 120_000;
const SCALE = Number(process.env.LOGD_FUZZ_ITERS ?? (process.env.LOGD_SOAK === '1' ? 20 : 1)); // multiplies the CI counts
const RUN_ID_RE = /^[A-Za-z0-9_-]{1,64}$/;
const CONTROL = /[\u0000-\u001f\u007f]/;

let t: TestEnv;
let daemonPid: number;
let daemonStderr: () => string;
let raw: RawClient;
export const fuzzed = { unary: 0, batches: 0, mutatedStreamMessages: 0 };

beforeAll(async () => {
  console.log(`fuzz: seed ${SEED} (replay with LOGD_FUZZ_SEED=${SEED}), scale ${SCALE}`);
  t = makeEnv();
  const d = await startDaemon(t);
  daemonPid = d.pid;
  daemonStderr = d.stderr;
  const svc = JSON.parse(fs.readFileSync(path.join(t.runtimeDir, 'service.json'), 'utf8'));
  raw = new RawClient(svc.socket, svc.token);
});
afterAll(async () => {
  raw?.close();
  if (t) await t.cleanup();
});

/** Statuses a bad message may get: never INTERNAL, never UNAVAILABLE (the daemon died) or a deadline (it hung). */
function expectClearStatus(r: { code: number; details: string }, what: string): void {
  const ok = [grpc.status.OK, grpc.status.INVALID_ARGUMENT, grpc.status.NOT_FOUND, grpc.status.PERMISSION_DENIED, grpc.status.ALREADY_EXISTS,
    grpc.status.FAILED_PRECONDITION, grpc.status.RESOURCE_EXHAUSTED];
  expect(ok, `${what}: status ${r.code} ${r.details}; daemon log: ${daemonStderr().slice(-1500)}`).toContain(r.code);
  if (r.code !== 0) expect(r.details, what).toMatch(/\w/);
}

function nasty(r: Rng): Buffer {
  const s = r.pick(NASTY_STRINGS);
  return Buffer.isBuffer(s) ? s : Buffer.from(s, 'utf8');
}

/** A request for `method`, hand-encoded so strings can be any bytes. */
function unaryBody(r: Rng, method: string): Buffer {
  const kind = r.int(3);
  if (kind === 0) return randomBytes(r, r.int(200));
  const strFields: Record<string, number[]> = {
    Hello: [], CreateRun: [2, 3, 4, 5, 6, 7, 8, 9, 10], AttachRun: [2, 3], FinishRun: [1, 2, 3], ListRuns: [1, 2, 3], GetRun: [1], Status: [],
  };
  const parts: Buffer[] = [];
  for (const no of strFields[method]) if (r.chance(0.6)) parts.push(lenField(no, no === 6 && r.chance(0.5) ? Buffer.from(r.pick(['{}', '[1]', '{"a":', '{"__proto__":{"x":1}}', 'null', '{"a":1e999}'])) : nasty(r)));
  if (method === 'Hello') parts.push(intField(1, r.pick([0, 1, 2, 2 ** 32 - 1])));
  if (method === 'FinishRun') parts.push(intField(4, r.pick([0, 1, -1, 2 ** 31 - 1])), intField(5, r.pick([0, 1, 2 ** 32 - 1])), intField(6, r.pick([0n, 1n, 2n ** 63n, 2n ** 64n - 1n])));
  if (method === 'ListRuns') parts.push(intField(4, r.pick([0, 1, 2 ** 32 - 1])));
  if (r.chance(0.3)) parts.push(intField(500 + r.int(100), r.int(1e6))); // unknown field
  const body = Buffer.concat(parts);
  return kind === 1 ? body : mutate(r, body);
}

const RES: Record<string, string> = { Hello: 'HelloResponse', CreateRun: 'RunInfo', AttachRun: 'RunInfo', FinishRun: 'FinishRunResponse', ListRuns: 'ListRunsResponse', GetRun: 'RunInfo', Status: 'StatusResponse' };

describe('fuzz', () => {
  it('regressions the fuzzer found: a lone surrogate, undecodable bytes, bad names in OpenWriter.keys', async () => {
    // JSON.parse names the bad token by one UTF-16 unit: half an emoji, echoed into a status, once killed the daemon.
    const r1 = await raw.unaryRaw('CreateRun', enc('CreateRunRequest', { configJson: '\u{1F600}' }), 'RunInfo');
    expect(r1).toMatchObject({ code: grpc.status.INVALID_ARGUMENT, details: expect.stringMatching(/config/) });
    expect(alive(daemonPid)).toBe(true);
    // A lone surrogate in a label is refused (protobufjs can hand one over from a client's UTF-16 string).
    const r2 = await raw.unaryRaw('CreateRun', enc('CreateRunRequest', { project: 'p\ud800' }), 'RunInfo');
    expect(r2.code).toBe(grpc.status.OK); // encoded as UTF-8 by the sender it arrives as U+FFFD: well-formed, stored as such
    expect(r2.res.project).toMatch(/^p\ufffd+$/);
    const r3 = await raw.unaryRaw('GetRun', Buffer.from([0x72, 0x0c, 0xc5, 0x71, 0x71]), 'RunInfo');
    expect(r3).toMatchObject({ code: grpc.status.INVALID_ARGUMENT, details: expect.stringMatching(/not a valid GetRunRequest/) });
    const run = await raw.unaryRaw('CreateRun', enc('CreateRunRequest', { project: 'fuzz' }), 'RunInfo');
    for (const keys of [[''], ['a\u0000b'], ['k'.repeat(300)]]) {
      const s = raw.writeRaw();
      const st = new Promise<grpc.ServiceError>((res) => s.on('error', res));
      s.on('data', () => {});
      s.write(enc('WriteRequest', { open: { runId: run.res.id, runToken: run.res.runToken, writerId: 'k1', keys } }));
      expect((await st).code).toBe(grpc.status.INVALID_ARGUMENT);
    }
    // Undecodable bytes in a stream get a status (grpc-js's own path could leave the call hanging).
    const s = raw.writeRaw();
    const st = new Promise<grpc.ServiceError>((res) => s.on('error', res));
    s.on('data', () => {});
    s.write(enc('WriteRequest', { open: { runId: run.res.id, runToken: run.res.runToken, writerId: run.res.ownerWriterId, keys: ['v'] } }));
    s.write(enc('WriteRequest', { batch: { seq: 1, rows: 3, steps: f64([1]) } }));
    s.write(Buffer.from([0x72, 0x0c, 0xc5, 0x71, 0x71]));
    expect((await st).code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(alive(daemonPid)).toBe(true);
  }, TEST_MS);

  it('unary calls with random, mutated and nasty messages: a clear status each, no escape from LOGD_DIR, the daemon stays up', async () => {
    const r = prng(SEED);
    const n = 400 * SCALE;
    const before = (await cliJson(t, ['runs', '--limit', '100000'])).length;
    const created: string[] = [];
    for (let i = 0; i < n; i++) {
      const method = r.pick(Object.keys(RES));
      const res = await raw.unaryRaw(method, unaryBody(r, method), RES[method]);
      expectClearStatus(res, `${method} #${i}`);
      if (method === 'CreateRun' && res.code === 0) {
        const info = res.res;
        expect(info.id).toMatch(RUN_ID_RE);
        for (const label of [info.project, info.name, info.group, info.jobType, ...info.tags]) {
          expect(Buffer.byteLength(label)).toBeLessThanOrEqual(256);
          expect(label).not.toMatch(CONTROL);
        }
        created.push(info.id);
      }
      if (i % 50 === 0) expect(alive(daemonPid)).toBe(true);
    }
    fuzzed.unary += n;
    expect(alive(daemonPid)).toBe(true);
    // Nothing outside the data and runtime dirs; every run dir is a plain id.
    expect(fs.readdirSync(t.dir).sort()).toEqual(['data', 'rt']);
    for (const id of fs.readdirSync(path.join(t.dataDir, 'runs'))) expect(id).toMatch(RUN_ID_RE);
    for (const id of created) expect(fs.existsSync(path.join(t.dataDir, 'runs', id, 'records.log'))).toBe(true);
    const runs = await cliJson(t, ['runs', '--limit', '100000']);
    expect(runs.length).toBe(before + created.length);
  }, TEST_MS);

  it('write streams with valid, invalid, duplicated, out-of-order and huge-seq batches store exactly what the protocol says', async () => {
    const r = prng(SEED + 1);
    const run = await raw.unaryRaw('CreateRun', enc('CreateRunRequest', { project: 'fuzz', name: 'model' }), 'RunInfo');
    expect(run.code).toBe(0);
    const { id, runToken } = run.res;
    const expected: number[] = []; // unique value of every row that must be stored
    let unique = 0;
    const streams = 25 * SCALE;
    for (let si = 0; si < streams; si++) {
      const s = raw.writeRaw();
      const answers: any[] = [];
      let failed: grpc.ServiceError | null = null;
      s.on('data', (b: Buffer) => answers.push(require_('WriteResponse', b)));
      s.on('error', (e: grpc.ServiceError) => (failed = e));
      s.write(enc('WriteRequest', { open: { runId: id, runToken, writerId: `fz${si}`, keys: ['v'] } }));
      let last = 0; // the model: the writer's last seq, as the daemon must track it
      let rejected = 0;
      const steps = 10 + r.int(20);
      for (let k = 0; k <= steps; k++) {
        const final = k === steps;
        const seqKind = final ? 'next' : r.pick(['next', 'next', 'next', 'dup', 'gap', 'huge', 'zero', 'unsafe', 'max64'] as const);
        let seq: bigint;
        if (seqKind === 'next') seq = BigInt(last + 1);
        else if (seqKind === 'dup') seq = BigInt(Math.max(1, last - r.int(3)));
        else if (seqKind === 'gap') seq = BigInt(last + 2 + r.int(4));
        else if (seqKind === 'huge') seq = BigInt(2 ** 52 + r.int(1000));
        else if (seqKind === 'zero') seq = 0n;
        else if (seqKind === 'unsafe') seq = 2n ** 60n + BigInt(r.int(1000));
        else seq = 2n ** 64n - 1n;
        const seqValid = seq >= 1n && seq <= BigInt(Number.MAX_SAFE_INTEGER);
        const rows = 1 + r.int(4);
        const stepVals = Array.from({ length: rows }, () => r.pick([0, 1, 7, 1000, 2 ** 53 - 1, r.int(1e6)]));
        const vals = Array.from({ length: rows }, (_, i) => unique + i);
        const batch: Record<string, unknown> = { rows, steps: f64(stepVals), times: f64(stepVals.map(() => 1.7e9)), counts: u32(stepVals.map(() => 1)), keyIds: u32(stepVals.map(() => 0)), values: f64(vals) };
        const badKind = final || r.chance(0.5) ? null : r.pick(['negStep', 'nanStep', 'fracStep', 'bigStep', 'nanTime', 'counts', 'keyId', 'stepsLen', 'badKey', 'ctrlKey', 'longKey', 'json', 'gapKeys'] as const);
        if (badKind === 'negStep') batch.steps = f64(stepVals.map((x, i) => (i === 0 ? -1 - x : x)));
        if (badKind === 'nanStep') batch.steps = f64(stepVals.map((x, i) => (i === 0 ? NaN : x)));
        if (badKind === 'fracStep') batch.steps = f64(stepVals.map((x, i) => (i === 0 ? 0.5 : x)));
        if (badKind === 'bigStep') batch.steps = f64(stepVals.map((x, i) => (i === 0 ? 2 ** 60 : x)));
        if (badKind === 'nanTime') batch.times = f64(stepVals.map(() => NaN));
        if (badKind === 'counts') batch.counts = u32(stepVals.map(() => 2));
        if (badKind === 'keyId') batch.keyIds = u32(stepVals.map(() => 5));
        if (badKind === 'stepsLen') batch.steps = f64(stepVals.slice(1));
        if (badKind === 'badKey') Object.assign(batch, { newKeys: [''], newKeysFirst: 1 });
        if (badKind === 'ctrlKey') Object.assign(batch, { newKeys: ['a\u0000b'], newKeysFirst: 1 });
        if (badKind === 'longKey') Object.assign(batch, { newKeys: ['k'.repeat(257)], newKeysFirst: 1 });
        if (badKind === 'json') batch.summaryJson = ['{"a":'];
        if (badKind === 'gapKeys') Object.assign(batch, { newKeys: ['w'], newKeysFirst: 9 });
        // seq last, hand-encoded (a later field wins), plus an unknown field now and then.
        let body = Buffer.concat([enc('RecordBatch', batch), intField(1, seq)]);
        if (r.chance(0.2)) body = Buffer.concat([body, intField(900, 12345)]);
        s.write(lenField(2, body));
        fuzzed.batches++;
        // The model (see Registry.onBatch).
        if (!seqValid) rejected++;
        else if (Number(seq) <= last) { /* a resend: acknowledged, not stored again */ }
        else if (badKind) {
          rejected++;
          if (Number(seq) === last + 1) last = Number(seq);
        } else {
          expected.push(...vals);
          last = Number(seq);
        }
        unique += rows;
      }
      const deadline = Date.now() + 15_000;
      const done = () => answers.some((a) => a.ack && a.ack.seq >= last) && answers.filter((a) => a.control?.kind === 'rejected').length >= rejected;
      while (!done() && !failed && Date.now() < deadline) await new Promise((res) => setTimeout(res, 5));
      expect(failed, `stream ${si} failed`).toBeNull();
      expect(done(), `stream ${si}: no ack for ${last} / ${rejected} rejections within 15 s: ${JSON.stringify(answers.slice(-3))}`).toBe(true);
      await new Promise((res) => setTimeout(res, 20)); // a stray answer would arrive now
      const rej = answers.filter((a) => a.control?.kind === 'rejected');
      expect(rej.length).toBe(rejected);
      for (const a of rej) expect(a.control.message).toMatch(/refused: \w/);
      s.end();
    }
    expect(alive(daemonPid)).toBe(true);
    const rows = await exportJsonl(t, id, ['--raw']);
    const got = rows.map((x) => x.v as number).sort((a, b) => a - b);
    expect(got).toEqual([...expected].sort((a, b) => a - b));
    for (const x of rows) expect(Number.isSafeInteger(x._step) && (x._step as number) >= 0).toBe(true);
  }, TEST_MS);

  it('byte-mutated messages on write streams: each stream ends with a clear status or is answered; nothing invalid is stored', async () => {
    const r = prng(SEED + 2);
    const run = await raw.unaryRaw('CreateRun', enc('CreateRunRequest', { project: 'fuzz', name: 'mutated' }), 'RunInfo');
    const { id, runToken } = run.res;
    const streams = 25 * SCALE;
    let seq = 0;
    for (let si = 0; si < streams; si++) {
      const s = raw.writeRaw();
      let status: { code: number; details: string } | null = null;
      let answers = 0;
      s.on('data', () => answers++);
      s.on('error', (e: grpc.ServiceError) => (status = { code: e.code, details: e.details }));
      s.on('status', (st: grpc.StatusObject) => (status ??= { code: st.code, details: st.details }));
      const open = enc('WriteRequest', { open: { runId: id, runToken, writerId: `mut${si}`, keys: ['v'] } });
      s.write(r.chance(0.1) ? mutate(r, open) : open);
      for (let k = 0; k < 10; k++) {
        seq++;
        const good = enc('WriteRequest', { batch: { seq, rows: 1, steps: f64([seq]), times: f64([1.7e9]), counts: u32([1]), keyIds: u32([0]), values: f64([seq]), newKeys: r.chance(0.3) ? [r.pick(['a', 'b/c', 'é'])] : [], newKeysFirst: 1 } });
        s.write(r.chance(0.15) ? randomBytes(r, r.int(64)) : mutate(r, good));
        fuzzed.mutatedStreamMessages++;
      }
      s.end();
      const deadline = Date.now() + 15_000;
      while (!status && Date.now() < deadline) await new Promise((res) => setTimeout(res, 5));
      expect(status, `stream ${si} got no status within 15 s (${answers} answers)`).not.toBeNull();
      expectClearStatus(status!, `mutated stream ${si}`);
      if (si % 10 === 0) expect(alive(daemonPid)).toBe(true);
    }
    expect(alive(daemonPid)).toBe(true);
    const rows = await exportJsonl(t, id, ['--raw']);
    for (const x of rows) {
      expect(Number.isSafeInteger(x._step) && (x._step as number) >= 0).toBe(true);
      for (const k of Object.keys(x)) expect(k).not.toMatch(CONTROL);
    }
    console.log(`fuzz: seed ${SEED}: ${fuzzed.unary} unary calls, ${fuzzed.batches} modelled batches, ${fuzzed.mutatedStreamMessages} mutated stream messages; daemon up, 0 invalid rows stored`);
  }, TEST_MS);
});

import { T } from './fuzz-wire.js';
function require_(type: string, b: Buffer): any {
  return T(type).toObject(T(type).decode(b), { longs: Number, defaults: true });
}
