// Chaos: the daemon is killed with SIGKILL while writers log. Writers keep
// training without blocking, reconnect to the restarted daemon (a sidecar
// they start again themselves, or a standalone one an operator restarts),
// and every record they produced is stored exactly once.
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, spawnScript, startDaemon, serviceFile, waitUntil, alive, cliJson, script, exportJsonl, restartUnderFinish, type TestEnv } from './helpers.js';
import { SOAK, TEST_MS, chaosWorker, runIdOf, lastAcked, expectExactlyOnce } from './chaos-helpers.js';

let t: TestEnv;
afterEach(async () => t && (await t.cleanup()));

function storedBytes(dataDir: string): number {
  let n = 0;
  try {
    for (const id of fs.readdirSync(path.join(dataDir, 'runs'))) n += fs.statSync(path.join(dataDir, 'runs', id, 'records.log')).size;
  } catch {
    /* not there yet */
  }
  return n;
}

async function killNine(pid: number): Promise<void> {
  process.kill(pid, 'SIGKILL');
  await waitUntil(() => !alive(pid), 10_000, `daemon ${pid} to die`);
}

const WRITERS = 8;
const STEPS = SOAK ? 50_000 : 6000;

describe.each(['standalone', 'sidecar'] as const)('kill -9 of a %s daemon while 8 writers log', (kind) => {
  it('writers never block, reconnect, and every record is stored exactly once', async () => {
    t = makeEnv({ LOGD_RECOVERY_GRACE_MS: '30000', LOGD_IDLE_TIMEOUT_MS: '30000' });
    const extra = kind === 'standalone' ? { LOGD_NO_AUTOSTART: '1' } : {};
    if (kind === 'standalone') await startDaemon(t);
    const go = path.join(t.dir, 'go');
    const worker = chaosWorker(t, { chunk: 100, pauseMs: 2 });
    const workers = Array.from({ length: WRITERS }, (_, r) => spawnScript(t, worker, [String(r), String(STEPS), go], extra));
    await waitUntil(() => workers.every((w) => runIdOf(w.lines)), 60_000, 'every writer to create its run');
    const first = serviceFile(t.runtimeDir)!.pid;
    fs.writeFileSync(go, '');
    await waitUntil(() => storedBytes(t.dataDir) > 200_000, 60_000, 'the daemon to store some records');
    await killNine(first);
    const killedAt = Date.now();
    if (kind === 'standalone') {
      await new Promise((r) => setTimeout(r, 1500)); // writers log on, with no daemon at all
      await startDaemon(t);
    } else {
      await waitUntil(() => { const s = serviceFile(t.runtimeDir); return !!s && s.pid !== first && alive(s.pid); }, 30_000, 'a writer to start a new sidecar');
    }
    await waitUntil(() => workers.every((w) => w.lines.some((l) => l.startsWith('finished'))), 120_000, 'every writer to finish');
    const reconnectMs = Date.now() - killedAt;
    for (const [rank, w] of workers.entries()) {
      expect(w.lines.find((l) => l.startsWith('finished'))).toMatch(/^finished finished/);
      const stats = JSON.parse(w.lines.find((l) => l.startsWith('logged '))!.slice(7));
      // log() never waited on the dead daemon: a wait would last as long as finding a new one
      // (seconds); scheduling on a loaded 2-core box stays well under a second.
      expect(stats.worstLog).toBeLessThan(1000);
      expect(stats.worstChunk).toBeLessThan(1500);
      await expectExactlyOnce(t, runIdOf(w.lines)!, rank, STEPS);
    }
    console.log(`chaos: kill -9 of a ${kind} daemon under ${WRITERS} writers x ${STEPS} steps: 0 lost, 0 duplicated, all finished ${reconnectMs} ms after the kill`);
  }, TEST_MS);
});

