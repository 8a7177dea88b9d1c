// Issue 34: a TypeScript trainer that dies of an uncaught exception: its run's
// end record names the exception (the client's exit hook puts it in the spill
// that ends the run), as the Python client's does through FinishRun.
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, startDaemon, killDaemon, cli, cliJson, script, spawnScript, waitUntil, type TestEnv } from '../helpers.js';

let t: TestEnv;
afterEach(async () => {
  if (t) {
    await killDaemon(t.dir);
    await t.cleanup();
  }
});

describe('a TypeScript trainer that throws', () => {
  it('its run ends crashed, and its end record and `logd show` name the exception', async () => {
    t = makeEnv();
    await startDaemon(t);
    const file = script(t, 'throws.mjs', `
      const run = await logd.init({ project: 'ts', name: 'thrower' });
      console.log('run ' + run.id);
      for (let step = 0; step < 20; step++) run.log({ loss: 1 / (step + 1) }, { step });
      await run.flush();
      setTimeout(() => { throw new TypeError('cannot read the batch at step 19'); }, 10);
    `);
    const p = spawnScript(t, file);
    const [code] = await p.closed;
    expect(code).toBe(1);
    const id = p.lines.find((l) => l.startsWith('run '))!.slice(4);
    let info: any;
    await waitUntil(async () => (info = await cliJson(t, ['show', id])).state !== 'running', 10_000, 'the run to end');
    expect(info.state).toBe('crashed');
    expect(info.metadata.end).toMatchObject({ exitCode: 1, exception: { type: 'TypeError', message: 'cannot read the batch at step 19' }, lastStep: 19 });
    expect(info.stateReason).toBe('its process raised TypeError: cannot read the batch at step 19 (exit code 1) without calling finish()');
    expect((await cli(t, ['show', id])).stdout).toMatch(/^ended: its process raised TypeError: cannot read the batch at step 19 \(exit code 1\) at /m);
  }, 30_000);
});
