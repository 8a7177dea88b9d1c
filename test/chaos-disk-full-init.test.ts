// Issue 32 item 3: the data dir's disk is full (a real small tmpfs, filled)
// while a daemon serves it, and a trainer starts. Before: init() blocked 20 s
// (the daemon never answered CreateRun), then the deferred run's rows were
// lost: "1000 unsent rows could not be written to …/spool/…deferred.spill
// (ENOSPC) and are lost", although the user's state dir had room. Now the
// daemon answers at once that it cannot store the run, the trainer goes on
// deferred with its rows spilled to the fallback dir, and the daemon stores
// them once space is freed, while it runs.
import fs from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, script, runScript, startDaemon, waitUntil, cliJson, exportJsonl, type TestEnv } from './helpers.js';
import { pythonMissing, runPython } from './python/py-helpers.js';

let t: TestEnv;
let mounted: string | null = null;
afterEach(async () => {
  if (mounted) await execa('umount', ['-l', mounted], { reject: false });
  mounted = null;
  if (t) await t.cleanup();
});

const PY_TRAINER = `
import sys, time, logd
t0 = time.monotonic()
run = logd.init(project="full")
print("init %s %d" % (run.id, (time.monotonic() - t0) * 1000), flush=True)
for s in range(1000):
    run.log({"loss": 1 / (s + 1)}, step=s)
print("finish " + run.finish(timeout=2).state, flush=True)
`;

describe('issue 32 item 3: a full data-dir disk at init()', () => {
  for (const client of ['TypeScript', 'Python'] as const) it(`${client}: init() is answered at once, the rows go to the fallback dir, and the daemon stores them when space returns`, async (ctx) => {
    if (client === 'Python' && pythonMissing) return ctx.skip(`the Python client: ${pythonMissing}`);
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000', LOGD_SAMPLE_INTERVAL_MS: '0' });
    fs.mkdirSync(t.dataDir, { recursive: true });
    const m = await execa('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', t.dataDir], { reject: false });
    if (m.exitCode !== 0) return ctx.skip(`cannot mount a tmpfs here (${m.stderr.trim() || `exit ${m.exitCode}`}); run as root where mount is permitted`);
    mounted = t.dataDir;
    t.env.XDG_STATE_HOME = path.join(t.dir, 'state');
    await startDaemon(t);
    const fill = path.join(t.dataDir, 'fill');
    await execa('dd', ['if=/dev/zero', `of=${fill}`, 'bs=64k'], { reject: false }); // until the disk is full

    const r = client === 'Python' ? await runPython(t, ['-c', PY_TRAINER]) : await runScript(t, script(t, 'trainer.mjs', `
      const t0 = performance.now();
      const run = await logd.init({ project: 'full' });
      console.log('init ' + run.id + ' ' + Math.round(performance.now() - t0));
      for (let s = 0; s < 1000; s++) run.log({ loss: 1 / (s + 1) }, { step: s });
      const res = await run.finish({ timeoutMs: 2000 });
      console.log('finish ' + res.state);
    `));
    expect(r.exitCode, r.stderr).toBe(0);
    const [, id, ms] = r.stdout.split('\n').find((l) => l.startsWith('init '))!.split(' ');
    console.log(`full disk (${client}): init() answered in ${ms} ms`);
    expect(Number(ms)).toBeLessThan(5000); // the daemon says "no space" at once; before, 20 s of retries
    expect(r.stderr).toMatch(/deferred: \w+: run \w+ cannot be stored: .*ENOSPC/i);
    expect(r.stderr).not.toMatch(/are lost/);
    const fallback = path.join(t.dir, 'state', 'logd', 'deferred');
    const spills = fs.readdirSync(fallback, { recursive: true }).map(String).filter((f) => f.endsWith('.spill'));
    expect(spills, `spills in ${fallback}`).toHaveLength(1);

    // Space comes back: the running daemon finds the spill in its periodic scan and stores every row, once.
    fs.rmSync(fill);
    await waitUntil(async () => {
      try {
        return (await cliJson(t, ['show', id])).state === 'finished';
      } catch {
        return false;
      }
    }, 30_000, `the deferred run ${id} to be stored`);
    expect((await exportJsonl(t, id, ['--keys', 'loss'])).map((x) => x._step)).toEqual(Array.from({ length: 1000 }, (_, i) => i));
    await waitUntil(() => fs.readdirSync(fallback, { recursive: true }).map(String).filter((f) => f.includes('.spill')).length === 0, 15_000, 'the spill to be removed once stored');
  }, 120_000);
});
