// Histograms, images and console output from the Python client on a real DDP
// job: torchrun, 4 ranks (Debian's torch 1.13, gloo, CPU), every rank logging
// its own run of one group (test/python/fixtures/media_train.py) into a real
// daemon; rank 3 ends with print() and SIGKILL, so its last line can only come
// back from its crash journal. Everything is read back as a user reads it:
// `logd runs/show/media/logs --json`, `logd media --save`.
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import crypto from 'node:crypto';
import { execa } from 'execa';
import { describe, it, expect, beforeAll, afterAll, afterEach } from 'vitest';
import { makeEnv, startDaemon, killDaemon, cli, cliJson, waitUntil, type TestEnv } from '../helpers.js';
import { FIXTURES, PYTHON, torchMissing, pyEnv, runPython, freePort, readJson } from './py-helpers.js';

interface Item { w: number; rank: number | null; key: string; step: number; t: number; kind: string; counts?: number[]; edges?: number[]; nonfinite?: number; sha256?: string; format?: string; width?: number; height?: number; bytes?: number; caption?: string }
interface LogLine { t: number; stream: 'out' | 'err'; rank: number | null; writer: number; line: string }
interface RankOut { run: string; pid: number; grads: Record<string, { numel: number; min: number; max: number }> }

const LAST_WORDS = 'train: rank 3 last words before SIGKILL';
const STEPS = 60;
const HIST_STEPS = [0, 10, 20, 30, 40, 50];

const jsonLines = <T>(s: string): T[] => (s.trim() === '' ? [] : s.trim().split('\n').map((l) => JSON.parse(l) as T));

async function media(t: TestEnv, id: string, extra: string[] = []): Promise<Item[]> {
  return jsonLines<Item>((await cli(t, ['media', id, '--json', ...extra])).stdout);
}

async function logs(t: TestEnv, id: string): Promise<LogLine[]> {
  return jsonLines<LogLine>((await cli(t, ['logs', id, '--json'])).stdout);
}

/** A PNG file decoded as far as its pixels: chunks and CRCs intact, IHDR's size, IDAT inflating to H rows of W pixels. */
function decodePng(b: Buffer): { width: number; height: number; channels: number } {
  expect(b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))).toBe(true);
  let at = 8;
  let width = 0, height = 0, channels = 0;
  const idat: Buffer[] = [];
  for (;;) {
    const len = b.readUInt32BE(at);
    const kind = b.toString('latin1', at + 4, at + 8);
    const data = b.subarray(at + 8, at + 8 + len);
    expect(b.readUInt32BE(at + 8 + len), `CRC of ${kind}`).toBe(zlib.crc32(b.subarray(at + 4, at + 8 + len)));
    if (kind === 'IHDR') {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      expect(data[8]).toBe(8); // bit depth
      channels = ({ 0: 1, 4: 2, 2: 3, 6: 4 } as Record<number, number>)[data[9]];
    } else if (kind === 'IDAT') idat.push(data);
    at += 12 + len;
    if (kind === 'IEND') break;
  }
  expect(at).toBe(b.length);
  expect(zlib.inflateSync(Buffer.concat(idat)).length).toBe(height * (1 + width * channels));
  return { width, height, channels };
}

