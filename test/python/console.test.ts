// Console capture in the Python client (issue 20, first slice): print() and
// sys.stderr.write() of the run's owner are stored with its run, in order, and
// still reach the terminal unchanged; a subprocess's output is not captured
// (it writes to the file descriptors, not through sys.stdout).
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, startDaemon, killDaemon, cli, type TestEnv } from '../helpers.js';
import { pythonMissing, runPython } from './py-helpers.js';

let t: TestEnv;
afterEach(async () => {
  if (!t) return;
  await killDaemon(t.dir);
  await t.cleanup();
});

// The venv's client (`make python` installs this checkout's, with log()'s compiled hot path and console tee when
// they build; make test-slow runs this file again with LOGD_PURE_PYTHON=1).
const SOURCE: Record<string, string> = {};

async function logs(runId: string): Promise<Array<{ stream: string; rank: number | null; line: string }>> {
  const r = await cli(t, ['logs', runId, '--json']);
  return r.stdout.trim() === '' ? [] : r.stdout.trim().split('\n').map((l) => JSON.parse(l));
}

const TRAINER = `
import os, subprocess, sys, logd
run = logd.init(project="console", console=os.environ.get("CAPTURE") != "off")
# The tee keeps the real streams' attributes.
assert sys.stdout.fileno() == 1 and sys.stderr.fileno() == 2 and sys.stdout.isatty() is False and sys.stdout.encoding
sys.stdout.flush()
print("hello from python")
sys.stderr.write("a warning\\n")
print("partial", end="")
print(" line")
for step in range(3):
    run.log({"loss": 1.0 / (step + 1)}, step=step)
    print("step", step, flush=True)
subprocess.run([sys.executable, "-c", "print('from a subprocess')"], check=True)
sys.stdout.write("last, no newline")
res = run.finish()
sys.stderr.write("RUN=%s STATE=%s CAPTURED_AFTER_FINISH=%s\\n" % (run.id, res.state, type(sys.stdout).__name__))
`;

describe.skipIf(pythonMissing !== null)(`Python: console capture${pythonMissing ? ` (skipped: ${pythonMissing})` : ''}`, () => {
  it('stores print() and sys.stderr.write() lines in order with their stream; a subprocess is not captured; the terminal output is unchanged', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    await startDaemon(t);
    const file = path.join(t.dir, 'train.py');
    fs.writeFileSync(file, TRAINER);
    const r = await runPython(t, [file], { env: { ...SOURCE, RANK: '2', WORLD_SIZE: '4' } });
    expect(r.exitCode, r.all).toBe(0);
    expect(r.stdout).toBe('hello from python\npartial line\nstep 0\nstep 1\nstep 2\nfrom a subprocess\nlast, no newline');
    expect(r.stderr).toMatch(/^a warning\n/);
    const m = /RUN=(\S+) STATE=finished CAPTURED_AFTER_FINISH=(\S+)/.exec(r.stderr)!;
    expect(m, r.stderr).toBeTruthy();
    expect(m[2]).not.toBe('_Tee'); // finish() gave sys.stdout back
    const lines = await logs(m[1]);
    expect(lines.map((l) => [l.stream, l.line])).toEqual([
      ['out', 'hello from python'], ['err', 'a warning'], ['out', 'partial line'],
      ['out', 'step 0'], ['out', 'step 1'], ['out', 'step 2'], ['out', 'last, no newline'],
    ]);
    expect(lines.every((l) => l.rank === 2)).toBe(true);
  }, 120_000);

  it('captures nothing with console=False, nor with LOGD_CONSOLE=0', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    await startDaemon(t);
    const file = path.join(t.dir, 'train.py');
    fs.writeFileSync(file, TRAINER);
    for (const env of [{ CAPTURE: 'off' }, { LOGD_CONSOLE: '0' }]) {
      const r = await runPython(t, [file], { env: { ...SOURCE, ...env } });
      expect(r.exitCode, r.all).toBe(0);
      expect(r.stdout).toContain('partial line');
      expect(await logs(/RUN=(\S+)/.exec(r.stderr)![1])).toEqual([]);
    }
  }, 120_000);

  it('bounds an 8 MB burst (3 MB of it in one write): counted, marked, said once, the training thread not held up', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    await startDaemon(t);
    const file = path.join(t.dir, 'burst.py');
    fs.writeFileSync(file, `
import sys, time, logd
run = logd.init(project="console")
line = "y" * 99 + "\\n"
t0 = time.perf_counter()
for _ in range(50000):
    sys.stdout.write(line)
burst = time.perf_counter() - t0
sys.stdout.write(line * 30000)  # 3 MB in one write: more than one flush interval takes
time.sleep(0.5)
print("after the burst")
res = run.finish()
sys.stderr.write("RUN=%s STATE=%s BURST_S=%.3f\\n" % (run.id, res.state, burst))
`);
    const r = await runPython(t, [file], { env: SOURCE });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout.length).toBe(80_000 * 100 + 'after the burst'.length);
    // The writer thread takes the copy every flush interval while the loop runs, so how much is cut depends on
    // the loop's speed; what is kept plus what is counted is always all of it, and a cut is said at most once.
    // The 3 MB write is always cut, and the cut said once.
    expect(r.stderr.match(/console output beyond 1 MiB per flush interval is not stored/g)).toHaveLength(1);
    expect(Number(/BURST_S=([\d.]+)/.exec(r.stderr)![1])).toBeLessThan(10);
    const lines = await logs(/RUN=(\S+)/.exec(r.stderr)![1]);
    const kept = lines.filter((l) => l.line.startsWith('yyy')).length;
    const marks = lines.filter((l) => l.line.startsWith('[logd: '));
    expect(kept).toBeGreaterThan(5000);
    expect(marks.length).toBeGreaterThan(0);
    const dropped = marks.reduce((n, l) => n + Number(/(\d+) bytes/.exec(l.line)![1]), 0);
    expect(dropped + kept * 100).toBe(80_000 * 100);
    expect(lines[lines.length - 1].line).toBe('after the burst');
  }, 120_000);

  it('a trainer killed with SIGKILL right after print(): the line comes back from the crash journal, whole', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    await startDaemon(t);
    const file = path.join(t.dir, 'kill.py');
    fs.writeFileSync(file, `
import os, signal, sys, logd
run = logd.init(project="console")
sys.stderr.write("RUN=%s\\n" % run.id)
for step in range(500):
    run.log({"loss": float(step)}, step=step)
print("about to die at step", 499)
sys.stderr.write("a last warning\\n")
os.kill(os.getpid(), signal.SIGKILL)
`);
    const r = await runPython(t, [file], { env: SOURCE });
    expect(r.signal).toBe('SIGKILL');
    const id = /RUN=(\S+)/.exec(r.all ?? '')![1];
    let got: Array<{ stream: string; line: string }> = [];
    const deadline = Date.now() + 20_000;
    while (Date.now() < deadline) {
      got = await logs(id);
      if (got.some((l) => l.line === 'a last warning')) break;
      await new Promise((res) => setTimeout(res, 200));
    }
    expect(got.map((l) => [l.stream, l.line])).toEqual([['err', 'RUN=' + id], ['out', 'about to die at step 499'], ['err', 'a last warning']]);
  }, 60_000);
});
