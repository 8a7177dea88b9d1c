// Issue 19 in the Python client: logd.init(id=..., resume=...) continues a run
// of this node's store as a new attempt, its steps going on; refusals raise.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, cliJson, exportJsonl, startDaemon, killDaemon, type TestEnv } from '../helpers.js';
import { pythonMissing, runPython } from './py-helpers.js';

let t: TestEnv;
afterEach(async () => {
  if (!t) return;
  await killDaemon(t.dir);
  await t.cleanup();
});

describe.skipIf(pythonMissing !== null)(`Python: init(resume=...)${pythonMissing ? ` (skipped: ${pythonMissing})` : ''}`, () => {
  it("'allow' twice is one run of two attempts with continuous steps; 'must' of an unknown id and an existing id without resume raise", async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    await startDaemon(t);
    const file = path.join(t.dir, 'r.py');
    fs.writeFileSync(file, `
import sys, logd
id, resume, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    run = logd.init(project="resume", id=id, resume=None if resume == "-" else resume, config={"n%d" % n: n})
except Exception as e:
    print("error %s: %s" % (type(e).__name__, e))
    sys.exit(3)
for i in range(n):
    run.log({"loss": i})
print("done", run.finish().state)
`);
    expect((await runPython(t, [file, 'py1', 'allow', '6'])).stdout).toContain('done finished');
    expect((await runPython(t, [file, 'py1', 'allow', '4'])).stdout).toContain('done finished');
    const info = await cliJson(t, ['show', 'py1']);
    expect(info).toMatchObject({ historyRows: 10, config: { n6: 6, n4: 4 } });
    expect(info.metadata.attempts.map((a: any) => [a.n, a.fromStep, a.state])).toEqual([[1, 0, 'finished'], [2, 6, 'finished']]);
    expect((await exportJsonl(t, 'py1')).map((r) => r._step)).toEqual(Array.from({ length: 10 }, (_, i) => i));
    expect((await runPython(t, [file, 'nope', 'must', '1'])).stdout).toMatch(/error \w+: .*run nope does not exist/);
    expect((await runPython(t, [file, 'py1', '-', '1'])).stdout).toMatch(/error \w+: .*already exists; continue it with resume='allow'/);
    expect((await runPython(t, [file, 'py1', 'maybe', '1'])).stdout).toMatch(/error ValueError: .*resume='maybe' must be/);
    expect((await cliJson(t, ['show', 'py1'])).historyRows).toBe(10);
  });
});
