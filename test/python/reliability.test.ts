// The Python client in the ways issue 9 found runs losing data (cases 1, 5,
// 6, 7 and 13, as the TypeScript client's tests check them): children that
// share a run and never finish, from another HOME; a trainer that handles
// SIGTERM itself; a full disk with the client's buffer full too; names that
// collide. Real daemons, real Python processes; what was stored is read back
// through the logd CLI.
import fs from 'node:fs';
import path from 'node:path';
import { execa } from 'execa';
import { describe, it, expect, afterEach } from 'vitest';
import { makeEnv, startDaemon, waitUntil, alive, cliJson, exportJsonl, type TestEnv } from '../helpers.js';
import { FIXTURES, pythonMissing, runPython, spawnPython, killSpawnedPython } from './py-helpers.js';

let t: TestEnv;
let mounted: string | null = null;
afterEach(async () => {
  killSpawnedPython();
  if (t) await t.cleanup().catch(() => {});
  if (mounted) {
    await execa('umount', ['-l', mounted], { reject: false });
    fs.rmSync(t.dir, { recursive: true, force: true }); // the mount point could not go while mounted
  }
  mounted = null;
});

const spoolFiles = (dataDir: string) => (fs.existsSync(path.join(dataDir, 'spool')) ? fs.readdirSync(path.join(dataDir, 'spool')) : []);

