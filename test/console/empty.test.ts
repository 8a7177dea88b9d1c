// Issue 38 item 12: `logd logs RUN` for a run that printed nothing printed
// nothing with exit 0, and a person could not tell an empty log from a
// failed capture or a filter that matched nothing. stdout stays empty (a
// script sees an empty log); stderr says why. Real daemon and processes.
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, script, runScript, cli, startDaemon, type TestEnv } from '../helpers.js';

let t: TestEnv;
afterEach(async () => t && (await t.cleanup()));

describe('logd logs with nothing to show', () => {
  it('says on stderr that the run has no console output, or that no line matched, and exits 0 with nothing on stdout', async () => {
    t = makeEnv({ LOGD_SAMPLE_INTERVAL_MS: '0' });
    await startDaemon(t);
    const r = await runScript(t, script(t, 'w.mjs', `
      const quiet = await logd.init({ project: 'logs', name: 'quiet' });
      quiet.log({ loss: 1 });
      await quiet.finish();
      const loud = await logd.init({ project: 'logs', name: 'loud', console: true });
      console.log('hello from loud');
      await loud.finish();
      process.stdout.write('runs ' + quiet.id + ' ' + loud.id + '\\n');
    `));
    expect(r.exitCode, r.stderr).toBe(0);
    const [, quiet, loud] = r.stdout.split('\n').find((l) => l.startsWith('runs '))!.split(' ');
    const none = await cli(t, ['logs', quiet]);
    expect(none.exitCode).toBe(0);
    expect(none.stdout).toBe('');
    expect(none.stderr).toMatch(new RegExp(`logd: run ${quiet} has no console output: it printed nothing, or its output was not captured .*TypeScript with init\\(\\{ console: true \\}\\)`));
    const unmatched = await cli(t, ['logs', loud, '--grep', 'no-such-text']);
    expect(unmatched.exitCode).toBe(0);
    expect(unmatched.stdout).toBe('');
    expect(unmatched.stderr).toContain(`logd: no line of run ${loud} matches (grep)`);
    expect((await cli(t, ['logs', loud])).stdout).toContain('hello from loud');
    expect((await cli(t, ['logs', quiet, '--json'])).stderr).toBe(''); // machine output: no prose
  });
});
