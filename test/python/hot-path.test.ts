// Issue 39: log()'s compiled hot path (python/logd/hot/_hot.c, loaded by logd/hot/__init__.py) stores exactly what the
// pure-Python path stores. The same rows of every shape (same names, ints, NaN and infinities, a bool, an int beyond
// a double, the names in another order, a name more, a nested dict, given steps, 100 metrics, log() after finish())
// go through a real trainer twice, once on each path (LOGD_PURE_PYTHON=1), ended by finish() and by SIGKILL right
// after the last log() (the rows then come back from the crash journal); the two runs' stored rows must be equal.
import path from 'node:path';
import fs from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { makeEnv, cli, cliJson, exportJsonl, startDaemon, waitUntil, type TestEnv } from '../helpers.js';
import { FIXTURES, PYTHON, pythonMissing, runPython } from './py-helpers.js';

// The compiled path is there when the venv's install built it (python3-dev and a C compiler: scripts/python-venv.sh).
const built = pythonMissing === null && fs.readdirSync(path.join(path.dirname(path.dirname(PYTHON)), 'lib')).some((py) => {
  const dir = path.join(path.dirname(path.dirname(PYTHON)), 'lib', py, 'site-packages', 'logd', 'hot');
  return fs.existsSync(dir) && fs.readdirSync(dir).some((f) => f.startsWith('_hot.') && f.endsWith('.so'));
});

// `LOGD_PURE_PYTHON=1 npx vitest run …` (make test-slow's second pass) turns it off for both runs.
const forcedOff = !['', '0'].includes(process.env.LOGD_PURE_PYTHON ?? '');

describe.skipIf(pythonMissing !== null)(`log()'s compiled hot path against the pure-Python one${pythonMissing ? ` (skipped: ${pythonMissing})` : ''}`, () => {
  let t: TestEnv;
  beforeEach(async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    await startDaemon(t);
  });
  afterEach(async () => {
    await t.cleanup();
  });

  for (const end of ['finish', 'kill'] as const) {
    it(`the same rows of every shape, ended by ${end === 'finish' ? 'finish()' : 'SIGKILL after the last log()'}: both paths store the same`, async () => {
      const stored: Array<Array<Record<string, unknown>>> = [];
      const printed: string[][] = [];
      for (const pure of [false, true]) {
        const r = await runPython(t, [path.join(FIXTURES, 'hot_rows.py'), end], { env: pure ? { LOGD_PURE_PYTHON: '1' } : {} });
        if (end === 'kill') expect(r.signal, r.all).toBe('SIGKILL');
        else expect(r.exitCode, r.all).toBe(0);
        const [, hot, id] = /^hot_path (.+) (\w+)$/m.exec(r.stdout)!;
        if (pure) expect(hot).toBe('python (LOGD_PURE_PYTHON is set)');
        else if (built && !forcedOff) expect(hot).toBe('c');
        else console.log(`the compiled hot path is not in use here (${hot}): both runs are on the Python path`);
        if (end === 'finish') expect(r.stdout).toContain(`after finish: logd: run ${id} is finished`);
        const want = end === 'finish' ? 'finished' : 'crashed';
        await waitUntil(async () => (await cliJson<{ state: string }>(t, ['show', id])).state === want, 30_000, `run ${id} to be ${want}`);
        // Console lines, journaled as printed (the C path's console records when it is in use).
        await waitUntil(async () => (await cli(t, ['logs', id, '--json'])).stdout.includes('warning at 2900'), 20_000, `run ${id}'s last console line`);
        printed.push((await cli(t, ['logs', id, '--json'])).stdout.trim().split('\n').map((l) => {
          const e = JSON.parse(l) as { stream: string; line: string };
          return `${e.stream} ${e.line}`;
        }).filter((l) => !l.startsWith('out hot_path ')));  // the line that names the path (and the run)
        stored.push((await exportJsonl(t, id, ['--raw'])).map(({ _time, ...rest }) => {
          expect(typeof _time).toBe('number');
          return rest;
        }));
      }
      expect(stored[0].length).toBe(3200);
      expect(stored[0]).toEqual(stored[1]);
      expect(printed[0].length).toBe(60);
      expect(printed[0]).toContain('out step 2900 "quoted" back\\slash\ttab é€ 日本 😀 \x01\x7f');
      expect(printed[0]).toEqual(printed[1]);
      // A few rows by hand: the C path's ints, NaN, infinities and given steps are what was logged.
      const byStep = new Map(stored[0].map((row) => [row._step as number, row]));
      expect(byStep.get(7)).toMatchObject({ loss: 1 / 8, acc: 7, lr: -7e-300 });
      expect(byStep.get(997)).toMatchObject({ acc: 997 });
      expect(byStep.get(6050)).toMatchObject({ loss: 1 / 1051, acc: 1050 });
    }, 120_000);
  }

  it.skipIf(!built || forcedOff)('console entries of strange text (quotes, control characters, astral, lone surrogates, 9 000 characters, 300 random; 2 261 times, ties among them): the C path writes the Python path\'s bytes', async () => {
    const r = await runPython(t, [path.join(FIXTURES, 'hot_console_bytes.py')]);
    expect(r.exitCode, r.all).toBe(0);
    expect(r.stdout.trim()).toBe('equal 2567');
  });
});