describe.skipIf(torchMissing !== null)(`media and console output of a torchrun job, 4 ranks (DDP, gloo)${torchMissing ? ` (skipped: ${torchMissing})` : ''}`, () => {
  let t: TestEnv;
  let job: { exitCode?: number; all?: string };
  const out: RankOut[] = [];

  beforeAll(async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000' });
    await startDaemon(t);
    const dir = path.join(t.dir, 'out');
    fs.mkdirSync(dir);
    // Debian's torch 1.13 on Python 3.11 needs --redirects/--tee/--log_dir to start at all.
    const args = ['-m', 'torch.distributed.run', '--nproc_per_node', '4', '--master_port', String(await freePort()), '--monitor_interval', '1',
      '--redirects', '1', '--tee', '1', '--log_dir', path.join(t.dir, 'torchrun'), path.join(FIXTURES, 'media_train.py'), dir, 'media-ddp'];
    job = await execa(PYTHON, args, { env: pyEnv(t, { OMP_NUM_THREADS: '1' }), extendEnv: false, reject: false, all: true, timeout: 300_000 });
    for (let r = 0; r < 4; r++) {
      const f = path.join(dir, `rank${r}.json`);
      expect(fs.existsSync(f), `rank ${r} wrote no ${f}:\n${job.all}`).toBe(true);
      out.push(readJson<RankOut>(f));
    }
  }, 360_000);

  afterAll(async () => {
    if (!t) return;
    await killDaemon(t.dir);
    await t.cleanup();
  });

  it('torchrun reports rank 3 killed by SIGKILL as its one failure; the four runs of the group are there, rank 3 `crashed` with its last line from the crash journal', async () => {
    expect(job.exitCode, job.all).not.toBe(0);
    expect(job.all).toMatch(/rank\s*: 3 \(local_rank: 3\)\s*\n\s*exitcode\s*: -9/);
    expect(job.all).toMatch(/Signal 9 \(SIGKILL\) received by PID/);
    expect(job.all).toMatch(/Failures:\s*\n\s*<NO_OTHER_FAILURES>/);

    // The daemon finds rank 3's owner gone and takes the rest from its crash journal: poll, with a deadline.
    let lines: LogLine[] = [];
    let state = '';
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      state = (await cliJson<{ state: string }>(t, ['show', out[3].run])).state;
      lines = await logs(t, out[3].run);
      if (state === 'crashed' && lines.some((l) => l.line === LAST_WORDS)) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    expect(state).toBe('crashed');
    const last = lines.filter((l) => l.line.startsWith('train: ')).pop();
    expect(last).toMatchObject({ stream: 'out', rank: 3, line: LAST_WORDS });

    const runs = await cliJson<Array<{ id: string; name: string; group: string; state: string }>>(t, ['runs', '--group', 'media-ddp']);
    const byId = new Map(runs.map((r) => [r.id, r]));
    expect(runs).toHaveLength(4);
    for (let r = 0; r < 4; r++) expect(byId.get(out[r].run)).toMatchObject({ name: `rank${r}`, group: 'media-ddp', state: r === 3 ? 'crashed' : 'finished' });
  }, 90_000);

  it("every rank's run holds its own gradient histograms at steps 0, 10, ..., 50, binned from the all-reduced gradient", async () => {
    for (let r = 0; r < 4; r++) {
      const hs = await media(t, out[r].run, ['--kind', 'histogram']);
      expect(hs.map((h) => h.step)).toEqual(HIST_STEPS);
      for (const h of hs) {
        const g = out[r].grads[String(h.step)];
        expect(h).toMatchObject({ rank: r, key: 'grad/layer0.weight', kind: 'histogram', nonfinite: 0 });
        expect(h.counts).toHaveLength(64);
        expect(h.edges).toHaveLength(65);
        expect(h.counts!.reduce((a, b) => a + b, 0)).toBe(g.numel);
        // The edges span the gradient as the rank saw it (float32 min/max, stored as float64).
        expect(h.edges![0]).toBeCloseTo(g.min, 6);
        expect(h.edges![64]).toBeCloseTo(g.max, 6);
      }
    }
    // DDP leaves every rank the same averaged gradient, so the four ranks' histograms agree bin for bin.
    const all = await Promise.all(out.map((o) => media(t, o.run, ['--kind', 'histogram'])));
    for (let i = 0; i < HIST_STEPS.length; i++) for (let r = 1; r < 4; r++) expect(all[r][i].counts).toEqual(all[0][i].counts);
    const show = await cliJson<{ metadata: { media?: Record<string, { kind: string; count: number; lastStep: number }> } }>(t, ['show', out[1].run]);
    expect(show.metadata.media).toEqual({ 'grad/layer0.weight': { kind: 'histogram', count: 6, lastStep: 50 } });
  });

  it("rank 0's run holds its images (a CHW tensor and an HWC array at steps 0 and 50) and they save as PNGs that decode; no other rank has an image", async () => {
    const imgs = await media(t, out[0].run, ['--kind', 'image']);
    expect(imgs.map((m) => [m.step, m.key, m.width, m.height, m.format, m.rank, m.caption]).sort()).toEqual([
      [0, 'sample/array', 40, 20, 'png', 0, 'HWC array, step 0'],
      [0, 'sample/tensor', 32, 24, 'png', 0, 'CHW tensor, step 0'],
      [50, 'sample/array', 40, 20, 'png', 0, 'HWC array, step 50'],
      [50, 'sample/tensor', 32, 24, 'png', 0, 'CHW tensor, step 50'],
    ]);
    const dir = path.join(t.dir, 'saved');
    await cli(t, ['media', out[0].run, '--kind', 'image', '--save', dir]);
    const files = fs.readdirSync(dir).sort();
    expect(files).toHaveLength(4);
    for (const m of imgs) {
      const f = files.find((x) => x.includes(m.sha256!.slice(0, 12)))!;
      expect(f, `a saved file for ${m.key} at step ${m.step}`).toBeTruthy();
      const b = fs.readFileSync(path.join(dir, f));
      expect(crypto.createHash('sha256').update(b).digest('hex')).toBe(m.sha256);
      expect(b.length).toBe(m.bytes);
      expect(decodePng(b)).toEqual({ width: m.width, height: m.height, channels: 3 });
    }
    for (let r = 1; r < 4; r++) expect(await media(t, out[r].run, ['--kind', 'image'])).toEqual([]);
  });

  it("`logd logs` of each run holds that rank's own stdout and stderr lines, in order, on the right streams", async () => {
    for (let r = 0; r < 4; r++) {
      const lines = (await logs(t, out[r].run)).filter((l) => l.line.startsWith('train: '));
      expect(lines.every((l) => l.rank === r), JSON.stringify(lines.filter((l) => l.rank !== r))).toBe(true);
      const want: Array<[string, string]> = [];
      for (let s = 0; s < STEPS; s++) {
        if (s % 10 === 0) want.push(['err', `train: rank ${r} stderr at step ${s}`]);
        want.push(['out', `train: rank ${r} step ${s}`]);
      }
      if (r === 3) want.push(['out', LAST_WORDS]);
      expect(lines.map((l) => [l.stream, l.line])).toEqual(want);
    }
  });
});

