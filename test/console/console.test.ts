// Console capture (issue 20, first slice): a trainer's stdout and stderr are
// stored with its run, in order, while its own output stays exactly as it was.
import { describe, it, expect, beforeEach, afterEach } from 'vitest';
import { makeEnv, startDaemon, script, runScript, spawnScript, cli, cliJson, killDaemon, waitUntil, type TestEnv } from '../helpers.js';
import { checkConsole } from '../../daemon/runs/validate.js';
import { forTerminal } from '../../daemon/cli/logs.js';

let t: TestEnv;
beforeEach(() => {
  t = makeEnv();
});
afterEach(async () => {
  await t.cleanup();
});

async function logs(runId: string, extra: string[] = []): Promise<Array<{ t: number; stream: string; rank: number | null; line: string }>> {
  const r = await cli(t, ['logs', runId, '--json', ...extra]);
  return r.stdout.trim() === '' ? [] : r.stdout.trim().split('\n').map((l) => JSON.parse(l));
}

const TRAINER = `
const run = await logd.init({ project: 'console', console: process.env.CAPTURE !== 'off' });
console.log('starting');
console.error('a warning on stderr');
process.stdout.write('partial ');
process.stdout.write('line\\n');
for (let step = 0; step < 3; step++) {
  run.log({ loss: 1 / (step + 1) }, { step });
  console.log('step', step);
}
process.stderr.write(Buffer.from('bytes on stderr\\n'));
console.log('the end, no newline after this:');
process.stdout.write('last');
const res = await run.finish();
process.stderr.write('RUN=' + run.id + ' STATE=' + res.state + '\\n');
`;

const runIdOf = (stderr: string) => /RUN=(\S+) STATE=finished/.exec(stderr)?.[1];

