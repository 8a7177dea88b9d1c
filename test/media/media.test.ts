// Histograms, images and text (issue 20): logged beside numbers from a real
// trainer, stored durably by a real daemon (a kill -9 of the daemon loses
// nothing acknowledged), read back by `logd media`, and bad values refused
// with a clear error, by the client and again by the daemon.
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { describe, it, expect, afterEach } from 'vitest';
import { makeEnv, startDaemon, script, runScript, cli, cliJson, exportJsonl, alive, daemonPids, waitUntil, ROOT, type TestEnv } from '../helpers.js';
import { sniffImage, checkHistogram, MAX_IMAGE_BYTES } from '../../src/media.js';
import { encodePng } from '../../client/media/png.js';

let t: TestEnv;
afterEach(async () => {
  await t?.cleanup();
});

const JPEG = path.join(ROOT, 'test/fixtures/tiny.jpg'); // 5x3, written by Pillow

interface Item { w: number; rank: number | null; key: string; step: number; kind: string; counts?: number[]; edges?: number[]; nonfinite?: number; sha256?: string; format?: string; width?: number; height?: number; bytes?: number; caption?: string; text?: string; lost?: string }

async function media(runId: string, extra: string[] = []): Promise<Item[]> {
  const r = await cli(t, ['media', runId, '--json', ...extra]);
  return r.stdout.trim() === '' ? [] : r.stdout.trim().split('\n').map((l) => JSON.parse(l));
}

const TRAINER = `
import fs from 'node:fs';
const run = await logd.init({ project: 'media' });
const jpeg = fs.readFileSync(${JSON.stringify(JPEG)});
const px = new Uint8Array(16 * 8 * 3);
for (let i = 0; i < px.length; i++) px[i] = (i * 37) & 255;
for (let step = 0; step < 30; step++) {
  const row = { loss: 1 / (step + 1) };
  if (step % 10 === 0) {
    const g = new Float64Array(10000);
    for (let i = 0; i < g.length; i++) g[i] = Math.sin(i * 0.37 + step);
    g[0] = NaN; g[1] = Infinity;
    row['grad/w1'] = new logd.Histogram(g, { bins: 32 });
    row.sample = logd.Image.fromPixels(px, { width: 16, height: 8, channels: 3, caption: '<script>alert(1)</script> step ' + step });
    row.photo = new logd.Image(jpeg, { caption: 'jpeg' });
    row.note = new logd.Text('generation at ' + step + ': <b>bold?</b>');
  }
  run.log(row, { step });
}
run.log({ bins: logd.Histogram.fromBins([1, 2, 3], [0, 0.5, 1, 2]) }, { step: 40 }); // media only: no row of numbers
const errors = [];
const bad = [
  () => run.log({ loss: 5, img: new logd.Image(Buffer.from('GIF89a not an image')) }, { step: 50 }),
  () => run.log({ loss: 5, img: new logd.Image(Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(30)])) }, { step: 50 }),
  () => run.log({ loss: 5, h: logd.Histogram.fromBins([1, 2], [0, 1]) }, { step: 50 }),
  () => run.log({ loss: 5, h: logd.Histogram.fromBins([1, NaN], [0, 1, 2]) }, { step: 50 }),
  () => run.log({ loss: 5, h: logd.Histogram.fromBins([1, 1], [0, 2, 1]) }, { step: 50 }),
  () => run.log({ loss: 5, s: 'plain text' }, { step: 50 }),
  () => run.log({ loss: 5, a: [1, 2, 3] }, { step: 50 }),
  () => run.log({ loss: 5, big: new logd.Image(Buffer.alloc(${MAX_IMAGE_BYTES + 1}, 1)) }, { step: 50 }),
  () => run.log({ loss: 5, t: new logd.Text('x'.repeat(1024 * 1024 + 1)) }, { step: 50 }),
];
for (const f of bad) {
  try { f(); errors.push(null); } catch (e) { errors.push(e.constructor.name + ': ' + e.message); }
}
run.log({ loss: 0.01 }, { step: 60 });
if (process.argv[2] === 'flush-then-wait') {
  await run.flush();
  process.stdout.write('FLUSHED ' + run.id + '\\n');
  await new Promise((r) => setTimeout(r, 60_000));
}
const res = await run.finish();
process.stdout.write(JSON.stringify({ id: run.id, state: res.state, errors }) + '\\n');
`;

