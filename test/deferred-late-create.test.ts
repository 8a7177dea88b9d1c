// Issue 32 item 4: a CreateRun that the client gave up on (it went deferred,
// logged, finished and exited, leaving its spill file) but that the daemon
// completed late. Before: the daemon's run (owner dead, no stream ever) was
// crashed "exited without finish" and the spill moved aside as .orphan: every
// row lost although the trainer called finish(). Now both are one run: the
// spill's writer is the owner that created it, its rows are stored and the
// run ends as its trainer ended it. Real processes: the daemon is stopped
// (SIGSTOP) while the trainer gives up, and the late CreateRun, the very one
// the trainer sent (same id, same create key, its pid), waits in the
// daemon's socket until it is resumed.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, script, runScript, spawnScript, startDaemon, waitUntil, cliJson, exportJsonl, CLIENT, type TestEnv } from './helpers.js';
import { scanFrames } from '../dist/src/frames.js';
import { SPILL_HEADER, type SpillHeader } from '../dist/src/spill.js';

let t: TestEnv;
let stopped = 0;
afterEach(async () => {
  if (stopped) process.kill(stopped, 'SIGCONT');
  stopped = 0;
  if (t) await t.cleanup();
});

function spillHeader(file: string): SpillHeader {
  let h: SpillHeader | null = null;
  scanFrames(file, (type, p) => {
    if (type === SPILL_HEADER) h = JSON.parse(Buffer.from(p).toString('utf8')) as SpillHeader;
  });
  return h!;
}

describe('issue 32 item 4: a CreateRun completed after its client went deferred', () => {
  for (const exit of ['finish', 'no-finish'] as const) {
    it(`the daemon's run and the deferred run are one: every row stored, the run ends as its trainer ended it (${exit})`, async () => {
      t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '60000', LOGD_SAMPLE_INTERVAL_MS: '0' });
      const daemon = await startDaemon(t);
      process.kill(daemon.pid, 'SIGSTOP');
      stopped = daemon.pid;
      // The trainer gives up on the stopped daemon within 1.5 s, logs, and ends (finish() times out: deferred).
      const r = await runScript(t, script(t, 'trainer.mjs', `
        const run = await logd.init({ project: 'late', config: { lr: 0.1 } });
        for (let s = 0; s < 100; s++) run.log({ loss: 1 / (s + 1) }, { step: s });
        if (process.argv[2] === 'finish') await run.finish({ timeoutMs: 500 });
        console.log('run ' + run.id);
      `), [exit], { LOGD_CALL_TIMEOUT_MS: '1000', LOGD_START_TIMEOUT_MS: '500' });
      expect(r.exitCode, r.stderr).toBe(0);
      expect(r.stderr).toMatch(/deferred: init: no logd daemon answered/);
      const id = r.stdout.trim().split(' ')[1];
      const spool = path.join(t.dataDir, 'spool');
      const [spill] = fs.readdirSync(spool).filter((f) => f.startsWith(id) && f.endsWith('.deferred.spill'));
      const h = spillHeader(path.join(spool, spill));
      expect(h.create?.createKey).toBeTruthy();

      // The trainer's CreateRun, late: it waits in the stopped daemon's socket, and runs as the daemon resumes.
      const late = spawnScript(t, script(t, 'late-create.mjs', `
        import { connectionFor } from ${JSON.stringify(CLIENT.replace(/index\.js$/, 'connection.js'))};
        import { findDaemon } from ${JSON.stringify(CLIENT.replace(/index\.js$/, 'discovery.js'))};
        const h = JSON.parse(process.argv[2]);
        const c = h.create;
        const addr = await findDaemon({ autoStart: false });
        const info = await connectionFor(addr).unary('createRun', {
          client: c.client, project: c.project, name: c.name, group: c.group, jobType: c.jobType, configJson: c.configJson, tags: c.tags,
          id: h.runId, mode: c.mode, notes: c.notes, sampleIntervalMs: 0, createKey: c.createKey, resume: '',
        }, 30000);
        console.log('created ' + info.id + ' ' + info.state);
      `), [JSON.stringify(h)]);
      await new Promise((res) => setTimeout(res, 1000)); // the request is in the daemon's socket
      process.kill(daemon.pid, 'SIGCONT');
      stopped = 0;
      const [code] = await late.closed;
      expect(code).toBe(0);
      expect(late.lines).toContain(`created ${id} running`);

      await waitUntil(async () => (await cliJson(t, ['show', id])).state !== 'running', 30_000, `run ${id} to end`);
      const shown = await cliJson(t, ['show', id]);
      expect(shown.state, shown.stateReason).toBe('finished');
      expect(shown.historyRows).toBe(100);
      expect(shown.config).toEqual({ lr: 0.1 });
      expect((await exportJsonl(t, id, ['--keys', 'loss'])).map((x) => x._step)).toEqual(Array.from({ length: 100 }, (_, i) => i));
      expect(fs.readdirSync(spool).filter((f) => f.endsWith('.orphan'))).toEqual([]);
    }, 90_000);
  }
});
