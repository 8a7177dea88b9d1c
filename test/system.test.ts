// System metrics through the daemon: one sampler per node, stored once, and
// every run sees the node's samples of its lifetime plus its own processes.
// GPUs come from the fixture-driven fake nvidia-smi first on PATH.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, script, runScript, cliJson, exportJsonl, ROOT, type TestEnv } from './helpers.js';

let t: TestEnv;
afterEach(async () => t && (await t.cleanup()));

function fakeGpuPath(dir: string): string {
  const bin = path.join(dir, 'bin');
  fs.mkdirSync(bin, { recursive: true });
  fs.symlinkSync(path.join(ROOT, 'test/fixtures/nvidia-smi/fake-nvidia-smi'), path.join(bin, 'nvidia-smi'));
  return `${bin}:${process.env.PATH}`;
}

const worker = `
  const run = await logd.init({ project: 'sys', name: process.argv[2] });
  console.log('run ' + run.id);
  const t0 = Date.now();
  while (Date.now() - t0 < 1500) {
    const x = Date.now(); while (Date.now() - x < 20); // a little real CPU work
    run.log({ step_time: 1 });
    await new Promise((r) => setTimeout(r, 30));
  }
  await run.finish();
`;

describe('system metrics', () => {
  it('two concurrent runs share one node sampler; each sees all GPUs and only its own process', async () => {
    t = makeEnv({ LOGD_SAMPLE_INTERVAL_MS: '200' });
    t.env.PATH = fakeGpuPath(t.dir);
    const w = script(t, 'w.mjs', worker);
    const [a, b] = await Promise.all([runScript(t, w, ['a']), runScript(t, w, ['b'])]);
    expect(a.exitCode, a.stderr).toBe(0);
    expect(b.exitCode, b.stderr).toBe(0);
    const ids = [a, b].map((r) => r.stdout.split('\n').find((l) => l.startsWith('run '))!.slice(4));
    const views = await Promise.all(ids.map((id) => exportJsonl(t, id, ['--system'])));
    for (const [i, rows] of views.entries()) {
      expect(rows.length).toBeGreaterThanOrEqual(3);
      const info = await cliJson(t, ['show', ids[i]]);
      expect(info.metadata.system.gpus).toHaveLength(8);
      expect(info.metadata.system.gpus[0]).toMatchObject({ index: 0, name: 'NVIDIA H100 80GB HBM3' });
      const created = Date.parse(info.createdAt) / 1000;
      const finished = Date.parse(info.finishedAt) / 1000;
      for (const r of rows) {
        expect(r._time).toBeGreaterThanOrEqual(created - 1);
        expect(r._time).toBeLessThanOrEqual(finished + 0.001);
        expect(Object.keys(r).some((k) => k.startsWith('@'))).toBe(false); // no other process's metrics
      }
      const last = rows.at(-1)!;
      expect(last).toHaveProperty('gpu.7.gpu');
      expect(last).toHaveProperty('cpu');
      expect(last).toHaveProperty('memory_percent');
      expect(rows.some((r) => typeof r['proc.memory.rssMB'] === 'number' && (r['proc.memory.rssMB'] as number) > 10)).toBe(true);
    }
    // Stored once: both runs read the same samples (same sample numbers), from one node log.
    const steps = views.map((rows) => new Set(rows.map((r) => r._step)));
    expect([...steps[0]].filter((s) => steps[1].has(s)).length).toBeGreaterThanOrEqual(2);
    expect(fs.existsSync(path.join(t.dataDir, 'system', 'records.log'))).toBe(true);
    const runLog = fs.readFileSync(path.join(t.dataDir, 'runs', ids[0], 'records.log'));
    expect(runLog.includes(Buffer.from('gpu.0.gpu'))).toBe(false);
  });

  it("GPU memory a rank's process holds shows on that rank's run", async () => {
    t = makeEnv({ LOGD_SAMPLE_INTERVAL_MS: '200' });
    t.env.PATH = fakeGpuPath(t.dir);
    const apps = path.join(t.dir, 'apps.csv');
    fs.writeFileSync(apps, '');
    t.env.FAKE_NVSMI_APPS_FILE = apps;
    const w = script(t, 'gpu.mjs', `
      import fs from 'node:fs';
      const run = await logd.init({ project: 'sys', name: 'rank3' });
      // This process "allocates" 4 GiB on GPU 1 (what nvidia-smi will report for its pid).
      fs.writeFileSync(process.env.FAKE_NVSMI_APPS_FILE, process.pid + ', GPU-a17e9f02-3c4b-4d5e-8f60-718293a4b5c6, 4096\\n');
      const t0 = Date.now();
      while (Date.now() - t0 < 7000) { run.log({ x: 1 }); await new Promise((r) => setTimeout(r, 100)); }
      await run.finish();
      console.log('run ' + run.id);
    `);
    const r = await runScript(t, w);
    expect(r.exitCode, r.stderr).toBe(0);
    const id = r.stdout.split('\n').find((l) => l.startsWith('run '))!.slice(4);
    const rows = await exportJsonl(t, id, ['--system', '--keys', 'gpu.process.memoryAllocatedBytes,gpu.process.gpus']);
    const held = rows.filter((x) => x['gpu.process.memoryAllocatedBytes'] === 4096 * 1024 * 1024);
    expect(held.length).toBeGreaterThan(0);
    expect(held[0]['gpu.process.gpus']).toBe(1);
  });

  it('a run can ask for a shorter sampling interval than the daemon default', async () => {
    t = makeEnv({ LOGD_SAMPLE_INTERVAL_MS: '5000' });
    t.env.PATH = fakeGpuPath(t.dir);
    const w = script(t, 'fast.mjs', worker.replace("logd.init({ project: 'sys', name: process.argv[2] })", "logd.init({ project: 'sys', name: 'fast', sampleIntervalMs: 100 })"));
    const r = await runScript(t, w);
    expect(r.exitCode, r.stderr).toBe(0);
    const id = r.stdout.split('\n').find((l) => l.startsWith('run '))!.slice(4);
    const rows = await exportJsonl(t, id, ['--system', '--keys', 'cpu']);
    expect(rows.length).toBeGreaterThanOrEqual(6); // 1.5 s at 100 ms; at the default 5 s there would be one or two
  });

  it('without nvidia-smi: one info line, no GPU metrics, everything else works', async () => {
    t = makeEnv({ LOGD_SAMPLE_INTERVAL_MS: '200' });
    t.env.PATH = path.dirname(process.execPath); // node only: no nvidia-smi anywhere
    const w = script(t, 'w.mjs', worker);
    const r = await runScript(t, w, ['solo']);
    expect(r.exitCode, r.stderr).toBe(0);
    const id = r.stdout.split('\n').find((l) => l.startsWith('run '))!.slice(4);
    const rows = await exportJsonl(t, id, ['--system']);
    expect(rows.length).toBeGreaterThanOrEqual(3);
    expect(rows.every((x) => !Object.keys(x).some((k) => k.startsWith('gpu.')))).toBe(true);
    expect(rows.at(-1)).toHaveProperty('cpu');
    const log = fs.readFileSync(path.join(t.runtimeDir, 'daemon.log'), 'utf8');
    const samplerLines = log.split('\n').filter((l) => l.includes('sampler:'));
    expect(samplerLines).toHaveLength(1);
    expect(samplerLines[0]).toMatch(/nvidia-smi/);
  });
});
