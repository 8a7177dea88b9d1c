// Issue 32 item 6 for the Python client: truncating a live writer's crash
// journal must not kill the trainer. Before: the next store into the mapping,
// past the file's new end, was a SIGBUS (the process died with signal 7). Now
// logd's guard (python/logd/spool/_busguard.c, loaded by busguard.py) puts memory in
// place of the lost pages, the writer gives the journal up, says so once, and
// logging goes on. Real processes: a daemon, a Python trainer, and
// `truncate -s` of its journal while it logs.
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, startDaemon, waitUntil, exportJsonl, cliJson, type TestEnv } from '../helpers.js';
import { pythonMissing, runPython, spawnPython, killSpawnedPython } from './py-helpers.js';

let t: TestEnv;
afterEach(async () => {
  killSpawnedPython();
  if (t) await t.cleanup();
});

const journals = (dir: string) => (fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.endsWith('.journal')) : []);

const TRAINER = (go: string) => `
import os, sys, time, logd
run = logd.init(project="trunc")
print("run", run.id, flush=True)
step = 0
def log(n):
    global step
    for _ in range(n):
        run.log({"loss": 1 / (step + 1), "acc": step * 1e-4, "k%d" % (step % 50): step}, step=step)
        step += 1
log(2000)
if sys.argv[1] == "flushed":
    run.flush()
print("logged", step, flush=True)
while not os.path.exists(${JSON.stringify(go)}):
    time.sleep(0.01)
for _ in range(20):
    log(1000)  # stores into the journal's pages, now past the file's end
    time.sleep(0.02)
res = run.finish()
print("done", step, res.state, flush=True)
`;

const guardMissing = pythonMissing ?? (() => {
  // The guard is built by `pip install ./python` where a C compiler is found (python/setup.py).
  return null;
})();

describe.skipIf(guardMissing !== null)(`issue 32 item 6, Python: a journal truncated under its writer${guardMissing ? ` (skipped: ${guardMissing})` : ''}`, () => {
  it('the guard is built into this install', async () => {
    t = makeEnv();
    const r = await runPython(t, ['-c', 'from logd.spool import busguard; print(repr(busguard.unavailable()))']);
    expect(r.stdout.trim(), r.all).toBe("''");
  });

  for (const [size, mode] of [['0', 'flushed'], ['64K', 'flushed'], ['0', 'in flight']] as const) {
    it(`truncate -s ${size} of a live Python writer's journal (${mode}): the trainer lives, says once that the journal is lost, and logging goes on`, async () => {
      t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000', LOGD_SAMPLE_INTERVAL_MS: '0' });
      await startDaemon(t);
      const go = path.join(t.dir, 'go');
      const file = path.join(t.dir, 'trainer.py');
      fs.writeFileSync(file, TRAINER(go));
      // In flight: a flush interval longer than the test, so the first 2000 rows are only in the journal when it goes.
      const w = spawnPython(t, [file, mode === 'flushed' ? 'flushed' : 'unflushed'], mode === 'flushed' ? {} : { LOGD_FLUSH_INTERVAL_MS: '600000' });
      await waitUntil(() => w.lines.some((l) => l.startsWith('logged ')), 60_000, 'the trainer to log its first rows');
      const id = w.lines.find((l) => l.startsWith('run '))!.slice(4);
      const spool = path.join(t.dataDir, 'spool');
      const [jf] = journals(spool).filter((f) => f.startsWith(id));
      expect(jf, `a journal of run ${id} in ${spool}`).toBeDefined();
      execFileSync('truncate', ['-s', size, path.join(spool, jf)]);
      fs.writeFileSync(go, '');
      const [code, signal] = await new Promise<[number | null, string | null]>((r) => w.on('close', (c, s) => r([c, s])));
      const err = w.err();
      expect({ code, signal }, err).toEqual({ code: 0, signal: null });
      expect(w.lines).toContain('done 22000 finished');
      expect(err.match(/crash journal lost: .*was truncated by another process/g) ?? [], err).toHaveLength(1);
      expect(journals(spool).filter((f) => f.startsWith(id)), 'the truncated journal is removed').toEqual([]);
      const steps = (await exportJsonl(t, id, ['--keys', 'loss'])).map((r) => r._step as number);
      expect((await cliJson(t, ['show', id])).state).toBe('finished');
      // Every row logged after the truncation is stored, in order, once.
      expect(steps.filter((s) => s >= 2000), err).toEqual(Array.from({ length: 20000 }, (_, i) => 2000 + i));
      if (mode === 'flushed') {
        // Flushed before the truncation: nothing was only in the file.
        expect(steps).toEqual(Array.from({ length: 22000 }, (_, i) => i));
        expect(err).not.toMatch(/only in the truncated file/);
      } else {
        // Rows not yet read back when the file went are lost with it, and said: never a silent gap.
        const missing = 2000 - steps.filter((s) => s < 2000).length;
        expect(missing).toBe(2000);
        expect(err).toMatch(new RegExp(`; ${missing} rows logged just before were only in the truncated file and are lost`));
        expect(new Set(steps).size).toBe(steps.length);
      }
    }, 120_000);
  }
});
