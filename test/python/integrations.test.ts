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
import { makeEnv, cliJson, exportJsonl, type TestEnv } from '../helpers.js';
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

const cases: Array<[string, string, (t: TestEnv, id: string) => Promise<void>]> = [
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
];

describe('Python integrations', () => {
  let t: TestEnv;
  beforeEach(() => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000' });
  });
  afterEach(async () => {
    await t.cleanup();
  });

  for (const [framework, module, check] of cases) {
    const why = missing(module);
    it.skipIf(why !== null)(`${framework}${why ? ` (skipped: ${why})` : ''}`, async () => {
      const out = path.join(t.dir, `${framework}.json`);
      const r = await runPython(t, [path.join(FIXTURES, 'integrations.py'), framework, out], { timeout: 180_000 });
      expect(r.exitCode, r.all).toBe(0);
      await check(t, readJson(out).id);
    });
  }
});
