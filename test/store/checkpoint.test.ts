// Issue 19, runs that survive restarts: a run's log closed by its daemon ends
// with a checkpoint of its replayed state and a pointer to it, and a replay
// starts there instead of at the first frame. Pinned here: the state from a
// checkpoint is exactly the state of a read of every frame (through continues,
// a rewind, rows a late writer of an earlier attempt sends, more rows and
// more finishes); a damaged, truncated or forged checkpoint is never trusted
// (the whole log is read, with the same result, and the log is still opened
// and appended to); and a real daemon continues a checkpointed run's steps,
// across a stop and an index rebuild.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Store } from '../../dist/daemon/store/store.js';
import { replayLog } from '../../dist/daemon/store/replay.js';
import { sealLog } from '../../dist/daemon/store/seal.js';
import { findCheckpoint, encodePointer, POINTER_FRAME_BYTES } from '../../dist/daemon/store/checkpoint.js';
import { FrameType, jsonFrame, encodeHistory, type RunMeta } from '../../dist/daemon/store/format.js';
import { continueFinalRun } from '../../dist/daemon/runs/resume.js';
import { encodeFrame, scanFrames, FRAME_HEADER_BYTES } from '../../dist/src/frames.js';
import { makeEnv, cliJson, exportJsonl, script, runScript, spawnScript, startDaemon, killDaemon, waitUntil, type TestEnv } from '../helpers.js';

const dirs: string[] = [];
function tmpDir(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'ldckpt-'));
  dirs.push(d);
  return d;
}
let t: TestEnv | null = null;
afterEach(async () => {
  dirs.splice(0).forEach((d) => fs.rmSync(d, { recursive: true, force: true }));
  if (t) await t.cleanup();
  t = null;
});

const bytes = (a: Float64Array | Uint32Array) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
const EVERY = 0; // a checkpoint at every close, whatever the log's size
const range = (a: number, b: number) => Array.from({ length: b - a + 1 }, (_, i) => a + i);

/** A HISTORY frame: rows of [step, [keyId, value]...]. */
function history(writerIdx: number, seq: number, rows: Array<[number, Array<[number, number]>]>): Uint8Array[] {
  const pairs = rows.flatMap(([, v]) => v);
  return encodeHistory({
    writerIdx, seq, rows: rows.length,
    steps: bytes(new Float64Array(rows.map(([s]) => s))), times: bytes(new Float64Array(rows.map(([s]) => 1000 + s))),
    values: bytes(new Float64Array(pairs.map(([, v]) => v))), counts: bytes(new Uint32Array(rows.map(([, v]) => v.length))),
    keyIds: bytes(new Uint32Array(pairs.map(([k]) => k))),
  });
}

/** A live run's batch, as the daemon appends one (writer-local key ids, mapped through the writer's key map). */
function batch(steps: number[], value: (step: number) => number) {
  return {
    rows: steps.length, steps: new Float64Array(steps), times: new Float64Array(steps.map((s) => 2000 + s)),
    counts: new Uint32Array(steps.length).fill(2), keyIds: new Uint32Array(steps.flatMap(() => [0, 1])),
    values: new Float64Array(steps.flatMap((s) => [value(s), s % 7 === 0 ? NaN : -s])),
  };
}

const meta = (id: string): RunMeta => ({
  id, project: 'p', name: id, group: 'g', jobType: '', tags: ['a'], notes: '', mode: 'online', createdAt: 1700000000.25,
  runToken: 'tok', ownerWriterId: 'w-0', host: 'h', pid: 10, rank: null, config: { lr: 0.1, nested: { a: [1, 2] } },
});

/** The parts of a replay both ways must agree on (everything but how the replay went). */
function stateOf(r: ReturnType<typeof replayLog>['run']) {
  const { fromCheckpoint: _f, checkpointProblem: _p, ...rest } = r;
  return rest;
}

