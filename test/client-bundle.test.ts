// `import 'logd'` loads the client bundled into one file (dist/client/logd.cjs, through the loader
// dist/client/logd.js, made by `make build`): it must be the same client as dist/client/index.js, compile from
// the code cache the build made (and without it, or with a damaged one), and work end to end in a fresh process
// against a real daemon.
import fs from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';
import { ROOT, CLIENT, makeEnv, startDaemon, cliJson, type TestEnv } from './helpers.js';

const BUNDLE = path.join(ROOT, 'dist', 'client', 'logd.js');
const BUNDLE_CJS = path.join(ROOT, 'dist', 'client', 'logd.cjs');

let t: TestEnv;
afterEach(async () => t && (await t.cleanup()));

describe("the client as `import 'logd'` loads it", () => {
  it('is the bundle, built from the current client and exporting the same names', async () => {
    expect(fs.existsSync(BUNDLE), `${BUNDLE} is missing: run \`make build\` (tsc, then scripts/bundle-client.mjs)`).toBe(true);
    expect(fs.statSync(BUNDLE).mtimeMs, `${BUNDLE} is older than ${CLIENT}: run \`make build\``).toBeGreaterThanOrEqual(fs.statSync(CLIENT).mtimeMs - 1000);
    const names = async (spec: string) => (await execa(process.execPath, ['--input-type=module', '-e', `const m = await import(${JSON.stringify(spec)}); console.log(Object.keys(m).sort().join(','))`], { cwd: ROOT })).stdout;
    const bundled = await names('logd');
    expect(bundled).toContain('init');
    expect(bundled).toBe(await names(CLIENT));
  });

  it("a fresh process compiles it from the build's code cache; LOGD_CODE_CACHE=0 leaves the cache out; the modules say 'unbundled'", async () => {
    const status = async (spec: string, env: Record<string, string> = {}) =>
      (await execa(process.execPath, ['--input-type=module', '-e', `const m = await import(${JSON.stringify(spec)}); console.log(m.codeCache())`], { cwd: ROOT, env: { ...process.env, ...env } })).stdout.trim();
    expect(fs.existsSync(`${BUNDLE_CJS}.cache`), 'dist/client/logd.cjs.cache is missing: `make build` (scripts/bundle-client.mjs) makes it').toBe(true);
    expect(await status('logd')).toBe('accepted');
    expect(await status('logd', { LOGD_CODE_CACHE: '0' })).toBe('off');
    expect(await status(CLIENT)).toBe('unbundled');
  });

  it('LOGD_BUILD_CODE_CACHE left in an environment writes no file but one beside the bundle', async () => {
    t = makeEnv();
    const elsewhere = path.join(t.dir, 'not-a-cache');
    await execa(process.execPath, ['--input-type=module', '-e', `await import('logd')`], { cwd: ROOT, env: { ...process.env, LOGD_BUILD_CODE_CACHE: elsewhere } });
    expect(fs.existsSync(elsewhere)).toBe(false);
  });

  it('a damaged or missing code cache is no harm: the client compiles as usual, logs and finishes', async () => {
    t = makeEnv();
    await startDaemon(t);
    // A copy of the loader and the bundle, next to a cache of garbage, then next to none.
    const dir = path.join(t.dir, 'dist', 'client');
    fs.mkdirSync(dir, { recursive: true });
    fs.copyFileSync(BUNDLE, path.join(dir, 'logd.js'));
    fs.copyFileSync(BUNDLE_CJS, path.join(dir, 'logd.cjs'));
    fs.writeFileSync(path.join(dir, 'logd.cjs.cache'), Buffer.alloc(50_000, 7));
    const body = `
      const logd = await import(${JSON.stringify(path.join(dir, 'logd.js'))});
      const run = await logd.init({ project: 'bundle', name: 'damaged' });
      for (let i = 0; i < 10; i++) run.log({ loss: i }, { step: i });
      const res = await run.finish();
      console.log(JSON.stringify({ id: run.id, state: res.state, cache: logd.codeCache() }));`;
    for (const want of ['rejected', 'none']) {
      const r = await execa(process.execPath, ['--input-type=module', '-e', body], { cwd: ROOT, env: t.env, reject: false, timeout: 60_000 });
      expect(r.exitCode, r.stderr).toBe(0);
      const out = JSON.parse(r.stdout.trim().split('\n').pop()!);
      expect(out).toMatchObject({ state: 'finished', cache: want });
      const runs = await cliJson<Array<{ id: string; historyRows: number }>>(t, ['runs']);
      expect(runs.find((x) => x.id === out.id)?.historyRows).toBe(10);
      fs.rmSync(path.join(dir, 'logd.cjs.cache'), { force: true });
    }
  });

  it('a fresh process imports it, logs 100 rows and finishes; every row is stored', async () => {
    t = makeEnv();
    await startDaemon(t);
    const body = `
      const logd = await import('logd');
      const run = await logd.init({ project: 'bundle', name: 'b' });
      for (let i = 0; i < 100; i++) run.log({ loss: 1 / (i + 1), acc: i / 100 }, { step: i });
      const res = await run.finish();
      console.log(JSON.stringify({ id: run.id, state: res.state }));`;
    const r = await execa(process.execPath, ['--input-type=module', '-e', body], { cwd: ROOT, env: t.env, reject: false, timeout: 60_000 });
    expect(r.exitCode, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(out.state).toBe('finished');
    const runs = await cliJson<Array<{ id: string; state: string; historyRows: number }>>(t, ['runs']);
    expect(runs.find((x) => x.id === out.id)).toMatchObject({ state: 'finished', historyRows: 100 });
  });
});