describe('histograms, images and text from the TypeScript client', () => {
  it('are stored with their steps and read back whole; bad values throw and lose nothing else of the run', async () => {
    t = makeEnv();
    await startDaemon(t);
    const r = await runScript(t, script(t, 'train.mjs', TRAINER));
    expect(r.exitCode, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(out.state).toBe('finished');
    // Every bad value threw a TypeError naming what is wrong, in the caller's line.
    const errors: Array<string | null> = out.errors;
    expect(errors.every((e) => e !== null && e.startsWith('TypeError: logd: ')), JSON.stringify(errors)).toBe(true);
    expect(errors[0]).toMatch(/neither PNG nor JPEG/);
    expect(errors[1]).toMatch(/PNG (is cut short|does not start with its IHDR|has a damaged chunk)/);
    expect(errors[2]).toMatch(/2 bins need 3 edges, not 2/);
    expect(errors[3]).toMatch(/count 1 is NaN/);
    expect(errors[4]).toMatch(/edges must increase/);
    expect(errors[5]).toMatch(/"s" is a string; .*new Text\(s\)/);
    expect(errors[6]).toMatch(/"a" is an array; .*new Histogram\(a\)/);
    expect(errors[7]).toMatch(/more than the 16777216 \(16 MiB\)/);
    expect(errors[8]).toMatch(/at most 1048576 bytes/);
    // The rows of numbers: every step, none of the refused rows (step 50), the good row after them.
    const rows = await exportJsonl(t, out.id, ['--keys', 'loss']);
    expect(rows.map((x) => x._step)).toEqual([...Array.from({ length: 30 }, (_, i) => i), 60]);

    const items = await media(out.id);
    const of = (key: string) => items.filter((m) => m.key === key);
    expect(of('grad/w1').map((m) => m.step)).toEqual([0, 10, 20]);
    for (const h of of('grad/w1')) {
      expect(h.kind).toBe('histogram');
      expect(h.counts).toHaveLength(32);
      expect(h.edges).toHaveLength(33);
      expect(h.counts!.reduce((a, b) => a + b, 0)).toBe(9998); // NaN and Infinity left out of the bins...
      expect(h.nonfinite).toBe(2); // ...and counted
      expect(h.edges![0]).toBeGreaterThanOrEqual(-1);
      expect(h.edges![32]).toBeLessThanOrEqual(1);
    }
    expect(of('bins')).toEqual([expect.objectContaining({ kind: 'histogram', step: 40, counts: [1, 2, 3], edges: [0, 0.5, 1, 2] })]);
    expect(of('note').map((m) => m.text)).toEqual(['generation at 0: <b>bold?</b>', 'generation at 10: <b>bold?</b>', 'generation at 20: <b>bold?</b>']);
    const samples = of('sample');
    expect(samples.map((m) => [m.step, m.format, m.width, m.height])).toEqual([[0, 'png', 16, 8], [10, 'png', 16, 8], [20, 'png', 16, 8]]);
    expect(samples[0].caption).toBe('<script>alert(1)</script> step 0');
    // The same image logged three times is one file (content-addressed).
    expect(new Set(samples.map((m) => m.sha256)).size).toBe(1);
    const photos = of('photo');
    expect(photos.map((m) => [m.format, m.width, m.height, m.bytes])).toEqual(Array(3).fill(['jpeg', 5, 3, fs.statSync(JPEG).size]));
    // Filters.
    expect((await media(out.id, ['--kind', 'text'])).map((m) => m.key)).toEqual(['note', 'note', 'note']);
    expect((await media(out.id, ['--key', 'photo'])).length).toBe(3);

    // Images saved out are byte for byte what was logged: the JPEG as it was, the pixels as a PNG that decodes.
    const dir = path.join(t.dir, 'saved');
    await cli(t, ['media', out.id, '--kind', 'image', '--save', dir]);
    const files = fs.readdirSync(dir).sort();
    expect(files).toHaveLength(6);
    const jpgs = files.filter((f) => f.endsWith('.jpg'));
    expect(jpgs).toHaveLength(3);
    expect(fs.readFileSync(path.join(dir, jpgs[0])).equals(fs.readFileSync(JPEG))).toBe(true);
    const png = fs.readFileSync(path.join(dir, files.find((f) => f.startsWith('sample_step0_'))!));
    expect(crypto.createHash('sha256').update(png).digest('hex')).toBe(samples[0].sha256);
    expect(sniffImage(png)).toEqual({ format: 'png', width: 16, height: 8 });

    // The run says what media it has, and the people's view lists them.
    const shown = await cliJson(t, ['show', out.id]);
    expect(shown.metadata.media).toEqual({
      'grad/w1': { kind: 'histogram', count: 3, lastStep: 20 },
      sample: { kind: 'image', count: 3, lastStep: 20 },
      photo: { kind: 'image', count: 3, lastStep: 20 },
      note: { kind: 'text', count: 3, lastStep: 20 },
      bins: { kind: 'histogram', count: 1, lastStep: 40 },
    });
    const text = await cli(t, ['show', out.id]);
    expect(text.stdout).toMatch(/media: "grad\/w1" \(3 histograms\)/);
    const table = await cli(t, ['media', out.id, '--kind', 'image']);
    expect(table.stdout).toMatch(/sample.*16x8 png/);
    // The columns line up under the header, whatever each key's length.
    const lines = table.stdout.trimEnd().split('\n');
    const col = lines[0].indexOf('value');
    for (const l of lines.slice(1)) expect(l.slice(col), table.stdout).toMatch(/^(\d+x\d+ (png|jpeg)|LOST)/);
  });

  it('a daemon killed with SIGKILL after the batch was acknowledged: the next daemon has every histogram, image and text', async () => {
    t = makeEnv();
    const d = await startDaemon(t);
    const p = (await import('node:child_process')).spawn(process.execPath, [script(t, 'train.mjs', TRAINER), 'flush-then-wait'], { env: t.env, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    p.stdout!.on('data', (b: Buffer) => (out += b.toString()));
    await waitUntil(() => /FLUSHED (\S+)/.test(out), 30_000, 'the trainer to flush');
    const id = /FLUSHED (\S+)/.exec(out)![1];
    process.kill(d.pid, 'SIGKILL');
    p.kill('SIGKILL');
    await waitUntil(() => !alive(d.pid) && daemonPids(t.dir).length === 0, 10_000, 'the daemon to be gone');
    await startDaemon(t);
    const items = await media(id);
    expect(items.filter((m) => m.key === 'grad/w1')).toHaveLength(3);
    expect(items.filter((m) => m.kind === 'image')).toHaveLength(6);
    expect(items.filter((m) => m.kind === 'text')).toHaveLength(3);
    const dir = path.join(t.dir, 'saved');
    await cli(t, ['media', id, '--kind', 'image', '--save', dir]);
    expect(fs.readdirSync(dir)).toHaveLength(6);
    const shown = await cliJson(t, ['show', id]);
    expect(shown.metadata.media.sample).toEqual({ kind: 'image', count: 3, lastStep: 20 });
  });

  it('a trainer killed with SIGKILL right after logging media: its crash journal gives back the histogram, the JPEG byte for byte and the text', async () => {
    t = makeEnv();
    await startDaemon(t);
    // A flush interval longer than the test: the last row's media reach the daemon only through the journal.
    const r = await runScript(t, script(t, 'kill.mjs', `
import fs from 'node:fs';
const run = await logd.init({ project: 'media-kill' });
process.stderr.write('RUN=' + run.id + '\\n');
for (let step = 0; step < 20; step++) run.log({ loss: 1 / (step + 1) }, { step });
run.log({ 'grad/w': logd.Histogram.fromBins([4, 5, 6], [-1, 0, 1, 2]), photo: new logd.Image(fs.readFileSync(${JSON.stringify(JPEG)}), { caption: 'last' }),
  note: new logd.Text('the last words') }, { step: 20 });
process.kill(process.pid, 'SIGKILL');
`), [], { LOGD_FLUSH_INTERVAL_MS: '600000' });
    expect(r.signal).toBe('SIGKILL');
    const id = /RUN=(\S+)/.exec(r.stderr)![1];
    await waitUntil(async () => (await cliJson(t, ['show', id])).state === 'crashed', 15_000, 'the run to be marked crashed');
    await waitUntil(async () => (await media(id)).length === 3, 15_000, 'the journal to give back the media');
    const items = await media(id);
    expect(items.find((m) => m.kind === 'histogram')).toMatchObject({ key: 'grad/w', step: 20, counts: [4, 5, 6], edges: [-1, 0, 1, 2] });
    expect(items.find((m) => m.kind === 'image')).toMatchObject({ key: 'photo', step: 20, format: 'jpeg', caption: 'last' });
    expect(items.find((m) => m.kind === 'text')).toMatchObject({ key: 'note', text: 'the last words' });
    expect((await cliJson(t, ['show', id])).historyRows).toBe(20);
    const dir = path.join(t.dir, 'saved');
    await cli(t, ['media', id, '--kind', 'image', '--save', dir]);
    const [saved] = fs.readdirSync(dir);
    expect(fs.readFileSync(path.join(dir, saved!)).equals(fs.readFileSync(JPEG))).toBe(true);
  });
});

describe('names a user may pick', () => {
  it('__proto__ and constructor are ordinary media keys, and _step is refused as for numbers', async () => {
    t = makeEnv();
    await startDaemon(t);
    const r = await runScript(t, script(t, 'names.mjs', `
const run = await logd.init({ project: 'media-names' });
run.log({ ['__proto__']: new logd.Text('x'), constructor: logd.Histogram.fromBins([1], [0, 1]) }, { step: 1 });
let refused = '';
try { run.log({ _step: new logd.Text('x') }); } catch (e) { refused = e.message; }
await run.finish();
process.stdout.write(JSON.stringify({ id: run.id, refused }) + '\\n');
`));
    expect(r.exitCode, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim());
    expect(out.refused).toMatch(/"_step" is reserved/);
    expect((await media(out.id)).map((m) => [m.key, m.kind])).toEqual([['__proto__', 'text'], ['constructor', 'histogram']]);
    const shown = await cliJson(t, ['show', out.id]);
    expect(Object.keys(shown.metadata.media).sort()).toEqual(['__proto__', 'constructor']);
  });
});

describe('media a client may send: the daemon checks them again', () => {
  it('refuses bad media with a reason, stores what its own bytes say an image is, and stays up', async () => {
    t = makeEnv();
    const d = await startDaemon(t);
    const svc = JSON.parse(fs.readFileSync(path.join(t.runtimeDir, 'service.json'), 'utf8'));
    const def = protoLoader.loadSync(path.join(ROOT, 'proto/logd/v1/logd.proto'), { longs: Number, defaults: true, oneofs: true });
    const Logd = (grpc.loadPackageDefinition(def) as any).logd.v1.Logd;
    const c = new Logd(svc.socket, grpc.credentials.createInsecure());
    const md = new grpc.Metadata();
    md.set('x-logd-token', svc.token);
    const run: any = await new Promise((res, rej) => c.CreateRun({ project: 'hostile' }, md, (e: Error | null, r: unknown) => (e ? rej(e) : res(r))));
    const s = c.write(md);
    const msgs: any[] = [];
    s.on('data', (m: any) => msgs.push(m));
    s.on('error', () => {});
    s.write({ open: { runId: run.id, runToken: run.runToken, writerId: run.ownerWriterId, keys: [] } });
    const waitFor = async (pred: (m: any) => boolean) => {
      await waitUntil(() => msgs.some(pred), 10_000, 'an answer from the daemon');
      return msgs.find(pred);
    };
    await waitFor((m) => m.opened);
    const f64 = (a: number[]) => Buffer.from(new Float64Array(a).buffer);
    const png = encodePng(new Uint8Array(2 * 3 * 3), 3, 2, 3);
    const bad: Array<[any, RegExp]> = [
      [{ key: 'h', kind: 'histogram', counts: f64([1, 2]), edges: f64([0, 1]) }, /2 bins need 3 edges/],
      [{ key: 'h', kind: 'histogram', counts: f64([1, NaN]), edges: f64([0, 1, 2]) }, /count 1 is NaN/],
      [{ key: 'h', kind: 'histogram', counts: f64([1]), edges: f64([0, Infinity]) }, /edge 1 is Infinity/],
      [{ key: 'h', kind: 'histogram', counts: Buffer.alloc(5), edges: f64([0, 1]) }, /not a whole number of float64/],
      [{ key: 'i', kind: 'image', data: Buffer.from('<svg onload=alert(1)>'), format: 'png' }, /neither PNG nor JPEG/],
      [{ key: 'i', kind: 'image', data: png.subarray(0, png.length - 12), format: 'png' }, /cut short/],
      [{ key: 'i', kind: 'image', data: Buffer.alloc(MAX_IMAGE_BYTES + 1), format: 'png' }, /16 MiB/],
      [{ key: 'i', kind: 'image', data: png, caption: 'c'.repeat(5000) }, /caption is more than 4096 bytes/],
      [{ key: 't', kind: 'text', text: 'x'.repeat(1024 * 1024 + 1) }, /more than 1048576 bytes/],
      [{ key: 'v', kind: 'video' }, /kind "video" is none of histogram, image, text/],
      [{ key: '', kind: 'text', text: 'x' }, /metric name is empty/],
      [{ key: 't', kind: 'text', text: 'x', step: -1 }, /step -1 must be a non-negative integer/],
    ];
    let seq = 0;
    for (const [m, why] of bad) {
      seq++;
      s.write({ batch: { seq, rows: 0, media: [{ step: 1, time: 1, ...m }] } });
      const got = await waitFor((x) => x.control?.kind === 'rejected' && x.control.seq === seq);
      expect(got.control.message, JSON.stringify(m).slice(0, 80)).toMatch(why);
    }
    // A good batch: an image that claims the wrong format and size is stored as what its bytes are.
    seq++;
    s.write({ batch: { seq, rows: 0, media: [
      { key: 'img', step: 3, time: 1, kind: 'image', data: png, format: 'jpeg', width: 999, height: 999, caption: 'x' },
      { key: 'txt', step: 3, time: 1, kind: 'text', text: '\u0000\u001b[31mred\u001b[0m' },
    ] } });
    await waitFor((x) => x.ack && x.ack.seq >= seq);
    s.end();
    const items = await media(run.id);
    expect(items).toEqual([
      expect.objectContaining({ key: 'img', step: 3, format: 'png', width: 3, height: 2, bytes: png.length }),
      expect.objectContaining({ key: 'txt', text: '\u0000\u001b[31mred\u001b[0m' }),
    ]);
    expect(alive(d.pid)).toBe(true);
    // Reading an image by a name that is not a sha256 never leaves the run's media folder.
    const bogus = await cli(t, ['media', run.id, '--kind', 'image', '--save', path.join(t.dir, 'out')]);
    expect(bogus.exitCode).toBe(0);
    c.close();
  });
});

describe('the checks themselves', () => {
  it('sniffImage reads PNG and JPEG headers and refuses the rest', () => {
    const png = encodePng(new Uint8Array(7 * 5 * 4), 7, 5, 4);
    expect(sniffImage(png)).toEqual({ format: 'png', width: 7, height: 5 });
    expect(sniffImage(fs.readFileSync(JPEG))).toEqual({ format: 'jpeg', width: 5, height: 3 });
    expect(sniffImage(fs.readFileSync(JPEG).subarray(0, 300))).toMatch(/JPEG is cut short/);
    expect(sniffImage(crypto.randomBytes(4096))).toMatch(/neither PNG nor JPEG/);
    const huge = Buffer.from(png);
    huge.writeUInt32BE(100_000, 16); // IHDR width
    expect(sniffImage(huge)).toMatch(/100000x5; each side must be 1..32768/);
    expect(sniffImage(new Uint8Array(0))).toMatch(/neither/);
  });

  it('checkHistogram wants n counts >= 0 and n + 1 finite increasing edges', () => {
    expect(checkHistogram([1, 0, 2], [0, 1, 2, 3])).toBeNull();
    expect(checkHistogram([], [0])).toMatch(/1..4096 bins, not 0/);
    expect(checkHistogram([-1], [0, 1])).toMatch(/count 0 is -1/);
    expect(checkHistogram([1, 1], [0, 1, 1])).toMatch(/edges must increase/);
  });
});