/** Replays `file` from its checkpoint and reading every frame; asserts both give the same state, and returns the first. */
function sameBothWays(file: string) {
  const fromCheckpoint = replayLog(file, false).run;
  const whole = replayLog(file, false, { everyFrame: true }).run;
  expect(whole.fromCheckpoint).toBeNull();
  expect(stateOf(fromCheckpoint)).toStrictEqual(stateOf(whole));
  return fromCheckpoint;
}

/** As sameBothWays, through the store: it knows where a log it opened for appends had its checkpoint. */
function sameViaStore(store: Store, id: string) {
  const viaStore = store.replay(id, false).run;
  expect(stateOf(viaStore)).toStrictEqual(stateOf(replayLog(store.logPath(id), false, { everyFrame: true }).run));
  return viaStore;
}

/** A finished run `id` of `n` rows of keys loss and acc (writer 0), with config, summary, media, console and a BASE frame, closed by seal. */
async function finishedRun(store: Store, id: string, n: number): Promise<string> {
  const log = store.createRun(meta(id));
  log.append(FrameType.KEYS, jsonFrame({ first: 0, names: ['loss', 'acc'] }));
  log.append(FrameType.WRITER, jsonFrame({ idx: 0, writerId: 'w-0', pid: 10, host: 'h', rank: null, joinedAt: 1700000000.5 }));
  log.append(FrameType.BASE, jsonFrame({ rows: 3, lastStep: -1, supersededRows: 2, stats: [{ id: 1, last: 'NaN', min: null, max: null, count: 3 }] }));
  for (let seq = 1; seq <= n / 100; seq++) {
    const rows: Array<[number, Array<[number, number]>]> = [];
    for (let s = (seq - 1) * 100; s < seq * 100; s++) rows.push([s, s === 50 ? [[0, Infinity]] : [[0, s / 10], [1, s % 3 === 0 ? NaN : -s]]]);
    log.append(FrameType.HISTORY, history(0, seq, rows));
  }
  log.append(FrameType.HISTORY, history(0, n / 100 + 1, [[5, [[0, -0]]]])); // a step going backwards
  log.append(FrameType.SUMMARY, jsonFrame({ best: 0.5, __proto__x: 1, ['__proto__']: { kept: true } }));
  log.append(FrameType.CONFIG, jsonFrame({ batch: 32 }));
  log.append(FrameType.MEDIA, jsonFrame({ writerIdx: 0, seq: n / 100 + 2, entries: [{ key: 'h', step: 3, t: 1, kind: 'histogram', counts: [1], edges: [0, 1] }] }));
  log.append(FrameType.CONSOLE, jsonFrame({ writerIdx: 0, seq: n / 100 + 3, entries: [{ t: 1, s: 'out', l: 'hi' }] }));
  log.append(FrameType.STATE, jsonFrame({ state: 'finished', reason: '', exitCode: 0, finishedAt: 1700000100 }));
  await log.sync();
  await store.closeLog(id, log, { minBytes: EVERY });
  return store.logPath(id);
}

const owner = (n: number) => ({ host: 'h2', pid: 100 + n, rank: null, runToken: `tok${n}`, ownerWriterId: `w-${n}` });

/** Finishes a continued run as the finaliser does: the final state durable, then the log closed by the store. */
async function finish(store: Store, run: any, minBytes = EVERY): Promise<void> {
  run.log.append(FrameType.STATE, jsonFrame({ state: 'finished', reason: '', exitCode: 0, finishedAt: 1700000200 + run.attempts.length }));
  await run.log.sync();
  await store.closeLog(run.id, run.log, { minBytes });
}

