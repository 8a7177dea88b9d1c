// The sampler starts again with each run after a pause (no open run: no
// sampling); what it finds at start is said once per daemon, not once per run.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { makeEnv, script, runScript, startDaemon, type TestEnv } from '../helpers.js';

let t: TestEnv;
afterAll(async () => t?.cleanup());

describe('the sampler\'s start line', () => {
  it('no nvidia-smi: one line for five runs one after another', async () => {
    t = makeEnv();
    t.env.PATH = (t.env.PATH ?? '').split(':').filter((d) => d && !fs.existsSync(path.join(d, 'nvidia-smi'))).join(':');
    const d = await startDaemon(t);
    const file = script(t, 'runs.mjs', `
      for (let i = 0; i < 5; i++) {
        const run = await logd.init({ project: 'said', name: 'r' + i });
        run.log({ x: i });
        await run.finish();
      }
      console.log('done');
    `);
    const r = await runScript(t, file);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(d.stderr().match(/finished, 1 rows/g)).toHaveLength(5);
    expect(d.stderr().match(/sampler: no nvidia-smi found on PATH; GPU metrics are off/g)).toHaveLength(1);
    d.proc.kill('SIGTERM');
  });
});