describe('console capture (TypeScript client)', () => {
  it('stores every line of stdout and stderr in order with its stream, and leaves the trainer output unchanged', async () => {
    await startDaemon(t);
    const r = await runScript(t, script(t, 'train.mjs', TRAINER), [], { RANK: '3' });
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toBe('starting\npartial line\nstep 0\nstep 1\nstep 2\nthe end, no newline after this:\nlast');
    expect(r.stderr.startsWith('a warning on stderr\nbytes on stderr\n')).toBe(true);
    const id = runIdOf(r.stderr)!;
    expect(id).toBeTruthy();
    const lines = await logs(id);
    expect(lines.map((l) => [l.stream, l.line])).toEqual([
      ['out', 'starting'], ['err', 'a warning on stderr'], ['out', 'partial line'],
      ['out', 'step 0'], ['out', 'step 1'], ['out', 'step 2'], ['err', 'bytes on stderr'],
      ['out', 'the end, no newline after this:'], ['out', 'last'],
    ]);
    expect(lines.every((l) => l.rank === 3 && l.t > 1e9)).toBe(true);
    // Filters, and the text form.
    expect((await logs(id, ['--stream', 'err'])).map((l) => l.line)).toEqual(['a warning on stderr', 'bytes on stderr']);
    expect((await logs(id, ['--tail', '2'])).map((l) => l.line)).toEqual(['the end, no newline after this:', 'last']);
    expect(await logs(id, ['--rank', '0'])).toEqual([]);
    const text = await cli(t, ['logs', id, '--stream', 'out', '--tail', '3']);
    expect(text.stdout).toBe('step 2\nthe end, no newline after this:\nlast');
    // The rows are all there beside it.
    const hist = await cli(t, ['export', id]);
    expect(hist.stdout.trim().split('\n')).toHaveLength(3);
  }, 60_000);

  it('captures nothing with console: false, nor with LOGD_CONSOLE=0', async () => {
    await startDaemon(t);
    for (const env of [{ CAPTURE: 'off' }, { LOGD_CONSOLE: '0' }]) {
      const r = await runScript(t, script(t, 'quiet.mjs', TRAINER), [], env);
      expect(r.exitCode, r.stderr).toBe(0);
      expect(r.stdout).toContain('partial line\nstep 0');
      expect(await logs(runIdOf(r.stderr)!)).toEqual([]);
    }
  }, 60_000);

  it('bounds a 5 MB burst: the trainer goes on at speed, the dropped bytes are counted and the cut is marked', async () => {
    await startDaemon(t);
    const body = `
const run = await logd.init({ project: 'console', console: true });
const line = 'x'.repeat(99) + '\\n';
const t0 = performance.now();
for (let i = 0; i < 50_000; i++) process.stdout.write(line);   // 5 MB without yielding
const burstMs = performance.now() - t0;
await new Promise((r) => setTimeout(r, 400));                 // a flush interval later the capture goes on
console.log('after the burst');
run.log({ x: 1 });
const res = await run.finish();
process.stderr.write('RUN=' + run.id + ' STATE=' + res.state + ' BURST_MS=' + burstMs.toFixed(0) + ' PROBLEM=' + run.problem + '\\n');
`;
    const r = await runScript(t, script(t, 'burst.mjs', body));
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout.length).toBe(50_000 * 100 + 'after the burst'.length); // the terminal got all of it (execa strips the last newline)
    expect(r.stderr).toMatch(/console output beyond 1 MiB per flush interval is not stored/);
    expect(r.stderr.match(/console output beyond/g)).toHaveLength(1); // said once
    const burstMs = Number(/BURST_MS=(\d+)/.exec(r.stderr)![1]);
    expect(burstMs).toBeLessThan(5000);
    const lines = await logs(runIdOf(r.stderr)!);
    const kept = lines.filter((l) => l.line.startsWith('xxx'));
    expect(kept.length).toBeGreaterThan(5000);
    expect(kept.length).toBeLessThan(12_000); // about 1 MiB of the 5 MB
    const mark = lines.find((l) => l.line.startsWith('[logd: '))!;
    expect(mark.line).toMatch(/^\[logd: \d+ bytes of stdout not stored here/);
    const dropped = Number(/(\d+) bytes/.exec(mark.line)![1]);
    expect(dropped + kept.length * 100).toBe(50_000 * 100);
    expect(lines[lines.length - 1].line).toBe('after the burst');
  }, 90_000);

  it('keeps the stored lines across a killed daemon: the record log replays with its CONSOLE frames', async () => {
    await startDaemon(t);
    const w = spawnScript(t, script(t, 'held.mjs', `
const run = await logd.init({ project: 'console', console: true });
console.log('before the kill');
run.log({ a: 1 });
await run.flush();
console.log('RUN=' + run.id);
// Alive until SIGTERM, as a training loop would be (the client's own timers never hold a process up).
await new Promise((r) => { const keep = setInterval(() => {}, 1000); process.on('SIGTERM', () => { clearInterval(keep); r(); }); });
await run.finish();
`));
    await waitUntil(() => w.lines.some((l) => l.startsWith('RUN=')), 20_000, 'the trainer to flush');
    const id = w.lines.find((l) => l.startsWith('RUN='))!.slice(4);
    await waitUntil(async () => (await logs(id)).some((l) => l.line === 'RUN=' + id), 10_000, 'the second line to be stored');
    await killDaemon(t.dir, 'SIGKILL');
    // The trainer's client may start a daemon itself as it reconnects: either one replays the log.
    await startDaemon(t).catch((e: Error) => {
      if (!/another logd daemon already serves/.test(e.message)) throw e;
    });
    expect((await logs(id)).map((l) => l.line)).toEqual(['before the kill', 'RUN=' + id]);
    w.kill('SIGTERM');
    await new Promise((r) => w.once('exit', r));
    expect((await cliJson(t, ['show', id])).historyRows).toBe(1);
  }, 150_000);

  it('stores the lines printed just before process.exit(), through the exit spill', async () => {
    await startDaemon(t);
    const r = await runScript(t, script(t, 'exit.mjs', `
const run = await logd.init({ project: 'console', console: true });
process.stderr.write('RUN=' + run.id + '\\n');
run.log({ a: 1 });
console.log('the last words');
process.stdout.write('no newline either');
process.exit(3);
`));
    expect(r.exitCode).toBe(3);
    const id = /RUN=(\S+)/.exec(r.stderr)![1];
    await waitUntil(async () => (await cliJson(t, ['show', id])).state === 'crashed', 15_000, 'the spill to be ingested');
    expect((await logs(id)).map((l) => [l.stream, l.line])).toEqual([['err', 'RUN=' + id], ['out', 'the last words'], ['out', 'no newline either']]);
  }, 60_000);

  it('a trainer killed with SIGKILL right after printing: its last lines come back from the crash journal', async () => {
    await startDaemon(t);
    const r = await runScript(t, script(t, 'kill.mjs', `
const run = await logd.init({ project: 'console', console: true });
process.stderr.write('RUN=' + run.id + '\\n');
for (let step = 0; step < 500; step++) run.log({ loss: step }, { step });
console.log('about to die at step', 499);
console.error('a last warning');
process.kill(process.pid, 'SIGKILL');
`));
    expect(r.signal).toBe('SIGKILL');
    const id = /RUN=(\S+)/.exec(r.stderr)![1];
    await waitUntil(async () => (await cliJson(t, ['show', id])).state === 'crashed', 15_000, 'the run to be marked crashed');
    await waitUntil(async () => (await logs(id)).some((l) => l.line === 'a last warning'), 15_000, 'the journal to be ingested');
    expect((await logs(id)).map((l) => [l.stream, l.line])).toEqual([['err', 'RUN=' + id], ['out', 'about to die at step 499'], ['err', 'a last warning']]);
    expect((await cliJson(t, ['show', id])).historyRows).toBe(500);
  }, 60_000);

  it('logd logs GROUP merges the ranks by time, with --rank, --grep and --follow until the runs are final', async () => {
    await startDaemon(t);
    const rank = (n: number) => runScript(t, script(t, `r${n}.mjs`, `
const run = await logd.init({ project: 'console', group: 'g-logs', console: true });
console.log('hello from ' + ${n});
console.error('\\x1b[31mwarning\\x1b[0m on rank ' + ${n});
await new Promise((r) => setTimeout(r, 300));
console.log('bye from ' + ${n});
await run.finish();
`), [], { RANK: String(n) });
    expect((await rank(0)).exitCode).toBe(0);
    // --follow on the group while rank 1 runs: it prints rank 1's lines as they come, and ends once every run is final.
    const follow = cli(t, ['logs', 'g-logs', '--follow', '--json'], { timeout: 60_000 });
    await new Promise((r) => setTimeout(r, 1500));
    expect((await rank(1)).exitCode).toBe(0);
    const followed = (await follow).stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(followed.map((l) => [l.rank, l.line])).toEqual([
      [0, 'hello from 0'], [0, '\x1b[31mwarning\x1b[0m on rank 0'], [0, 'bye from 0'],
      [1, 'hello from 1'], [1, '\x1b[31mwarning\x1b[0m on rank 1'], [1, 'bye from 1'],
    ]);
    const text = await cli(t, ['logs', 'g-logs']);
    expect(text.stdout.split('\n').filter((l) => l.startsWith('[rank 1] '))).toEqual(['[rank 1] hello from 1', '[rank 1] \x1b[31mwarning\x1b[0m on rank 1', '[rank 1] bye from 1']);
    expect((await cli(t, ['logs', 'g-logs', '--grep', '^warning on rank [01]$'])).stdout.split('\n').filter(Boolean)).toHaveLength(2); // colours left out of the match
    expect((await cli(t, ['logs', 'g-logs', '--rank', '1', '--grep', 'bye'])).stdout.trim()).toBe('[rank 1] bye from 1');
    const bad = await cli(t, ['logs', 'g-logs', '--grep', '('], { reject: false });
    expect(bad.exitCode).not.toBe(0);
    expect(bad.stderr).toMatch(/--grep: .*Invalid regular expression/);
    const none = await cli(t, ['logs', 'no-such-thing'], { reject: false });
    expect(none.stderr).toMatch(/no run with id "no-such-thing" and no group of that name/);
  }, 120_000);

  it('logd logs on a terminal: colours pass, a progress bar shows its last state, other escapes are shown, not obeyed', () => {
    expect(forTerminal('\x1b[31mred\x1b[0m plain')).toBe('\x1b[31mred\x1b[0m plain');
    expect(forTerminal(' 10%|#   \r 50%|##  \r100%|####\r')).toBe('100%|####');
    expect(forTerminal('\x1b]52;c;ZXZpbA==\x07 clipboard')).toBe('^[]52;c;ZXZpbA==^G clipboard');
    expect(forTerminal('\x1b[2J\x1b]0;title\x07')).toBe('^[[2J^[]0;title^G');
    expect(forTerminal('tab\tstays\x00\x7f')).toBe('tab\tstays^@^?');
  });

  it('refuses a batch whose console entries are malformed, saying what is wrong', () => {
    expect(checkConsole(['{"t":1,"s":"out","l":"ok\\n"}'])).toEqual([{ t: 1, s: 'out', l: 'ok\n' }]);
    expect(checkConsole(undefined)).toEqual([]);
    expect(checkConsole(['nope'])).toBe('console entry 0 is not JSON');
    expect(checkConsole(['[1]'])).toBe('console entry 0 is not a JSON object');
    expect(checkConsole(['{"t":1,"s":"tty","l":"x"}'])).toMatch(/"s" must be "out" or "err", not "tty"/);
    expect(checkConsole(['{"t":1,"s":"err","l":5}'])).toMatch(/"l" must be a string/);
    expect(checkConsole([JSON.stringify({ t: 1, s: 'out', l: 'x'.repeat(70_000) })])).toMatch(/70000 bytes, more than 65536/);
  });

  it('keeps log() free of capture code', async () => {
    // The capture lives on the process's streams; log()'s path (Run.log -> BatchWriter.add -> OpenBatch.add) never touches it.
    const fs = await import('node:fs');
    const { ROOT } = await import('../helpers.js');
    const run = fs.readFileSync(`${ROOT}/client/run.ts`, 'utf8');
    const logBody = run.slice(run.indexOf('  log(data'), run.indexOf('  get problem'));
    expect(logBody).not.toMatch(/console/i);
    const writer = fs.readFileSync(`${ROOT}/client/writer.ts`, 'utf8');
    expect(writer.slice(writer.indexOf('  add(data'), writer.indexOf('  summary(obj'))).not.toMatch(/console/i);
  });
});