describe('replay from a checkpoint', () => {
  it('a closed run ends with its checkpoint; the replay starts there (not at the first frame) and gives exactly the state of a read of every frame', async () => {
    const store = Store.open(tmpDir());
    const file = await finishedRun(store, 'r1', 2000);
    const found = findCheckpoint(file);
    expect(found && 'ref' in found).toBe(true);
    const r = sameBothWays(file);
    expect(r.fromCheckpoint).toBe((found as any).ref.offset);
    expect(r.checkpointProblem).toBeNull();
    // What the state holds, as the run was logged.
    expect(r.summary.rows).toBe(2000 + 3 + 1);
    expect(r.summary.lastStep).toBe(1999);
    expect(r.summary.stepsBackwards).toBe(1);
    expect(r.supersededRows).toBe(2);
    expect(r.userSummary['__proto__']).toEqual({ kept: true });
    expect(r.config).toMatchObject({ lr: 0.1, batch: 32 });
    expect(r.maxSeq).toEqual([23]);
    expect(r.media).toEqual({ h: { kind: 'histogram', count: 1, lastStep: 3 } });
    expect(r.final).toMatchObject({ state: 'finished' });
    // The frames before the checkpoint are not read: a replay of a log whose rows were made unreadable after it still starts there.
    const buf = fs.readFileSync(file);
    buf[firstFrameOf(file, FrameType.HISTORY) + 40] ^= 0xff;
    fs.writeFileSync(file, buf);
    expect(replayLog(file, false).run.fromCheckpoint).toBe(r.fromCheckpoint);
  });

  it('continues, a rewind, rows a late writer of an earlier attempt sends, more rows and finishes: every replay from a checkpoint equals a read of every frame, and appends after one land where they should', async () => {
    const store = Store.open(tmpDir());
    const file = await finishedRun(store, 'r2', 3000);
    const first = findCheckpoint(file) as any;

    // Attempt 2: continued from the checkpoint (the log opened for appends at its end), more rows, finished.
    let run: any = continueFinalRun(store, 'r2', owner(2), { from: 2 });
    expect(run.log.checkpoint).toMatchObject({ offset: first.ref.offset });
    let w = run.addWriter('w-2', 102, 'h2', null);
    w.keyMap = run.intern(['loss', 'acc']);
    run.appendBatch(w, 1, batch(range(3000, 3199), (s) => s), [], []); // more bytes than the checkpoint: a new one at the finish
    await run.log.sync();
    // Before it finishes (a daemon that died now): the log no longer ends with the pointer; the index says where the checkpoint is.
    expect(sameBothWays(file).fromCheckpoint).toBeNull();
    expect(sameViaStore(store, 'r2').fromCheckpoint).toBe(first.ref.offset);
    await finish(store, run);
    let r = sameBothWays(file);
    expect(r.fromCheckpoint).toBeGreaterThan(first.ref.offset); // a second checkpoint, at the end
    expect(r.attempts.map((a) => [a.n, a.state, a.fromStep])).toEqual([[1, 'finished', 0], [2, 'finished', 3000]]);
    expect(r.summary.lastStep).toBe(3199);

    // Attempt 3 rewinds to step 2500: rows above it of attempts 1 and 2 are superseded.
    run = continueFinalRun(store, 'r2', owner(3), {}, 2500);
    w = run.addWriter('w-3', 103, 'h2', null);
    w.keyMap = run.intern(['loss', 'acc', 'new']);
    run.appendBatch(w, 1, batch([2501, 2502], (s) => s + 0.5), [], []);
    await run.log.sync();
    r = sameViaStore(store, 'r2'); // the rewind follows the checkpoint: its summary is rebuilt from the whole log, the rest comes from the checkpoint
    expect(r.fromCheckpoint).not.toBeNull();
    expect(r.supersededRows).toBe(2 + 499 + 200);
    expect(r.summary.lastStep).toBe(2502);
    const beforeRewindFinish = r.fromCheckpoint;
    // A writer of attempt 1 whose spill file arrives late: its rows above 2500 are superseded, the others count.
    const late = run.restoreWriter(r.writers[0], r.maxSeq[0]);
    late.keyMap = [0, 1];
    run.appendBatch(late, 90, batch([2400, 2600], (s) => -s), [], []);
    await finish(store, run); // few bytes, but a rewind: a new checkpoint, of the latest timeline
    r = sameBothWays(file);
    const third = r.fromCheckpoint;
    expect(third).toBeGreaterThan(beforeRewindFinish!);
    expect(r.supersededRows).toBe(2 + 499 + 200 + 1);
    expect(r.maxSeq[0]).toBe(90);

    // Attempt 4 after the rewound checkpoint, no rewind: a late row of attempt 2 above 2500 is superseded by the checkpoint's timeline.
    run = continueFinalRun(store, 'r2', owner(4), {});
    expect(run.log.checkpoint).toMatchObject({ offset: third });
    const old = run.restoreWriter(r.writers[1], r.maxSeq[1]);
    old.keyMap = [0, 1];
    run.appendBatch(old, 7, batch([2503, 2000], (s) => s * 2), ['{"done":true}'], ['{"more":1}']);
    w = run.addWriter('w-4', 104, 'h2', null);
    w.keyMap = run.intern(['loss']);
    run.appendBatch(w, 1, batch([2503], (s) => s), [], []);
    await run.log.sync();
    r = sameViaStore(store, 'r2');
    expect(r.fromCheckpoint).toBe(third);
    expect(r.supersededRows).toBe(2 + 499 + 200 + 1 + 1);
    await finish(store, run);
    r = sameBothWays(file);
    expect(r.attempts.map((a) => [a.n, a.resumedFromStep])).toEqual([[1, undefined], [2, undefined], [3, 2500], [4, undefined]]);
    expect(r.userSummary).toMatchObject({ done: true });
    expect(r.config).toMatchObject({ from: 2, more: 1 });
    // Every append after a checkpoint went to the end of the log: a read of every frame finds no damage and no tail.
    const scan = scanFrames(file, () => {});
    expect(scan).toMatchObject({ tornBytes: 0, damaged: [] });
  });

  it('a small tail after a checkpoint gets only a pointer to it; checkpoints are written again once the tail outweighs them', async () => {
    const store = Store.open(tmpDir());
    const file = await finishedRun(store, 'r3', 1000);
    const first = (findCheckpoint(file) as any).ref;
    const run: any = continueFinalRun(store, 'r3', owner(2), {});
    const w = run.addWriter('w-2', 102, 'h2', null);
    w.keyMap = run.intern(['loss', 'acc']);
    run.appendBatch(w, 1, batch([1000], (s) => s), [], []);
    run.log.append(FrameType.STATE, jsonFrame({ state: 'finished', reason: '', exitCode: 0, finishedAt: 1 }));
    await run.log.sync();
    const before = fs.statSync(file).size;
    expect(await sealLog(file, run.log, { minBytes: 1024, maxReadBytes: Infinity })).toMatchObject({ wrote: 'pointer' });
    run.log.close();
    expect(fs.statSync(file).size).toBe(before + POINTER_FRAME_BYTES);
    expect((findCheckpoint(file) as any).ref).toEqual(first);
    expect(sameBothWays(file).fromCheckpoint).toBe(first.offset);
    // Sealing a log that already ends with its pointer adds nothing.
    const again = replayLog(file, true).log;
    expect(await sealLog(file, again, { minBytes: 0, maxReadBytes: Infinity })).toMatchObject({ wrote: 'nothing' });
    again.close();
    expect(fs.statSync(file).size).toBe(before + POINTER_FRAME_BYTES);
    // Over the stop-time read limit: only the pointer again.
    const run2: any = continueFinalRun(store, 'r3', owner(3), {});
    const w2 = run2.addWriter('w-3', 103, 'h2', null);
    w2.keyMap = [0, 1];
    run2.appendBatch(w2, 1, batch(range(1001, 1300), (s) => s), [], []);
    run2.log.append(FrameType.STATE, jsonFrame({ state: 'killed', reason: 'stop', exitCode: -1, finishedAt: 2, resumable: true }));
    await run2.log.sync();
    expect(await sealLog(file, run2.log, { minBytes: 0, maxReadBytes: 10 })).toMatchObject({ wrote: 'pointer' });
    run2.log.close();
    expect(sameBothWays(file).final).toMatchObject({ state: 'killed', resumable: true });
  });

  it('a log without a checkpoint (an old log, a small run, a daemon that died) is read whole, as before', async () => {
    const store = Store.open(tmpDir());
    const log = store.createRun(meta('old'));
    log.append(FrameType.KEYS, jsonFrame({ first: 0, names: ['loss'] }));
    log.append(FrameType.HISTORY, history(0, 1, [[0, [[0, 1]]]]));
    log.append(FrameType.STATE, jsonFrame({ state: 'finished', reason: '', exitCode: 0, finishedAt: 1 }));
    await log.sync();
    await store.closeLog('old', log); // the default policy: too small to be worth a checkpoint
    const r = replayLog(store.logPath('old'), false).run;
    expect(r).toMatchObject({ fromCheckpoint: null, checkpointProblem: null });
    expect(r.summary.rows).toBe(1);
    expect(findCheckpoint(store.logPath('old'))).toBeNull();
  });
});

