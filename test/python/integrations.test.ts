// logd.integrations (issues 12 and 23): a transformers TrainerCallback (the run
// named by TrainingArguments.run_name), an Accelerate
// GeneralTracker (its project from init_trackers) and a Lightning Logger, each driving a real training loop of
// the practice note's SimpleModel on CPU (test/python/fixtures/integrations.py)
// against a real daemon. Each is skipped, with the reason, where its framework
// does not import here (python/integrations-requirements.txt, installed by
// `make python`).
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { describe, it, expect, beforeEach, afterEach } from 'vitest';
import { makeEnv, cli, cliJson, exportJsonl, type TestEnv } from '../helpers.js';
import { FIXTURES, PYTHON, torchMissing, runPython, readJson } from './py-helpers.js';

function missing(module: string): string | null {
  if (torchMissing) return torchMissing;
  try {
    execFileSync(PYTHON, ['-c', `import ${module}`], { stdio: 'pipe', timeout: 120_000 });
    return null;
  } catch (e) {
    const err = (e as { stderr?: Buffer }).stderr?.toString().trim().split('\n').pop() ?? String(e);
    return `import ${module} fails here: ${err}`;
  }
}

interface RunJson { project: string; name: string; tags: string[]; state: string; historyRows: number; config: Record<string, any>; summary: Record<string, unknown> }

const cases: Array<[string, string, (t: TestEnv, id: string) => Promise<void>, ((out: any) => void)?]> = [
  ['transformers', 'transformers', async (t, id) => {
    const run = await cliJson<RunJson>(t, ['show', id]);
    expect(run.state).toBe('finished');
    expect(run.name).toBe('tiny-hf-lr5e-5'); // TrainingArguments.run_name, not the run's random id
    expect(run.project).toBe('integrations');
    expect(run.config.trainer).toMatchObject({ max_steps: 20, logging_steps: 5, run_name: 'tiny-hf-lr5e-5' });
    const rows = await exportJsonl(t, id);
    const losses = rows.filter((r) => 'loss' in r);
    expect(losses.map((r) => r._step)).toEqual([5, 10, 15, 20]);
    expect(rows.some((r) => 'train_runtime' in r)).toBe(true);
  }],
  ['accelerate', 'accelerate.tracking', async (t, id) => {
    const run = await cliJson<RunJson>(t, ['show', id]);
    expect(run).toMatchObject({ state: 'finished', historyRows: 20 });
    // The project named once, in init_trackers; init_kwargs={"logd": …} reach logd.init().
    expect(run).toMatchObject({ project: 'integrations', name: 'accelerate', tags: ['acc'] });
    expect(run.config).toMatchObject({ lr: 0.05, batch_size: 10 });
    const rows = await exportJsonl(t, id);
    expect(rows.map((r) => r._step)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(rows.every((r) => typeof r.loss === 'number' && !('note' in r))).toBe(true);
  }],
  ['lightning', 'pytorch_lightning', async (t, id) => {
    const run = await cliJson<RunJson>(t, ['show', id]);
    expect(run.state).toBe('finished');
    expect(run.config).toMatchObject({ lr: 0.05 });
    const rows = await exportJsonl(t, id);
    expect(rows.filter((r) => 'loss' in r).length).toBeGreaterThanOrEqual(3);
  }],
  // Images and histograms through each framework's own convention: Accelerate's tracker.log_images({key: [images]}, step),
  // Lightning's log_image(key, images, step, caption=[...]) (as WandbLogger) and log_histogram.
  ['accelerate-media', 'accelerate.tracking', async (t, id) => {
    const run = await cliJson<RunJson>(t, ['show', id]);
    expect(run).toMatchObject({ state: 'finished', historyRows: 20, name: 'accelerate-media' }); // media-only rows store no row of numbers
    const items = await media(t, id);
    const hs = items.filter((m) => m.kind === 'histogram');
    expect(hs.map((m) => m.step)).toEqual(Array.from({ length: 20 }, (_, i) => i)); // a logd.Histogram in accelerator.log()
    expect(hs.every((m) => m.key === 'grad/fc' && m.counts!.length === 8 && m.counts!.reduce((a, b) => a + b, 0) === 10)).toBe(true);
    // Each key's list at one step, in order: HWC array 12x8, PIL image 10x6; the NCHW batch split into two 7x5 images.
    const imgs = items.filter((m) => m.kind === 'image').map((m) => [m.key, m.step, m.width, m.height]);
    expect(imgs.filter((m) => m[0] === 'samples')).toEqual([['samples', 0, 12, 8], ['samples', 0, 10, 6], ['samples', 10, 12, 8], ['samples', 10, 10, 6]]);
    expect(imgs.filter((m) => m[0] === 'batch')).toEqual([['batch', 0, 7, 5], ['batch', 0, 7, 5], ['batch', 10, 7, 5], ['batch', 10, 7, 5]]);
    // No step given: both images at the one step the run takes next (after step 19); the refused calls logged nothing.
    expect(imgs.filter((m) => m[0] === 'final')).toEqual([['final', 20, 2, 3], ['final', 20, 2, 3]]);
    expect(imgs).toHaveLength(10);
  }, (out) => {
    expect(out.refused).toHaveLength(2);
    expect(out.refused[0]).toMatch(/Image takes PNG or JPEG bytes.*not str/);
    expect(out.refused[1]).toMatch(/log_images takes the images and a step, not dataformats/);
  }],
  ['lightning-media', 'pytorch_lightning', async (t, id) => {
    const items = await media(t, id);
    expect(items.filter((m) => m.kind === 'histogram').map((m) => [m.key, m.step, m.counts!.length])).toEqual([['grad/fc', 0, 8], ['grad/fc', 10, 8]]);
    expect(items.filter((m) => m.kind === 'image').map((m) => [m.key, m.step, m.width, m.height, m.caption])).toEqual([
      ['samples', 0, 6, 4, 'tensor 0'], ['samples', 0, 9, 5, 'array 0'], ['samples', 10, 6, 4, 'tensor 10'], ['samples', 10, 9, 5, 'array 10'],
    ]);
  }, (out) => {
    expect(out.refused).toHaveLength(2);
    expect(out.refused[0]).toMatch(/1 image\(s\) but 2 caption\(s\)/);
    expect(out.refused[1]).toMatch(/takes caption=\[\.\.\.\] besides the images, not masks/);
  }],
];

interface MediaItem { key: string; step: number; kind: string; counts?: number[]; width?: number; height?: number; caption?: string }

async function media(t: TestEnv, id: string): Promise<MediaItem[]> {
  const r = await cli(t, ['media', id, '--json']);
  return r.stdout.trim() === '' ? [] : r.stdout.trim().split('\n').map((l) => JSON.parse(l));
}

describe('Python integrations', () => {
  let t: TestEnv;
  beforeEach(() => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000' });
  });
  afterEach(async () => {
    await t.cleanup();
  });

  for (const [framework, module, check, checkOut] of cases) {
    const why = missing(module);
    it.skipIf(why !== null)(`${framework}${why ? ` (skipped: ${why})` : ''}`, async () => {
      const out = path.join(t.dir, `${framework}.json`);
      const r = await runPython(t, [path.join(FIXTURES, 'integrations.py'), framework, out], { timeout: 180_000 });
      expect(r.exitCode, r.all).toBe(0);
      await check(t, readJson(out).id);
      checkOut?.(readJson(out));
    });
  }
});
