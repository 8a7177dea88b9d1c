// TCP: loopback by default, the token on every call, no accidental exposure.
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, startDaemon, serviceFile, script, runScript, cli, cliJson, type TestEnv } from './helpers.js';

let t: TestEnv;
afterEach(async () => t && (await t.cleanup()));

describe('tcp', () => {
  it('serves on loopback with --port, clients log over TCP with the token, a wrong token is refused', async () => {
    t = makeEnv();
    await startDaemon(t, ['--port', '0']);
    const s = serviceFile(t.runtimeDir)!;
    expect(s.tcp).toMatch(/^127\.0\.0\.1:\d+$/);
    const w = script(t, 'tcp.mjs', `
      const run = await logd.init({ project: 'tcp' });
      for (let i = 0; i < 500; i++) run.log({ v: i });
      const r = await run.finish();
      console.log(JSON.stringify({ id: run.id, state: r.state, service: process.env.LOGD_SERVICE.replace(/#.*/, '') }));
    `);
    const good = await runScript(t, w, [], { LOGD_SERVICE: `${s.tcp}#${s.token}`, LOGD_NO_AUTOSTART: '1' });
    expect(good.exitCode, good.stderr).toBe(0);
    const out = JSON.parse(good.stdout.trim());
    expect(out).toMatchObject({ state: 'finished', service: s.tcp });
    expect((await cliJson(t, ['show', out.id])).historyRows).toBe(500);
    // A wrong token is refused. The client then takes LOGD_SERVICE for stale and
    // looks for a daemon of its own data dir: here (as for a remote client) there is none.
    const elsewhere = { LOGD_DIR: `${t.dir}/elsewhere`, LOGD_RUNTIME_DIR: `${t.dir}/elsewhere-rt`, LOGD_CALL_TIMEOUT_MS: '1000', LOGD_START_TIMEOUT_MS: '1000' };
    const bad = await runScript(t, w, [], { LOGD_SERVICE: `${s.tcp}#not-the-token`, LOGD_NO_AUTOSTART: '1', LOGD_ON_ERROR: 'raise', ...elsewhere });
    expect(bad.exitCode).not.toBe(0);
    expect(bad.stderr).toMatch(/LOGD_SERVICE \(127\.0\.0\.1:\d+\) is stale: the daemon there refuses its token/);
    expect(bad.stderr).toMatch(/DaemonUnavailableError: init: no logd daemon answered within 2000 ms/);
    // The token never shows in status output.
    const st = await cli(t, ['status']);
    expect(st.stdout).not.toContain(s.token);
    expect(JSON.stringify(await cliJson(t, ['status']))).not.toContain(s.token);
  });

  it('refuses a non-loopback address unless --allow-remote is given', async () => {
    t = makeEnv();
    const r = await cli(t, ['serve', '--port', '0', '--host', '0.0.0.0'], { reject: false, timeout: 15_000 });
    expect(r.exitCode).not.toBe(0);
    expect(r.stderr).toMatch(/refusing to listen on 0\.0\.0\.0.*--allow-remote/);
  });
});