describe('a damaged or forged checkpoint is never trusted', () => {
  /** A sealed run's log, its checkpoint, and a copy of it to damage. */
  async function sealed() {
    const dir = tmpDir();
    const store = Store.open(path.join(dir, 'data'));
    const file = await finishedRun(store, 'd', 2000);
    const ref = (findCheckpoint(file) as any).ref as { offset: number; length: number };
    return { file, ref, copy: (name: string) => { const f = path.join(dir, name); fs.copyFileSync(file, f); return f; } };
  }

  /** Replaces the frame at `offset` (whose payload is `length` bytes) with a valid frame of `type` holding `payload`. */
  function rewriteFrame(file: string, offset: number, length: number, type: number, payload: Uint8Array): void {
    const buf = fs.readFileSync(file);
    fs.writeFileSync(file, Buffer.concat([buf.subarray(0, offset), encodeFrame(type, [payload]), buf.subarray(offset + FRAME_HEADER_BYTES + length)]));
  }

  /** The checkpoint's payload with its JSON changed by `edit` (the same length, so the pointer still fits), framed with a valid checksum. */
  function editJson(file: string, ref: { offset: number; length: number }, edit: (json: string) => string): void {
    const buf = fs.readFileSync(file);
    const p = Buffer.from(buf.subarray(ref.offset + FRAME_HEADER_BYTES, ref.offset + FRAME_HEADER_BYTES + ref.length));
    const jsonBytes = p.readUInt32LE(4);
    const json = p.subarray(16, 16 + jsonBytes).toString('latin1');
    const edited = Buffer.from(edit(json), 'latin1');
    expect(edited.byteLength).toBe(jsonBytes);
    edited.copy(p, 16);
    rewriteFrame(file, ref.offset, ref.length, FrameType.CHECKPOINT, p);
  }

  it('bad checksums, a pointer past the end or at another frame, JSON garbage, a wrong offset, another run, a bad shape, a truncated log: each is read whole, with the same state, and opens for appends', async () => {
    const { file, ref, copy } = await sealed();
    const good = replayLog(file, false).run;
    expect(good.fromCheckpoint).toBe(ref.offset);
    const size = fs.statSync(file).size;
    const pointerAt = size - POINTER_FRAME_BYTES;
    const cases: Array<[string, (f: string) => void, RegExp | null]> = [
      ['pointer checksum', (f) => flip(f, pointerAt + FRAME_HEADER_BYTES + 2), /pointer .* fails its checksum/],
      ['pointer past the end', (f) => rewriteFrame(f, pointerAt, 24, FrameType.CHECKPOINT_AT, encodePointer({ offset: size + 100, length: ref.length })), /outside the .*-byte log/],
      ['pointer at a history frame', (f) => rewriteFrame(f, pointerAt, 24, FrameType.CHECKPOINT_AT, encodePointer({ offset: firstFrameOf(f, FrameType.HISTORY), length: ref.length })), /is not a checkpoint frame/],
      ['pointer at offset 0', (f) => rewriteFrame(f, pointerAt, 24, FrameType.CHECKPOINT_AT, encodePointer({ offset: 0, length: ref.length })), /outside/],
      ['checkpoint checksum', (f) => flip(f, ref.offset + FRAME_HEADER_BYTES + 40), /fails its checksum/],
      ['JSON garbage', (f) => editJson(f, ref, (j) => 'x' + j.slice(1)), /JSON does not parse/],
      ['a wrong offset', (f) => editJson(f, ref, (j) => j.replace(/"offset":(\d+)/, (_m, d: string) => `"offset":${d.slice(0, -1)}${(Number(d.slice(-1)) + 1) % 10}`)), /says it was written at offset/],
      ['another run', (f) => editJson(f, ref, (j) => j.replace('"id":"d"', '"id":"e"')), /not of the run/],
      ['a bad shape', (f) => editJson(f, ref, (j) => j.replace('"keys":["loss","acc"]', '"keys":["loss",12345]')), /bad keys/],
      ['a summary of another size', (f) => editJson(f, ref, (j) => j.replace('"size":2', '"size":3')), /bad summary/],
      ['a truncated log', (f) => fs.truncateSync(f, ref.offset + 100), null],
      ['a pointer without its checkpoint', (f) => fs.truncateSync(f, ref.offset), null],
    ];
    for (const [what, damage, problem] of cases) {
      const f = copy(what.replace(/ /g, '-'));
      damage(f);
      const r = replayLog(f, false).run;
      expect(r.fromCheckpoint, what).toBeNull();
      if (problem) expect(r.checkpointProblem, what).toMatch(problem);
      else expect(r.checkpointProblem, what).toBeNull();
      expect(stateOf(r), what).toStrictEqual(stateOf(replayLog(f, false, { everyFrame: true }).run));
      expect(r.summary.rows, what).toBe(good.summary.rows);
      expect(r.attempts, what).toEqual(good.attempts);
      // Opened for appends: a torn tail is cut, appends go to the end, and a read of every frame finds them.
      const { log } = replayLog(f, true);
      log.append(FrameType.SUMMARY, jsonFrame({ after: what }));
      await log.sync();
      log.close();
      expect(replayLog(f, false).run.userSummary.after, what).toBe(what);
    }
  });

  it('a store whose run has a damaged checkpoint says so once and reads the whole log; the daemon-facing replay does not throw', async () => {
    const dir = tmpDir();
    const lines: string[] = [];
    const store = Store.open(path.join(dir, 'data'), (l) => lines.push(l));
    const file = await finishedRun(store, 'd2', 2000);
    const ref = (findCheckpoint(file) as any).ref;
    flip(file, ref.offset + FRAME_HEADER_BYTES + 20);
    const { run, log } = store.replay('d2', true);
    expect(run.fromCheckpoint).toBeNull();
    expect(lines.join('\n')).toMatch(/store: run d2: its checkpoint is not used: the checkpoint at offset \d+ .* fails its checksum; read the whole log instead/);
    // Closing it again writes a new checkpoint after the damaged one, which the next replay uses.
    await store.closeLog('d2', log!, { minBytes: EVERY });
    expect(sameBothWays(file).fromCheckpoint).toBeGreaterThan(ref.offset);
  });
});

