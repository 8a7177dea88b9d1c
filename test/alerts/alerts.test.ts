// Issue 35, first slice: alerts to a webhook. A real local HTTP receiver (a
// server in this test) records every POST; real daemons, real trainers, a
// real 4-rank torchrun job. Checked: one `job failed` alert with the story for
// a SIGKILLed rank; retries after 500s (delivered once); a receiver that is
// down while the daemon restarts (sent after the restart, once); a receiver
// that never answers (the daemon answers on, the alert is given up and
// listed); a malformed alerts file (alerts off, the daemon runs and says
// where); a webhook URL never shown whole.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { execa } from 'execa';
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, startDaemon, killDaemon, cli, cliJson, script, spawnScript, waitUntil, type TestEnv } from '../helpers.js';
import { dashboardFor, getJson } from '../ui/helpers.js';
import { FIXTURES, PYTHON, torchMissing, pythonMissing, pyEnv, freePort, runPython } from '../python/py-helpers.js';

interface Received { at: number; body: any }
interface Receiver { url: string; port: number; got: Received[]; close: () => Promise<void> }

/** A webhook receiver: `answer` decides each reply (a status, or 'hang' for none). */
async function receiver(answer: (n: number) => number | 'hang' = () => 200, port = 0): Promise<Receiver> {
  const got: Received[] = [];
  const hanging: http.ServerResponse[] = [];
  const server = http.createServer((req, res) => {
    let data = '';
    req.on('data', (c) => (data += c));
    req.on('end', () => {
      got.push({ at: Date.now() / 1000, body: JSON.parse(data) });
      const a = answer(got.length);
      if (a === 'hang') hanging.push(res);
      else res.writeHead(a, { 'content-type': 'text/plain' }).end(a === 200 ? 'ok' : 'try again');
    });
  });
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', () => r()));
  const p = (server.address() as AddressInfo).port;
  return { url: `http://127.0.0.1:${p}/hooks/T0K3N-SECRET`, port: p, got, close: () => new Promise((r) => { for (const h of hanging) h.destroy(); server.closeAllConnections(); server.close(() => r()); }) };
}

let t: TestEnv | null = null;
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
  if (t) {
    await killDaemon(t.dir);
    await t.cleanup();
    t = null;
  }
});

/** A run of no group that crashes: its process exits with code 3 without finish(). */
function crashingRun(env: TestEnv, name = 'crasher') {
  const file = script(env, `${name}.mjs`, `
    const run = await logd.init({ project: 'alerts', name: ${JSON.stringify(name)} });
    for (let i = 0; i < 10; i++) run.log({ loss: i });
    await run.flush();
    process.exit(3);
  `);
  return spawnScript(env, file);
}

