// Issue 38 item 7: init() says in one stderr line which run it made, where it
// is stored and how to look at it; rank 0 only, once per group in a process;
// quiet=True or LOGD_QUIET=1 keeps it silent.
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, killDaemon, type TestEnv } from '../helpers.js';
import { pythonMissing, runPython } from './py-helpers.js';

let t: TestEnv;
afterEach(async () => {
  if (t) {
    await killDaemon(t.dir);
    await t.cleanup();
  }
});

const code = `
import logd
r = logd.init(project="p", name="first"); r.finish()
a = logd.init(project="p", name="r0", group="g"); a.finish()
b = logd.init(project="p", name="r0-again", group="g"); b.finish()
q = logd.init(project="p", name="hushed", quiet=True); q.finish()
print("ids", r.id, a.id)
`;

describe.skipIf(pythonMissing !== null)(`init() announces its run${pythonMissing ? ` (skipped: ${pythonMissing})` : ''}`, () => {
  it('one line per run, once per group, none with quiet=True, none from rank 1, none with LOGD_QUIET=1', async () => {
    t = makeEnv();
    const r = await runPython(t, ['-c', code], { env: { LOGD_QUIET: '0' } });
    expect(r.exitCode, r.all).toBe(0);
    const [, id, gid] = r.stdout.trim().split(' ');
    const said = r.stderr.split('\n').filter((l) => l.startsWith('logd: run '));
    expect(said).toEqual([
      `logd: run ${id} (p/first) stored in ${t.dataDir}; see it with \`logd show ${id}\` or \`logd ui\``,
      `logd: run ${gid} (p/r0, group g) stored in ${t.dataDir}; see it with \`logd health g\` or \`logd ui\``,
    ]);
    for (const env of [{ RANK: '1', LOGD_QUIET: '0' }, { LOGD_QUIET: '1' }]) {
      const s = await runPython(t, ['-c', code], { env });
      expect(s.exitCode, s.all).toBe(0);
      expect(s.stderr).not.toMatch(/^logd: run /m);
    }
  }, 60_000);
});
