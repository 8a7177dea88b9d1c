// `logd stop` sticks (issue 38, item 13): with `logd ui` open, the stopped
// daemon stays stopped (the dashboard says why, 503) and `logd runs` says so
// too, until a trainer needs a daemon; then both read again. Nothing is left
// defunct under the dashboard.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { makeEnv, cli, script, runScript, waitUntil, type TestEnv } from './helpers.js';
import { startUi, getJson, type UiProcess } from './ui/helpers.js';

let t: TestEnv;
let ui: UiProcess;
afterAll(async () => {
  await ui?.stop();
  await t?.cleanup();
});

/** Pids of `logd serve` processes of this test's data dir. */
function daemons(): number[] {
  const out: number[] = [];
  for (const pid of fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      const env = fs.readFileSync(`/proc/${pid}/environ`, 'utf8');
      if (cmd.includes('serve') && env.includes(`LOGD_DIR=${t.dataDir}\0`)) out.push(Number(pid));
    } catch {
      /* gone */
    }
  }
  return out;
}

/** Children of `pid` that exited and were not collected. */
function zombiesOf(pid: number): number[] {
  return fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d)).filter((d) => {
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return fields[0] === 'Z' && Number(fields[1]) === pid;
    } catch {
      return false;
    }
  }).map(Number);
}

describe('logd stop sticks', () => {
  it('the dashboard does not start the stopped daemon again; a trainer does, and then the dashboard reads again', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000' });
    const trainer = script(t, 'one-run.mjs', `
      const run = await logd.init({ project: 'stop', name: process.argv[2] });
      run.log({ x: 1 });
      await run.finish();
      console.log('run ' + run.id);
    `);
    expect((await runScript(t, trainer, ['first'])).exitCode).toBe(0);
    ui = await startUi(t);
    expect((await getJson(ui, '/api/runs')).status).toBe(200);
    expect(daemons()).toHaveLength(1);

    const stop = await cli(t, ['stop']);
    expect(stop.stdout).toMatch(/daemon stopping/);
    await waitUntil(() => daemons().length === 0, 15_000, 'the daemon to stop');
    // The dashboard's keep-alive and its pages do not bring it back.
    for (let i = 0; i < 4; i++) {
      const r = await getJson(ui, '/api/runs');
      expect(r.status).toBe(503);
      expect(r.body.error).toMatch(/was stopped with `logd stop` at .* and stays stopped until a trainer starts one or you run `logd serve`/);
      await new Promise((res) => setTimeout(res, 500));
    }
    expect(daemons()).toEqual([]);
    const runs = await cli(t, ['runs'], { reject: false });
    expect(runs.exitCode).not.toBe(0);
    expect(runs.stderr).toMatch(/stopped with `logd stop`/);
    expect(daemons()).toEqual([]);
    expect(zombiesOf(ui.proc.pid!)).toEqual([]);

    // A trainer needs one: it starts, and readers read again.
    expect((await runScript(t, trainer, ['second'])).exitCode).toBe(0);
    expect(fs.existsSync(path.join(t.dataDir, 'daemon.stopped'))).toBe(false);
    await waitUntil(async () => (await getJson(ui, '/api/runs')).status === 200, 15_000, 'the dashboard to read again');
    const listed = (await getJson(ui, '/api/runs')).body.runs.map((r: { name: string }) => r.name).sort();
    expect(listed).toEqual(['first', 'second']);
    expect(daemons()).toHaveLength(1);
    expect(zombiesOf(ui.proc.pid!)).toEqual([]);
  });
});