describe('alerts to a webhook', () => {
  it.skipIf(torchMissing !== null)(`a SIGKILLed rank of a 4-rank torchrun job: exactly one \`job failed\` alert, with the story${torchMissing ? ` (skipped: ${torchMissing})` : ''}`, async () => {
    const rx = await receiver();
    closers.push(rx.close);
    t = makeEnv({ LOGD_ALERT_WEBHOOK: rx.url, LOGD_IDLE_TIMEOUT_MS: '120000' });
    await startDaemon(t);
    const job = await execa(PYTHON, ['-m', 'torch.distributed.run', '--nproc_per_node', '4', '--master_port', String(await freePort()), '--redirects', '1', '--tee', '1',
      '--log_dir', path.join(t.dir, 'tr'), path.join(FIXTURES, 'story_train.py'), 'alert-kill', 'kill', '2', '25'],
    { env: pyEnv(t, { OMP_NUM_THREADS: '1' }), extendEnv: false, reject: false, all: true, timeout: 180_000 });
    expect(job.exitCode).not.toBe(0);
    const died = Number(/about to fail \(kill\) at (\d+\.\d+)/.exec(job.all ?? '')![1]);
    await waitUntil(() => rx.got.length >= 1, 60_000, 'the alert');
    await new Promise((r) => setTimeout(r, 3000)); // no second alert: one per job, not one per rank
    expect(rx.got).toHaveLength(1);
    const b = rx.got[0].body;
    expect(b).toMatchObject({ source: 'logd', kind: 'job failed', project: 'story', group: 'alert-kill' });
    expect(b.title).toMatch(/^job alert-kill failed: rank 2 was killed by SIGKILL$/);
    expect(b.text).toMatch(/^failed: rank 2 \(pid \d+, [^)]+\) was killed by SIGKILL at step 25, .*; ranks 0, 1, 3 failed/);
    expect(b.event.story.first[0]).toMatchObject({ rank: 2, cause: 'killed' });
    process.stdout.write(`alerts: death to POST ${((rx.got[0].at - died) * 1000).toFixed(0)} ms\n`);
    const listed = await cliJson<Array<{ state: string; attempts: number; kind: string }>>(t, ['alerts']);
    expect(listed.map((l) => [l.state, l.kind, l.attempts])).toEqual([['sent', 'job failed', 1]]);
  }, 240_000);

  it('a stalled job (two live ranks that stop stepping): one `job stalled` alert naming them', async () => {
    const rx = await receiver();
    closers.push(rx.close);
    t = makeEnv({ LOGD_ALERT_WEBHOOK: rx.url, LOGD_IDLE_TIMEOUT_MS: '120000' });
    await startDaemon(t);
    const file = script(t, 'rank.mjs', `
      const run = await logd.init({ project: 'alerts', group: 'hang', name: 'r' + process.env.RANK, config: { 'logd.health': { stallFloorS: 3 } } });
      for (let step = 0; step < 30; step++) {
        run.log({ loss: 1 / (step + 1) }, { step });
        await new Promise((r) => setTimeout(r, 50));
      }
      await run.flush();
      console.log('paused');
      await new Promise((r) => setTimeout(r, 60_000));
    `);
    const ranks = [0, 1].map((r) => spawnScript(t!, file, [], { RANK: String(r), WORLD_SIZE: '2', LOCAL_RANK: String(r) }));
    closers.push(async () => { for (const p of ranks) p.kill('SIGKILL'); });
    await waitUntil(() => rx.got.some((g) => g.body.kind === 'job stalled'), 40_000, 'a job stalled alert');
    await new Promise((r) => setTimeout(r, 3000));
    const stalls = rx.got.filter((g) => g.body.kind === 'job stalled');
    expect(stalls).toHaveLength(1);
    expect(stalls[0].body).toMatchObject({ project: 'alerts', group: 'hang' });
    expect(stalls[0].body.title).toBe('job stalled in group hang: rank 0, rank 1');
    // The figure (bench/RESULTS.md): from the health event (the stall judged, 3 s after the last step here) to the POST.
    process.stdout.write(`alerts: job stalled event to POST ${((stalls[0].at - stalls[0].body.at) * 1000).toFixed(0)} ms\n`);
  }, 90_000);

  it('a receiver that answers 500 three times, then 200: delivered once, after retries; `logd alerts` says so', async () => {
    const rx = await receiver((n) => (n <= 3 ? 500 : 200));
    closers.push(rx.close);
    t = makeEnv({ LOGD_ALERT_WEBHOOK: rx.url });
    await startDaemon(t);
    const p = crashingRun(t);
    await p.closed;
    await waitUntil(() => rx.got.length >= 4, 30_000, 'four POSTs (three refused)');
    await new Promise((r) => setTimeout(r, 2500));
    expect(rx.got).toHaveLength(4);
    expect(new Set(rx.got.map((g) => JSON.stringify(g.body))).size).toBe(1);
    expect(rx.got[0].body).toMatchObject({ kind: 'run crashed', project: 'alerts', title: 'run crasher crashed' });
    expect(rx.got[0].body.text).toMatch(/exit(ed)? with code 3/);
    const listed = await cliJson<Array<{ state: string; attempts: number; last: string }>>(t, ['alerts']);
    expect(listed).toMatchObject([{ state: 'sent', attempts: 4, last: 'HTTP 200: ok' }]);
  }, 60_000);

  it('a receiver that is down while the daemon restarts: the alert waits on disk and is sent after the restart, once', async () => {
    const port = await freePort();
    t = makeEnv({ LOGD_ALERT_WEBHOOK: `http://127.0.0.1:${port}/hook` });
    await startDaemon(t);
    const p = crashingRun(t);
    await p.closed;
    await waitUntil(async () => (await cliJson<Array<{ state: string; attempts: number }>>(t!, ['alerts'])).some((a) => a.state === 'pending' && a.attempts >= 1), 20_000, 'a refused attempt');
    const pending = await cliJson<Array<{ last: string }>>(t, ['alerts']);
    expect(pending[0].last).toBe('ECONNREFUSED');
    await cli(t, ['stop']);
    await killDaemon(t.dir);
    const rx = await receiver(() => 200, port);
    closers.push(rx.close);
    await startDaemon(t);
    await waitUntil(() => rx.got.length >= 1, 20_000, 'the pending alert, after the restart');
    await new Promise((r) => setTimeout(r, 2000));
    expect(rx.got).toHaveLength(1);
    expect(rx.got[0].body.kind).toBe('run crashed');
  }, 90_000);

  it('a receiver that never answers: the daemon answers on, the POST is cut at its deadline, the alert given up and listed', async () => {
    const rx = await receiver(() => 'hang');
    closers.push(rx.close);
    const file = path.join(makeEnv().dir, 'alerts.json');
    fs.writeFileSync(file, JSON.stringify({ sinks: [{ name: 'team', url: rx.url, format: 'slack', timeout_ms: 500 }] }));
    t = makeEnv({ LOGD_ALERTS: file, LOGD_ALERT_GIVEUP_MS: '2500' });
    await startDaemon(t);
    const p = crashingRun(t);
    await p.closed;
    await waitUntil(() => rx.got.length >= 1, 20_000, 'the first POST');
    expect(rx.got[0].body).toEqual({ text: expect.stringMatching(/^\*logd: run crasher crashed\*\n/) });
    const t0 = Date.now();
    await cli(t, ['status']);
    expect(Date.now() - t0).toBeLessThan(5000);
    await waitUntil(async () => (await cliJson<Array<{ state: string }>>(t!, ['alerts']))[0]?.state === 'failed', 30_000, 'the alert to be given up');
    const listed = await cliJson<Array<{ state: string; last: string; attempts: number }>>(t, ['alerts']);
    expect(listed[0].last).toBe('no answer within 500 ms');
    expect(listed[0].attempts).toBeGreaterThanOrEqual(2);
  }, 60_000);

  it('a malformed alerts file: the daemon starts with alerts off and names the line; a webhook URL is never shown whole', async () => {
    const dir = makeEnv().dir;
    const file = path.join(dir, 'alerts.json');
    fs.writeFileSync(file, '{\n  "sinks": [\n    { "name": "x", "url": "http://127.0.0.1:9/a" },,\n  ]\n}\n');
    // The file named by `logd serve --alerts FILE` (as LOGD_ALERTS would): a relative path, from where serve runs.
    t = makeEnv();
    const d = await startDaemon(t, ['--alerts', path.relative(process.cwd(), file)]);
    const status = (await cli(t, ['status'])).stdout;
    expect(status).toMatch(new RegExp(`alerts: +OFF: ${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: not valid JSON at line 3, column \\d+`));
    expect(d.stderr()).toMatch(/alerts: off: .*not valid JSON at line 3/);
    await killDaemon(t.dir);
    await t.cleanup();

    const closed = await freePort();
    t = makeEnv({ LOGD_ALERT_WEBHOOK: `http://127.0.0.1:${closed}/services/T000/B000/XXXXSECRETXXXX` });
    const d2 = await startDaemon(t);
    const s2 = (await cli(t, ['status'])).stdout;
    expect(s2).toContain(`alerts:    on: webhook (http://127.0.0.1:${closed}/…, json)`);
    expect(s2 + d2.stderr() + JSON.stringify(await cliJson(t, ['status']))).not.toContain('XXXXSECRETXXXX');
    const tried = await cli(t, ['alerts', 'test'], { reject: false });
    expect(tried.exitCode).toBe(1);
    expect(tried.stdout).toBe(`webhook (http://127.0.0.1:${closed}/…, json): NOT delivered: ECONNREFUSED`);
  }, 60_000);

  it('30 runs crashing at once: a few posts that count them, not 30', async () => {
    const rx = await receiver();
    closers.push(rx.close);
    t = makeEnv({ LOGD_ALERT_WEBHOOK: rx.url });
    await startDaemon(t);
    const file = script(t, 'many.mjs', `
      const runs = await Promise.all(Array.from({ length: 30 }, (_, i) => logd.init({ project: 'alerts', name: 'many' + i })));
      for (const r of runs) r.log({ x: 1 });
      await Promise.all(runs.map((r) => r.flush()));
      process.exit(3);
    `);
    await spawnScript(t, file).closed;
    const covered = () => rx.got.reduce((n, g) => n + (g.body.kind === 'summary' ? g.body.count : 1), 0);
    await waitUntil(() => covered() >= 30, 30_000, 'all 30 crashes told');
    await new Promise((r) => setTimeout(r, 2000));
    expect(covered()).toBe(30);
    // On failure: what came, and when each alert was made (the gather waits for a quiet spell; see outbox.ts).
    const made = (await cliJson<Array<{ createdAt: number; title: string }>>(t, ['alerts'])).map((a) => a.createdAt).sort();
    expect(rx.got.length, `posts: ${JSON.stringify(rx.got.map((g) => ({ kind: g.body.kind, count: g.body.count })))}; alerts made at +s: ${made.map((x) => (x - made[0]).toFixed(2)).join(' ')}`).toBeLessThanOrEqual(3);
    const summary = rx.got.find((g) => g.body.kind === 'summary')!.body;
    expect(summary.title).toMatch(/^\d+ alerts at once \(\d+ × run crashed\)$/);
  }, 60_000);

  it('run.alert() from Python and TypeScript: one alert each with its text and level; the 11th in a minute is dropped, saying so', async () => {
    const rx = await receiver();
    closers.push(rx.close);
    t = makeEnv({ LOGD_ALERT_WEBHOOK: rx.url });
    await startDaemon(t);
    if (pythonMissing === null) {
      const py = await runPython(t, ['-c', `
import logd
run = logd.init(project="alerts", name="py", group="gp")
print("queued", run.alert("val/acc dropped", "from 0.91 to 0.42 at step 1200", level="warn"))
run.finish()
`]);
      expect(py.stdout.trim(), py.all).toBe('queued True');
    }
    const file = script(t, 'ts-alert.mjs', `
      const run = await logd.init({ project: 'alerts', name: 'ts' });
      const got = [];
      for (let i = 0; i < 11; i++) got.push(await run.alert('note ' + i, { text: 'i=' + i }));
      console.log(JSON.stringify(got));
      await run.finish();
    `);
    const p = spawnScript(t, file);
    const [code] = await p.closed;
    expect(code).toBe(0);
    expect(JSON.parse(p.lines[0])).toEqual([...Array(10).fill(true), false]);
    const want = (pythonMissing === null ? 1 : 0) + 10;
    await waitUntil(() => rx.got.reduce((n, g) => n + (g.body.kind === 'summary' ? g.body.count : 1), 0) >= want, 20_000, 'the alerts');
    const all = rx.got.flatMap((g) => (g.body.kind === 'summary' ? g.body.alerts : [g.body]));
    if (pythonMissing === null) {
      const py = all.find((a: any) => a.title === 'WARN: val/acc dropped');
      expect(py).toBeTruthy();
      if (py.text) expect(py.text).toBe('from 0.91 to 0.42 at step 1200\n(run py, project alerts, group gp)');
    }
    expect(all.filter((a: any) => String(a.title).startsWith('note ')).map((a: any) => a.title).sort()).toEqual(Array.from({ length: 10 }, (_, i) => `note ${i}`).sort());
  }, 60_000);

  it('metric rules: a loss that turns NaN and a rule (acc < 0.5 after step 10) fire once each; a rule on a metric that never appears never fires', async () => {
    const rx = await receiver();
    closers.push(rx.close);
    const file = path.join(makeEnv().dir, 'alerts.json');
    fs.writeFileSync(file, JSON.stringify({ sinks: [{ name: 'hook', url: rx.url }], rules: [
      { metric: 'loss', when: 'non-finite' }, { metric: 'acc', when: '< 0.5', after_step: 10 }, { metric: 'never_logged', when: '> 0' }] }));
    t = makeEnv({ LOGD_ALERTS: file });
    await startDaemon(t);
    const trainer = script(t, 'nan.mjs', `
      const run = await logd.init({ project: 'alerts', name: 'diverge' });
      for (let step = 0; step < 30; step++) {
        run.log({ loss: step < 20 ? 1 / (step + 1) : NaN, acc: step < 5 ? 0.1 : step < 25 ? 0.9 : 0.3 }, { step });
        await new Promise((r) => setTimeout(r, 100));
      }
      await run.flush();
      await new Promise((r) => setTimeout(r, 5000));
      await run.finish();
    `);
    const p = spawnScript(t, trainer);
    closers.push(async () => void p.kill('SIGKILL'));
    await waitUntil(() => rx.got.filter((g) => g.body.kind === 'metric').length >= 2, 30_000, 'two rule alerts');
    await p.closed;
    await new Promise((r) => setTimeout(r, 2500));
    const rules = rx.got.filter((g) => g.body.kind === 'metric').map((g) => g.body);
    expect(rules.map((b) => b.title).sort()).toEqual(['acc < 0.5 in run diverge', 'loss is non-finite in run diverge']);
    expect(rules.find((b) => b.event.metric === 'loss').text).toMatch(/^loss = NaN at step \d+ \(rule: loss non-finite\)$/);
    expect(rules.find((b) => b.event.metric === 'acc').event).toMatchObject({ value: '0.3', rule: { when: '< 0.5', afterStep: 10 } });
  }, 60_000);

  it('`logd alerts test` sends a sample to the sink and says what the receiver answered', async () => {
    const rx = await receiver();
    closers.push(rx.close);
    t = makeEnv({ LOGD_ALERT_WEBHOOK: rx.url });
    const r = await cli(t, ['alerts', 'test']);
    expect(r.stdout).toMatch(/^webhook \(http:\/\/127\.0\.0\.1:\d+\/…, json\): delivered: HTTP 200: ok$/);
    expect(rx.got[0].body).toMatchObject({ source: 'logd', kind: 'job failed', title: 'a test alert from logd alerts test' });
  });
});