describe.skipIf(pythonMissing !== null)(`Python client: nothing lost${pythonMissing ? ` (skipped: ${pythonMissing})` : ''}`, () => {
  it('issue 9 cases 1 and 6: children from another HOME that attach, log and die of SIGTERM: the owner\'s finish stores all their rows', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000' });
    const otherHome = path.join(t.dir, 'other-home');
    fs.mkdirSync(otherHome);
    // Shorter than the test's own timeout, so a stuck run fails with what it printed.
    const r = await runPython(t, [path.join(FIXTURES, 'shared_owner.py'), path.join(FIXTURES, 'shared_child.py'), otherHome], { timeout: 100_000 });
    expect(r.exitCode, r.all).toBe(0);
    const res = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(res).toMatchObject({ state: 'finished', codes: [-15, -15, -15] });
    const info = await cliJson(t, ['show', res.id]);
    expect(info.historyRows).toBe(200);
    expect(info.metadata.writers).toHaveLength(4); // each child is a writer from its attach on
    const raw = await exportJsonl(t, res.id, ['--raw']);
    for (const key of ['owner', 'child0', 'child1', 'child2']) {
      expect(raw.filter((x) => key in x).map((x) => x[key]), key).toEqual(Array.from({ length: 50 }, (_, i) => i));
    }
    // The spill files went to the daemon's spool (and were ingested), never to the children's own HOME.
    expect(spoolFiles(t.dataDir)).toEqual([]);
    expect(fs.existsSync(path.join(otherHome, '.local'))).toBe(false);
  }, 150_000);

  it('issue 9 case 5: a trainer with its own SIGTERM handler logs on after the signal; the run stays open and ends as its owner says', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000' });
    const p = spawnPython(t, [path.join(FIXTURES, 'preempted.py')]);
    await waitUntil(() => p.lines.some((l) => l.startsWith('run ')), 60_000, 'the trainer to start');
    await new Promise((r) => setTimeout(r, 300)); // it logs a while
    p.kill('SIGTERM');
    await waitUntil(() => p.lines.some((l) => l.startsWith('finished ')) || p.exitCode !== null, 60_000, 'the trainer to finish');
    expect(p.lines.some((l) => l.startsWith('threw')), p.lines.join('\n') + p.err()).toBe(false);
    expect(p.lines).toContain('after 500');
    const [, state, steps] = p.lines.find((l) => l.startsWith('finished '))!.split(' ');
    expect(state).toBe('finished');
    const id = p.lines.find((l) => l.startsWith('run '))!.slice(4);
    const rows = await exportJsonl(t, id);
    expect(rows.map((r) => r.loss)).toEqual(Array.from({ length: Number(steps) }, (_, i) => i));
    expect(spoolFiles(t.dataDir)).toEqual([]);
  });

  it('issue 9 case 7: with the disk full and the client buffer at LOGD_MAX_BUFFER_MB, rows are dropped with an exact count and log() never raises', async (ctx) => {
    t = makeEnv({ LOGD_MAX_BUFFER_MB: '1', LOGD_SAMPLE_INTERVAL_MS: '0', LOGD_IDLE_TIMEOUT_MS: '120000' });
    fs.mkdirSync(t.dataDir, { recursive: true });
    const m = await execa('mount', ['-t', 'tmpfs', '-o', 'size=8m', 'tmpfs', t.dataDir], { reject: false });
    if (m.exitCode !== 0) return ctx.skip(`cannot mount a tmpfs here (${m.stderr.trim() || `exit ${m.exitCode}`}); run as root where mount is permitted`);
    mounted = t.dataDir;
    const d = await startDaemon(t);
    const STEPS = 60_000;
    const go = path.join(t.dir, 'go');
    const freed = path.join(t.dir, 'freed');
    const p = spawnPython(t, [path.join(FIXTURES, 'disk_full.py'), go, freed], { LOGD_NO_AUTOSTART: '1' });
    await waitUntil(() => p.lines.some((l) => l.startsWith('run ')), 60_000, 'the writer to create its run');
    const id = p.lines.find((l) => l.startsWith('run '))!.slice(4);
    const filler = path.join(t.dataDir, 'filler');
    const free = () => { const s = fs.statfsSync(t.dataDir); return s.bavail * s.bsize; };
    fs.writeFileSync(filler, Buffer.alloc(Math.max(0, free() - 512 * 1024)));
    fs.writeFileSync(go, '');
    await waitUntil(() => p.lines.some((l) => l.startsWith('logged ')), 120_000, 'the writer to log every row with memory and disk full');
    const logged = JSON.parse(p.lines.find((l) => l.startsWith('logged '))!.slice(7));
    expect(logged.threw, logged.first).toBe(0);
    expect(logged.problem, p.err()).toMatch(/rows dropped/);
    expect(logged.problem).toMatch(/^\d+ rows dropped: .*(No space|ENOSPC)/);
    fs.rmSync(filler);
    fs.writeFileSync(freed, '');
    await waitUntil(() => p.exitCode !== null, 120_000, 'the writer to finish once space is back');
    expect(p.exitCode, p.err()).toBe(0);
    const finished = JSON.parse(p.lines.find((l) => l.startsWith('finished '))!.slice(9));
    expect(finished.state, `${finished.message}\n${p.err()}\ndaemon: ${d.stderr().slice(-3000)}`).toBe('finished');
    const info = await cliJson(t, ['show', id]);
    const dropped = info.metadata.droppedRows as number;
    expect(dropped).toBeGreaterThan(0);
    expect(info.historyRows + dropped).toBe(STEPS); // every row is stored or counted as dropped
    expect(finished.problem).toMatch(new RegExp(`^${dropped} rows dropped`));
    expect(p.err().match(/rows dropped/g)).toHaveLength(1); // stderr once
    const rows = await exportJsonl(t, id);
    expect(rows).toHaveLength(info.historyRows);
    for (const r of rows) for (let k = 0; k < 10; k++) expect(r[`m${k}`]).toBe((r._step as number) * 16 + k);
    const leftovers = fs.readdirSync(t.dataDir, { recursive: true }).map(String).filter((f) => /\.(tmp|overflow|spill)$/.test(f));
    expect(leftovers).toEqual([]);
    expect(alive(d.pid)).toBe(true);
    console.log(`python: disk full and a 1 MB client buffer: ${info.historyRows} of ${STEPS} rows stored, ${dropped} dropped and counted, 0 raised`);
  });

  it('issue 9 case 13: _step, _time, _writer and a name twice in one row after flattening are a TypeError; nothing of that row is kept', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000' });
    const r = await runPython(t, [path.join(FIXTURES, 'names.py')]);
    expect(r.exitCode, r.all).toBe(0);
    const res = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(res.state).toBe('finished');
    const [step, time, writer, flat1, flat2, nested] = res.errors;
    expect(step).toMatch(/metric name '_step' is reserved: exports use _step, _time and _writer/);
    expect(time).toMatch(/metric name '_time' is reserved/);
    expect(writer).toMatch(/metric name '_writer' is reserved/);
    expect(flat1).toMatch(/metric name 'a\/b' appears twice in one row .*rename one of them/);
    expect(flat2).toMatch(/metric name 'a\/b' appears twice in one row/);
    expect(nested).toBeNull(); // "n/_step" is a name like any other
    const rows = await exportJsonl(t, res.id);
    expect(rows).toHaveLength(2);
    expect(rows[0]).toMatchObject({ 'n/_step': 3 });
    expect(rows[1]).toMatchObject({ 'a/b': 1, 'a/c': 2, step: 5 });
    expect(rows.every((row) => !('x' in row))).toBe(true);
  });

  it('a batch with empty columns (config or summary updates only, a row of only None) is stored, not refused by the daemon', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '120000' });
    const code = [
      'import logd, json',
      'r = logd.init(project="empty", config={"a": 1})',
      'r.log({"x": 1}); r.flush()',
      'r.config.update({"b": 2}); r.summary.update({"best": 3}); ok1 = r.flush()',
      'r.log({"n": None}); ok2 = r.flush()',
      'res = r.finish()',
      'print(json.dumps({"id": r.id, "state": res.state, "flushed": [ok1, ok2]}))',
    ].join('\n');
    const r = await runPython(t, ['-c', code]);
    expect(r.exitCode, r.all).toBe(0);
    expect(r.stderr).not.toMatch(/refused/);
    const res = JSON.parse(r.stdout.trim().split('\n').pop()!);
    expect(res).toMatchObject({ state: 'finished', flushed: [true, true] });
    const info = await cliJson(t, ['show', res.id]);
    expect(info.config).toEqual({ a: 1, b: 2 });
    expect(info.summary).toMatchObject({ best: 3 });
    expect(info.historyRows).toBe(2);
  });
});