describe.skipIf(torchMissing !== null)(`a histogram of a large tensor${torchMissing ? ` (skipped: ${torchMissing})` : ''}`, () => {
  let t: TestEnv;
  afterEach(async () => {
    if (!t) return;
    await killDaemon(t.dir);
    await t.cleanup();
  });

  it('a 10 M-element float32 tensor: binned with peak RSS growth under 3x its own 40 MB, NaN and infinities counted as nonfinite', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    await startDaemon(t);
    const file = path.join(t.dir, 'big.py');
    fs.writeFileSync(file, `
import json, sys, time, torch, logd

def hwm_kib():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmHWM:"))

run = logd.init(project="media-big")
t = torch.randn(10_000_000, generator=torch.Generator().manual_seed(0))
t[:1000] = float("nan")
t[1000:1500] = float("inf")
t[1500:1700] = float("-inf")
before = hwm_kib()
t0 = time.perf_counter()
h = logd.Histogram(t, bins=128)
secs = time.perf_counter() - t0
after = hwm_kib()
run.log({"grad/big": h}, step=0)
run.finish()
print(json.dumps({"run": run.id, "growth": (after - before) * 1024, "tensor": t.numel() * t.element_size(), "secs": secs}))
`);
    const r = await runPython(t, [file], { env: { OMP_NUM_THREADS: '1' }, timeout: 120_000 });
    expect(r.exitCode, r.all).toBe(0);
    const res = JSON.parse(r.stdout.trim().split('\n').pop()!) as { run: string; growth: number; tensor: number; secs: number };
    expect(res.tensor).toBe(40_000_000);
    expect(res.growth, `peak RSS grew by ${res.growth} bytes`).toBeLessThan(3 * res.tensor);
    const [h] = await media(t, res.run);
    expect(h).toMatchObject({ key: 'grad/big', kind: 'histogram', step: 0, nonfinite: 1700 });
    expect(h.counts).toHaveLength(128);
    expect(h.counts!.reduce((a, b) => a + b, 0)).toBe(10_000_000 - 1700);
    expect(h.edges!.every(Number.isFinite)).toBe(true);
    // A standard normal sample of ten million: its extremes lie near +-5.
    expect(h.edges![0]).toBeLessThan(-4);
    expect(h.edges![128]).toBeGreaterThan(4);
  }, 150_000);
});