describe('kill -9 of the daemon in the middle of writes, again and again', () => {
  const ROUNDS = SOAK ? 100 : 8;
  it(`${ROUNDS} rounds: the store opens, a torn tail is cut, every acknowledged record is present`, async () => {
    t = makeEnv({ LOGD_RECOVERY_GRACE_MS: '60000' });
    let d = await startDaemon(t);
    const steps = 1e9; // more than it gets through in any soak: the test stops it
    const worker = chaosWorker(t, { chunk: 250, flushEvery: 1 });
    const w = spawnScript(t, worker, ['3', String(steps)], { LOGD_NO_AUTOSTART: '1' });
    await waitUntil(() => !!runIdOf(w.lines), 30_000, 'the writer to create its run');
    const id = runIdOf(w.lines)!;
    const log = path.join(t.dataDir, 'runs', id, 'records.log');
    let torn = 0;
    for (let round = 0; round < ROUNDS; round++) {
      const before = lastAcked(w.lines);
      await waitUntil(() => lastAcked(w.lines) > before, 30_000, `round ${round}: new acknowledgements`);
      await new Promise((r) => setTimeout(r, 20 + ((round * 37) % 150))); // land somewhere in a write
      await killNine(d.pid);
      const acked = lastAcked(w.lines);
      if (round % 2 === 1) {
        // A crash in the middle of a frame: its length says more than is there.
        fs.appendFileSync(log, Buffer.from([0x00, 0x10, 0x00, 0x00, 0x02, 0xde, 0xad, 0xbe, 0xef, 0x01, 0x02]));
        torn++;
      }
      const sizeWithTail = fs.statSync(log).size;
      d = await startDaemon(t);
      if (round % 2 === 1) expect(fs.statSync(log).size, `round ${round}; daemon log: ${d.stderr().slice(-2000)}`).toBeLessThan(sizeWithTail);
      const info = await cliJson(t, ['show', id]);
      expect(info.state).toBe('running');
      expect(info.historyRows).toBeGreaterThanOrEqual(acked);
    }
    // SIGTERM: the writer spills what is unsent; the daemon, which has seen its
    // owner only from before the last restart, notices the dead pid at once
    // (not after the recovery grace), ingests the spill and crashes the run.
    const exited = new Promise<void>((resolve) => w.once('exit', () => resolve()));
    w.kill('SIGTERM');
    await exited;
    const goneAt = Date.now();
    await waitUntil(async () => (await cliJson(t, ['show', id])).state !== 'running', 15_000, 'the run to be final');
    expect(Date.now() - goneAt).toBeLessThan(5000 + 2000); // + the CLI's own start-up on a loaded box
    const info = await cliJson(t, ['show', id]);
    expect(info).toMatchObject({ state: 'crashed', exitCode: 143 });
    const stored = info.historyRows as number;
    expect(stored).toBeGreaterThanOrEqual(lastAcked(w.lines));
    // Whatever was stored is each step once, in order, with the right values.
    await expectExactlyOnce(t, id, 3, stored);
    console.log(`chaos: ${ROUNDS} kill -9 rounds (${torn} with a torn tail): ${stored} rows stored, every acknowledged one present, 0 duplicated`);
  }, TEST_MS);
});

/**
 * A daemon, and a writer that has logged `rows` rows and flushed them (it printed `run ID`) and waits for the file
 * `go` to finish; `finished()` waits for its `finished JSON` line (with ms) and parses it.
 */
async function finisherOnDaemon(rows: number) {
  t = makeEnv({ LOGD_RECOVERY_GRACE_MS: '30000' });
  const d = await startDaemon(t);
  const go = path.join(t.dir, 'go');
  const worker = spawnScript(t, script(t, 'finisher.mjs', `
    import fs from 'node:fs';
    const run = await logd.init({ project: 'finish-kill' });
    for (let s = 0; s < Number(process.argv[3]); s++) run.log({ v: s }, { step: s });
    await run.flush();
    console.log('run ' + run.id);
    while (!fs.existsSync(process.argv[2])) await new Promise((r) => setTimeout(r, 10));
    const t0 = Date.now();
    const res = await run.finish({ timeoutMs: 30000 });
    console.log('finished ' + JSON.stringify({ ...res, ms: Date.now() - t0 }));
  `), [go, String(rows)], { LOGD_NO_AUTOSTART: '1' });
  await waitUntil(() => !!runIdOf(worker.lines), 30_000, 'the worker to flush');
  const id = runIdOf(worker.lines)!;
  const finished = async () => {
    await waitUntil(() => worker.lines.some((l) => l.startsWith('finished ')), 40_000, 'the worker to finish');
    return JSON.parse(worker.lines.find((l) => l.startsWith('finished '))!.slice(9));
  };
  return { d, go, id, finished };
}

describe('kill -9 of the daemon while a finish is in flight', () => {
  it('finish is sent again to the restarted daemon and the run ends finished, within its deadline', async () => {
    const { d, go, id, finished } = await finisherOnDaemon(2000);
    process.kill(d.pid, 'SIGSTOP'); // the FinishRun call will wait on a daemon that cannot answer...
    fs.writeFileSync(go, '');
    await new Promise((r) => setTimeout(r, 700));
    await killNine(d.pid); // ...and then dies under it
    await new Promise((r) => setTimeout(r, 1000));
    await startDaemon(t);
    const res = await finished();
    expect(res).toMatchObject({ state: 'finished', timedOut: false });
    expect(res.ms).toBeLessThan(30_000);
    const info = await cliJson(t, ['show', id]);
    expect(info).toMatchObject({ state: 'finished', exitCode: 0, historyRows: 2000 });
    const rows = await exportJsonl(t, id);
    expect(rows.map((r) => r.v)).toEqual(Array.from({ length: 2000 }, (_, i) => i));
  });

  it('a retry that reaches the restarted daemon before its service file names it (the old token): finish looks again and ends finished', async () => {
    const { d, go, id, finished } = await finisherOnDaemon(500);
    await restartUnderFinish(t, d.pid, go);
    const res = await finished();
    expect(res, res.message).toMatchObject({ state: 'finished', timedOut: false });
    expect(await cliJson(t, ['show', id])).toMatchObject({ state: 'finished', historyRows: 500 });
  });
});

