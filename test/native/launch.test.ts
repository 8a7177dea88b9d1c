// The launcher with real rank processes (test/native/fixtures/rank.mjs).
// Needs no libtorch: these run everywhere.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { launch, type LaunchOptions } from '../../launcher/launch.js';
import { distReady, NOT_BUILT, repoRoot } from './harness.js';

const fixture = join(repoRoot, 'test', 'native', 'fixtures', 'rank.mjs');

function capture() {
  const stream = new PassThrough();
  const lines: Array<{ at: number; text: string }> = [];
  stream.setEncoding('utf8');
  stream.on('data', (d: string) => {
    for (const text of d.split('\n').filter(Boolean)) lines.push({ at: performance.now(), text });
  });
  return { stream, lines, text: () => lines.map((l) => l.text).join('\n') };
}

function opts(mode: string, over: Partial<LaunchOptions> = {}): LaunchOptions & { out: ReturnType<typeof capture>; err: ReturnType<typeof capture> } {
  const out = capture();
  const err = capture();
  return {
    nprocPerNode: 2, nnodes: 1, nodeRank: 0, masterAddr: '127.0.0.1', masterPort: 29555,
    script: fixture, args: [mode], graceMs: 500, stdout: out.stream, stderr: err.stream, out, err, ...over,
  };
}

describe('launch', () => {
  it('gives each rank torchrun variables plus the daemon env, and prefixes every line', async () => {
    let ensureCalls = 0;
    const o = opts('env', {
      nprocPerNode: 2, nnodes: 2, nodeRank: 1, masterPort: 4321,
      ensureDaemon: async () => (ensureCalls++, { LOGD_SERVICE: 'unix:/tmp/x?token=t' }),
    });
    expect(await launch(o)).toBe(0);
    expect(ensureCalls).toBe(1);
    for (const [rank, local] of [[2, 0], [3, 1]]) {
      const line = o.out.lines.find((l) => l.text.startsWith(`[rank ${rank}] {`))!.text;
      expect(JSON.parse(line.slice(`[rank ${rank}] `.length))).toEqual({
        RANK: String(rank), LOCAL_RANK: String(local), WORLD_SIZE: '4', LOCAL_WORLD_SIZE: '2',
        MASTER_ADDR: '127.0.0.1', MASTER_PORT: '4321', GROUP_RANK: '1', LOGD_SERVICE: 'unix:/tmp/x?token=t',
      });
      // Whole lines only, each prefixed, including a final line without a newline.
      expect(o.err.lines.map((l) => l.text)).toEqual(expect.arrayContaining([`[rank ${rank}] to stderr`, `[rank ${rank}] no newline at end`]));
    }
  });

  it('stops the others and returns the failing code within 1 s plus the grace period', async () => {
    const o = opts('fail', { nprocPerNode: 3, graceMs: 700 });
    const code = await launch(o);
    const doneAt = performance.now();
    expect(code).toBe(7);
    const failedAt = o.err.lines.find((l) => l.text.includes('rank 1 exited with code 7'))!.at;
    expect(doneAt - failedAt).toBeLessThan(1000 + 700);
    // Rank 0 ignored SIGTERM, so it was SIGKILLed after the grace period.
    expect(o.out.text()).toContain('[rank 0] ignoring SIGTERM');
    expect(doneAt - failedAt).toBeGreaterThanOrEqual(650);
  });

  it('reports death by signal as 128 + signal', async () => {
    expect(await launch(opts('selfkill'))).toBe(137);
  });

  it('returns 127 with a message when the script cannot be started', async () => {
    const o = opts('', { script: '/nonexistent/train', args: [] });
    expect(await launch(o)).toBe(127);
    expect(o.err.text()).toMatch(/could not start \/nonexistent\/train \(ENOENT/);
  });

  it('refuses bad options with a message naming the flag', async () => {
    await expect(launch(opts('env', { nprocPerNode: 0 }))).rejects.toThrow(/--nproc-per-node/);
    await expect(launch(opts('env', { nodeRank: 2, nnodes: 2 }))).rejects.toThrow(/--node-rank 2/);
  });

  it('returns 1 without starting ranks when ensureDaemon fails', async () => {
    const o = opts('env', { ensureDaemon: async () => { throw new Error('socket dir not writable'); } });
    expect(await launch(o)).toBe(1);
    expect(o.err.text()).toContain('socket dir not writable');
    expect(o.out.lines).toHaveLength(0);
  });

  describe.skipIf(!distReady)(`as a process (launcher/main)${distReady ? '' : ` — skipped: ${NOT_BUILT}`}`, () => {
    for (const [sig, code] of [['SIGINT', 130], ['SIGTERM', 143]] as const) {
      it(`forwards ${sig} to every rank and exits ${code}`, async () => {
        const child = spawn(process.execPath, [join(repoRoot, 'dist', 'launcher', 'main.js'), '--nproc-per-node', '2', '--grace-ms', '2000', fixture, 'signal'], {
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let out = '';
        const ready = new Promise<void>((resolve) => {
          child.stdout.on('data', (d: Buffer) => {
            out += d.toString();
            if (out.includes('[rank 0] READY') && out.includes('[rank 1] READY')) resolve();
          });
        });
        const exited = new Promise<number | null>((resolve) => child.on('close', (c) => resolve(c)));
        const deadline = setTimeout(() => child.kill('SIGKILL'), 15_000);
        await ready;
        child.kill(sig);
        const rc = await exited;
        clearTimeout(deadline);
        expect(out).toContain(`[rank 0] got ${sig}`);
        expect(out).toContain(`[rank 1] got ${sig}`);
        expect(rc).toBe(code);
      });
    }
  });
});