function flip(file: string, at: number): void {
  const buf = fs.readFileSync(file);
  buf[at] ^= 0x5a;
  fs.writeFileSync(file, buf);
}

function firstFrameOf(file: string, type: number): number {
  let at = -1;
  scanFrames(file, (t, _p, offset) => {
    if (t === type && at < 0) at = offset;
  });
  return at;
}

describe('a real daemon continues a checkpointed run', () => {
  /** A trainer: opens run `id` (`from`: `-`, `allow` or `resume:S`), logs steps `first`..`last` (or `auto` rows without steps), finishes. */
  function trainer(env: TestEnv): string {
    return script(env, 'trainer.mjs', `
      const [id, from, first, last] = process.argv.slice(2);
      const opts = { project: 'ckpt', id, onError: 'raise' };
      if (from === 'allow') opts.resume = 'allow';
      if (from.startsWith('resume:')) opts.resumeFrom = { runId: id, step: Number(from.slice(7)) };
      const run = await logd.init(opts);
      if (first === 'auto') for (let i = 0; i < Number(last); i++) run.log({ loss: -i });
      else for (let s = Number(first); s <= Number(last); s++) run.log({ loss: s, acc: s / 2 }, { step: s });
      console.log('done ' + (await run.finish()).state);
    `);
  }
  const logOf = (env: TestEnv, id: string) => path.join(env.dataDir, 'runs', id, 'records.log');

  it('finish writes the checkpoint; resume allow goes on from the last step, resume_from rewinds, a stop and an index rebuild keep it all', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    const env = t;
    const daemon = await startDaemon(env);
    const w = trainer(env);
    expect((await runScript(env, w, ['big', '-', '0', '9999'])).stdout).toContain('done finished');
    const first = findCheckpoint(logOf(env, 'big')) as any;
    expect(first?.ref?.offset).toBeGreaterThan(256 * 1024);
    // Continued without steps: log() goes on from step 10000; the daemon read the log on from the checkpoint.
    expect((await runScript(env, w, ['big', 'allow', 'auto', '3'])).stdout).toContain('done finished');
    expect(daemon.stderr()).toMatch(new RegExp(`run big continued as attempt 2 .*from step 10000 .*its log read on from the checkpoint at offset ${first.ref.offset}\n`));
    let info = await cliJson(env, ['show', 'big']);
    expect(info).toMatchObject({ state: 'finished', historyRows: 10003 });
    expect(info.metadata.lastStep).toBe(10002);
    expect(info.metadata.attempts.map((a: any) => [a.n, a.fromStep])).toEqual([[1, 0], [2, 10000]]);
    // A rewind to step 9000 after the checkpoint.
    expect((await runScript(env, w, ['big', 'resume:9000', '9001', '9004'])).stdout).toContain('done finished');
    const check = async () => {
      const rows = await exportJsonl(env, 'big');
      expect(rows.map((r) => r._step)).toEqual(range(0, 9004));
      expect(rows.slice(-4).map((r) => r.loss)).toEqual(range(9001, 9004));
      const shown = await cliJson(env, ['show', 'big']);
      expect(shown).toMatchObject({ state: 'finished', historyRows: 9005 });
      expect(shown.metadata).toMatchObject({ lastStep: 9004, supersededRows: 999 + 3 });
      expect(shown.metadata.stats.loss).toMatchObject({ last: 9004, count: 9005 + 0 });
      expect(shown.metadata.attempts.map((a: any) => [a.n, a.state, a.fromStep, a.resumedFromStep])).toEqual([[1, 'finished', 0, undefined], [2, 'finished', 10000, undefined], [3, 'finished', 9001, 9000]]);
      return shown;
    };
    const before = await check();
    // What the daemon's replays read: each continue started from a checkpoint, and so does the next one.
    const last = replayLog(logOf(env, 'big'), false).run;
    expect(last.fromCheckpoint).toBeGreaterThan(first.ref.offset);
    expect(stateOf(last)).toStrictEqual(stateOf(replayLog(logOf(env, 'big'), false, { everyFrame: true }).run));
    // A fresh daemon and a rebuilt index read the same run back.
    await killDaemon(env.dir);
    fs.rmSync(path.join(env.dataDir, 'index.db'));
    await startDaemon(env);
    expect((await check()).metadata.stats).toEqual(before.metadata.stats);
  });

  it('a long log is read for its checkpoint on a thread: the finish does not wait for it, a resume right after does, and goes on from it', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    const env = t;
    const daemon = await startDaemon(env);
    const w = script(env, 'long.mjs', `
      const id = process.argv[2];
      const run = await logd.init({ project: 'ckpt', id, onError: 'raise' });
      const row = { loss: 0, acc: 1, lr: 2, m3: 3, m4: 4, m5: 5, m6: 6, m7: 7, m8: 8, m9: 9 };
      for (let s = 0; s < 200000; s++) {
        row.loss = s;
        run.log(row, { step: s });
        if (s % 20000 === 0) await new Promise((r) => setImmediate(r));
      }
      console.log('done ' + (await run.finish({ timeoutMs: 60000 })).state);
      const again = await logd.init({ project: 'ckpt', id, resume: 'must', onError: 'raise' });
      again.log({ loss: -1 });
      console.log('again ' + (await again.finish()).state);
    `);
    const r = await runScript(env, w, ['long'], {}, 120_000);
    expect(r.stdout).toContain('done finished');
    expect(r.stdout).toContain('again finished');
    const log = daemon.stderr();
    expect(log).toMatch(/finaliser: run long: its checkpoint is read on a thread \(\d+ MB of log\)/);
    // The second attempt opened the log after the checkpoint was in it, and read on from there.
    const m = /run long continued as attempt 2 .*from step 200000 .*its log read on from the checkpoint at offset (\d+)/.exec(log);
    expect(m, log).not.toBeNull();
    expect(Number(m![1])).toBeGreaterThan(16 * 1024 * 1024);
    await waitUntil(() => (findCheckpoint(logOf(env, 'long')) as any)?.ref !== undefined, 30_000, 'the second close to point at a checkpoint');
    const rows = await exportJsonl(env, 'long');
    expect(rows).toHaveLength(200001);
    expect(rows[200000]).toMatchObject({ _step: 200000, loss: -1 });
  }, 180_000);

  it('a run killed by a daemon stop gets its checkpoint; its owner carries on with the next daemon from there', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    const env = t;
    await startDaemon(env);
    const w = script(env, 'holder.mjs', `
      import fs from 'node:fs';
      const run = await logd.init({ project: 'ckpt', id: 'held' });
      for (let s = 0; s < 10000; s++) run.log({ loss: s }, { step: s });
      await run.flush();
      console.log('acked');
      while (!fs.existsSync(process.argv[2])) await new Promise((r) => setTimeout(r, 20));
      for (let i = 0; i < 5; i++) run.log({ loss: -1 });
      const res = await run.finish({ timeoutMs: 20000 });
      console.log('finished ' + res.state);
    `);
    const go = path.join(env.dir, 'go');
    const worker = spawnScript(env, w, [go]);
    await waitUntil(() => worker.lines.includes('acked'), 30_000, 'the rows to be acknowledged');
    await killDaemon(env.dir); // SIGTERM: the run is killed, resumable, and closed with a checkpoint
    const found = findCheckpoint(logOf(env, 'held')) as any;
    expect(found?.data?.final).toMatchObject({ state: 'killed', resumable: true });
    await startDaemon(env);
    fs.writeFileSync(go, '');
    await waitUntil(() => worker.lines.some((l) => l.startsWith('finished')), 30_000, 'the worker to finish');
    expect(worker.lines.find((l) => l.startsWith('finished'))).toBe('finished finished');
    const rows = await exportJsonl(env, 'held');
    expect(rows.map((r) => r._step)).toEqual(range(0, 10004));
    expect(rows.slice(-5).every((r) => r.loss === -1)).toBe(true);
    expect(replayLog(logOf(env, 'held'), false).run.fromCheckpoint).toBeGreaterThanOrEqual(found.ref.offset);
  });
});