describe.skipIf(torchMissing !== null)(`media in the crash journal${torchMissing ? ` (skipped: ${torchMissing})` : ''}`, () => {
  let t: TestEnv;
  afterEach(async () => {
    if (!t) return;
    await killDaemon(t.dir);
    await t.cleanup();
  });

  it('a trainer killed with SIGKILL right after logging a histogram, an image and a text: all three come back from its crash journal', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    await startDaemon(t);
    const file = path.join(t.dir, 'kill.py');
    fs.writeFileSync(file, `
import os, signal, sys, numpy as np, logd
run = logd.init(project="media-kill")
sys.stderr.write("RUN=%s\\n" % run.id)
for step in range(20):
    run.log({"loss": 1.0 / (step + 1)}, step=step)
px = (np.arange(6 * 4 * 3, dtype=np.uint8) * 11).reshape(6, 4, 3)
run.log({"grad/w": logd.Histogram(counts=[1, 2, 3], edges=[0, 0.5, 1, 2]), "sample": logd.Image(px, caption="last"),
         "note": logd.Text("the last words")}, step=20)
os.kill(os.getpid(), signal.SIGKILL)
`);
    // A flush interval longer than the test: nothing of the last row reaches the daemon before the kill.
    const r = await runPython(t, [file], { env: { LOGD_FLUSH_INTERVAL_MS: '600000', LOGD_CONSOLE: '0' }, timeout: 60_000 });
    expect(r.signal, r.all).toBe('SIGKILL');
    const id = /RUN=(\S+)/.exec(r.stderr)![1];
    await waitUntil(async () => (await cliJson(t, ['show', id])).state === 'crashed', 15_000, 'the run to be marked crashed');
    await waitUntil(async () => (await media(t, id)).length === 3, 15_000, 'the journal to give back the media');
    const items = await media(t, id);
    expect(items.map((m) => [m.kind, m.key, m.step]).sort()).toEqual([['histogram', 'grad/w', 20], ['image', 'sample', 20], ['text', 'note', 20]]);
    expect(items.find((m) => m.kind === 'histogram')).toMatchObject({ counts: [1, 2, 3], edges: [0, 0.5, 1, 2] });
    expect(items.find((m) => m.kind === 'image')).toMatchObject({ format: 'png', width: 4, height: 6, caption: 'last' });
    expect(items.find((m) => m.kind === 'text')).toMatchObject({ text: 'the last words' });
    expect((await cliJson(t, ['show', id])).historyRows).toBe(20);
    const out = path.join(t.dir, 'saved');
    await cli(t, ['media', id, '--kind', 'image', '--save', out]);
    const png = fs.readdirSync(out).find((f) => f.endsWith('.png'))!;
    expect(decodePng(fs.readFileSync(path.join(out, png)))).toEqual({ width: 4, height: 6, channels: 3 });
  }, 90_000);
});