describe('a command sink, and "no new row for …"', () => {
  it('a run that goes quiet for 10 s: one alert to the command (JSON on stdin, LOGD_ALERT_* set); a failing command is retried and listed with its exit; a hanging one is killed at its deadline', async () => {
    const dir = makeEnv().dir;
    const out = path.join(dir, 'got');
    fs.mkdirSync(out);
    const file = path.join(dir, 'alerts.json');
    fs.writeFileSync(file, JSON.stringify({
      sinks: [
        { name: 'pager', command: `cat > ${out}/$LOGD_ALERT_KIND-$$.json && printf '%s|%s|%s|%s\\n' "$LOGD_ALERT_TITLE" "$LOGD_ALERT_RUN" "$LOGD_ALERT_SINK" "\${LOGD_STORE_URL:-unset}" >> ${out}/titles`, events: ['metric'] },
        { name: 'broken', command: 'echo "no route to pager" >&2; exit 7', events: ['metric'] },
        { name: 'stuck', command: 'sleep 30', events: ['metric'], timeout_ms: 500 },
      ],
      rules: [{ when: 'no new row for 10 s' }],
    }));
    // A store URL with its password in the daemon's environment: the command does not get it.
    t = makeEnv({ LOGD_ALERTS: file });
    await startDaemon({ ...t, env: { ...t.env, LOGD_STORE_URL: 'postgresql://logd:S3CRETPW@127.0.0.1:1/logd' } });
    const trainer = script(t, 'quiet.mjs', `
      const run = await logd.init({ project: 'alerts', name: 'quiet' });
      for (let step = 0; step < 3; step++) run.log({ loss: 1 / (step + 1) }, { step });
      await run.flush();
      console.log('run ' + run.id);
      await new Promise((r) => setTimeout(r, 16000)); // open, and silent
      await run.finish();
    `);
    const p = spawnScript(t, trainer);
    closers.push(async () => void p.kill('SIGKILL'));
    const titles = path.join(out, 'titles');
    await waitUntil(() => fs.existsSync(titles), 30_000, 'the command sink to run');
    await p.closed;
    const runId = p.lines.find((l) => l.startsWith('run '))!.slice(4);
    await new Promise((r) => setTimeout(r, 2500));
    const lines = fs.readFileSync(titles, 'utf8').trim().split('\n');
    expect(lines).toHaveLength(1); // once, though the run stayed quiet over several checks
    expect(lines[0]).toMatch(new RegExp(`^no new row for 1\\d s in run quiet\\|${runId}\\|pager\\|unset$`));
    const bodies = fs.readdirSync(out).filter((f) => f.endsWith('.json'));
    expect(bodies).toHaveLength(1);
    const body = JSON.parse(fs.readFileSync(path.join(out, bodies[0]), 'utf8'));
    expect(body).toMatchObject({ source: 'logd', kind: 'metric', runId, project: 'alerts' });
    expect(body.text).toMatch(/^its last row was step 2, 1\d s ago; the run is still open \(rule: no new row for 10 s\)$/);
    const listed = await cliJson<Array<{ sink: string; state: string; attempts: number; last: string }>>(t, ['alerts']);
    const of = (s: string) => listed.find((l) => l.sink === s)!;
    expect(of('pager')).toMatchObject({ state: 'sent', attempts: 1, last: 'exit 0' });
    expect(of('broken').state).toBe('pending');
    expect(of('broken').attempts).toBeGreaterThanOrEqual(2); // retried with backoff (1 s, then 2 s)
    expect(of('broken').last).toBe('exit 7: no route to pager');
    expect(of('stuck').last).toBe('no answer within 500 ms (the command was killed)');
    const st = await cli(t, ['status']);
    expect(st.stdout + st.stderr).not.toContain('no route'); // the command itself is never shown
    expect(st.stdout + st.stderr).not.toContain('sleep 30');
    // The run's page lists them: what each sink did with it (the dashboard reads the node's outbox).
    const dash = await dashboardFor(t);
    closers.push(dash.close);
    const api = await getJson(dash.ui, `/api/alerts?run=${runId}`);
    expect(api.body).toMatchObject({ configured: true, total: 3 });
    expect(JSON.stringify(api.body)).not.toContain('sleep 30');
    const page = await dash.open(`/runs/${runId}?tab=info`);
    await page.waitForSelector('#alerts table.alerts-table tbody tr');
    const rows = await page.$$eval('#alerts tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].slice(1).map((td) => (td.textContent ?? '').trim())));
    expect(rows.map((r) => r[2]).sort()).toEqual(['broken', 'pager', 'stuck']);
    const bySink = Object.fromEntries(rows.map((r) => [r[2], r]));
    expect(bySink.pager[1]).toMatch(/^no new row for 1\d s in run quiet/);
    expect(bySink.pager[3]).toBe('sent');
    expect(bySink.broken[3]).toMatch(/^sending after \d+ tries: exit 7: no route to pager$/);
    expect(await (await dash.open('/groups/nogroup')).$('#alerts:not([hidden]) tbody tr')).toBeNull(); // another group: none
  }, 120_000);

  it('the file: a sink with a url and a command, "no new row" under 10 s or with a metric, are refused with where', async () => {
    const { parseAlertsDoc } = await import('../../daemon/alerts/config.js');
    const doc = (d: unknown) => () => parseAlertsDoc(JSON.stringify(d), 'a.json', {});
    expect(doc({ sinks: [{ name: 'x', url: 'http://h/', command: 'true' }] })).toThrow(/a\.json: sinks\[0\] \(x\): a sink has a url \(or url_env\) or a command, not both/);
    expect(doc({ sinks: [{ command: '  ' }] })).toThrow(/command must be a non-empty shell command/);
    expect(doc({ sinks: [], rules: [{ when: 'no new row for 5 s' }] })).toThrow(/rules\[0\]: "no new row for …" needs 10 s or more/);
    expect(doc({ sinks: [], rules: [{ metric: 'loss', when: 'no new row for 10 min' }] })).toThrow(/leave metric out/);
    expect(parseAlertsDoc(JSON.stringify({ sinks: [], rules: [{ when: 'no new row for 10 min' }, { when: 'no new rows for 1.5h' }] }), 'a.json', {}).rules!.map((r) => r.value)).toEqual([600, 5400]);
  });
});
