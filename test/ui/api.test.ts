// `logd ui`'s HTTP side as a real process on a real daemon: token, 401/404,
// downsampling that keeps spikes, group aggregates, the live feed, binding.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { makeEnv, script, spawnScript, waitUntil, killDaemon, daemonPids, CLI, type TestEnv } from '../helpers.js';
import { startUi, getJson, logRuns, type UiProcess } from './helpers.js';

let t: TestEnv;
let ui: UiProcess;
let spiky: string;
let ranks: string[];
let nasty: string;

beforeAll(async () => {
  t = makeEnv();
  // 10 000 steps of a flat line with one spike at step 5003: downsampled, the spike must survive.
  [spiky] = await logRuns(t, [{ name: 'spiky', steps: 10_000, row: '{ loss: step === 5003 ? 1000 : 1, "a,b": step }' }]);
  ranks = await logRuns(t, [0, 1, 2].map((rank) => ({ name: `r${rank}`, group: 'exp/1', rank, steps: 50, row: '{ x: step + rank }' })));
  [nasty] = await logRuns(t, [{ name: '</script><script>alert(1)</script>', steps: 1, row: '{ y: 1 }' }]);
  ui = await startUi(t);
});
afterAll(async () => {
  await ui?.stop();
  await t?.cleanup();
});

describe('logd ui: access', () => {
  it('answers 401 without the token or with a wrong one, and says how to get the URL', async () => {
    const none = await getJson(ui, '/api/runs', false);
    expect(none.status).toBe(401);
    expect(none.body.error).toMatch(/logd ui/);
    const wrong = await fetch(`${ui.base}/api/runs`, { headers: { authorization: 'Bearer nope' } });
    expect(wrong.status).toBe(401);
    const page = await fetch(`${ui.base}/runs/${spiky}`);
    expect(page.status).toBe(401);
    expect(await page.text()).toMatch(/Run <code>logd ui<\/code>.*\?token=/s);
  });

  it('takes the token as Bearer, as ?token=, and as the cookie it sets on a page visit', async () => {
    expect((await getJson(ui, '/api/runs')).status).toBe(200);
    expect((await fetch(`${ui.base}/api/runs?token=${ui.token}`)).status).toBe(200);
    const visit = await fetch(`${ui.base}/runs/${spiky}?token=${ui.token}&tab=system`, { redirect: 'manual' });
    expect(visit.status).toBe(303);
    expect(visit.headers.get('location')).toBe(`/runs/${spiky}?tab=system`);
    expect(visit.headers.get('set-cookie')).toMatch(/^logd_ui_\d+=[^;]+;.*HttpOnly.*SameSite=Strict/);
    const cookie = visit.headers.get('set-cookie')!.split(';')[0];
    const again = await fetch(`${ui.base}/runs/${spiky}`, { headers: { cookie } });
    expect(again.status).toBe(200);
    expect(await again.text()).toContain('/assets/app.js');
  });

  it('answers 404 with a clear message for an unknown run or group, as JSON and as a page', async () => {
    const run = await getJson(ui, '/api/runs/nosuchrun');
    expect(run.status).toBe(404);
    expect(run.body.error).toMatch(/run "nosuchrun" does not exist/);
    const page = await fetch(`${ui.base}/runs/nosuchrun`, { headers: { authorization: `Bearer ${ui.token}` } });
    expect(page.status).toBe(404);
    expect(await page.text()).toMatch(/Run not found/);
    const group = await getJson(ui, '/api/groups/nosuchgroup');
    expect(group.status).toBe(404);
    expect(group.body.error).toMatch(/group "nosuchgroup" has no runs/);
    expect((await fetch(`${ui.base}/groups/nosuchgroup`, { headers: { authorization: `Bearer ${ui.token}` } })).status).toBe(404);
  });

  it('binds 127.0.0.1; another host needs --allow-remote and then warns', async () => {
    expect(new URL(ui.url).hostname).toBe('127.0.0.1');
    const refused = await new Promise<{ code: number | null; err: string }>((resolve) => {
      const p = spawn(process.execPath, [CLI, 'ui', '--host', '0.0.0.0', '--port', '0'], { env: t.env });
      let err = '';
      p.stderr.on('data', (d: Buffer) => (err += d.toString()));
      p.on('exit', (code) => resolve({ code, err }));
    });
    expect(refused.code).toBe(2);
    expect(refused.err).toMatch(/--allow-remote/);
    const remote = await startUi(t, ['--host', '0.0.0.0', '--port', '0', '--allow-remote']);
    try {
      expect(remote.stderr()).toMatch(/WARNING: the dashboard listens on 0\.0\.0\.0/);
      expect((await getJson(remote, '/api/runs')).status).toBe(200);
    } finally {
      await remote.stop();
    }
  });
});

describe('logd ui: bad input', () => {
  it('answers a bad parameter, a bad path or a method it does not serve with a clear error, and keeps serving', async () => {
    const points = await getJson(ui, `/api/runs/${spiky}/history?keys=loss&points=many`);
    expect(points.status).toBe(400);
    expect(points.body.error).toBe('points must be a non-negative integer, not "many"');
    const enc = await getJson(ui, '/api/runs/%ZZ');
    expect(enc.status).toBe(400);
    expect(enc.body.error).toMatch(/not valid percent-encoding/);
    const path = await getJson(ui, '/api/nothing/here');
    expect(path.status).toBe(404);
    expect(path.body.error).toMatch(/no such API path/);
    const post = await fetch(`${ui.base}/api/runs`, { method: 'POST', headers: { authorization: `Bearer ${ui.token}` } });
    expect(post.status).toBe(405);
    const weird = await getJson(ui, `/api/runs/${encodeURIComponent('../../etc/passwd')}`);
    expect(weird.status).toBe(404);
    const asset = await fetch(`${ui.base}/assets/..%2f..%2fpackage.json`);
    expect(asset.status).toBe(404);
    expect((await getJson(ui, '/api/runs')).status).toBe(200);
  });

  it('--store passes the URL to the query layer: an unreachable store is an error that says so, never a hang', async () => {
    // Either the shared source refuses at start, or it serves and the API says what failed.
    const p = spawn(process.execPath, [CLI, 'ui', '--port', '0', '--store', 'postgres://nobody@127.0.0.1:1/logd'], { env: t.env });
    let out = '', err = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString()));
    p.stderr.on('data', (d: Buffer) => (err += d.toString()));
    try {
      await waitUntil(() => p.exitCode !== null || /open http/.test(out), 30_000, 'logd ui --store to refuse or serve');
      if (p.exitCode !== null) {
        expect(p.exitCode).toBe(1);
        expect(err).toMatch(/^logd: .*(store|postgres)/im);
      } else {
        const url = new URL(/open (http\S+)/.exec(out)![1]);
        const res = await fetch(`${url.origin}/api/runs?token=${url.searchParams.get('token')}`);
        expect(res.status).toBe(500);
        expect((await res.json()).error).toMatch(/./);
      }
    } finally {
      p.kill('SIGKILL');
    }
  });
});

describe('logd ui: data', () => {
  it('lists runs with filters and paging', async () => {
    const all = await getJson(ui, '/api/runs?limit=2');
    expect(all.body.total).toBe(5);
    expect(all.body.runs).toHaveLength(2);
    const page2 = await getJson(ui, '/api/runs?limit=2&offset=2');
    expect(page2.body.runs.map((r: { id: string }) => r.id)).not.toContain(all.body.runs[0].id);
    const grouped = await getJson(ui, `/api/runs?group=${encodeURIComponent('exp/1')}`);
    expect(grouped.body.runs.map((r: { rank: number }) => r.rank).sort()).toEqual([0, 1, 2]);
    expect((await getJson(ui, '/api/runs?text=spik')).body.runs.map((r: { id: string }) => r.id)).toEqual([spiky]);
    expect((await getJson(ui, '/api/runs?limit=x')).status).toBe(400);
  });

  it("carries the runs list's first page inside the page, as data that no run name can break out of", async () => {
    const page = await getJson(ui, '/?project=ui');
    expect(page.status).toBe(200);
    const m = /<script type="application\/json" class="logd-answer" data-url="([^"]*)">([^<]*)<\/script>/.exec(page.body as string);
    expect(m, 'the embedded answer').not.toBeNull();
    expect(m![1].replace(/&amp;/g, '&')).toBe('/api/runs?project=ui&limit=100');
    const embedded = JSON.parse(m![2]);
    expect(embedded).toEqual((await getJson(ui, '/api/runs?project=ui&limit=100')).body);
    expect(embedded.runs.map((r: { name: string }) => r.name)).toContain('</script><script>alert(1)</script>');
    expect(embedded.runs.map((r: { id: string }) => r.id)).toContain(nasty);
    expect(page.body).not.toContain('<script>alert(1)');
  });

  it('downsamples to about N points per series and keeps the spike in its bucket max', async () => {
    const r = await getJson(ui, `/api/runs/${spiky}/history?keys=loss&keys=${encodeURIComponent('a,b')}&points=100`);
    expect(r.status).toBe(200);
    const loss = r.body.series.loss;
    expect(loss.points).toBe(10_000);
    expect(loss.step).toHaveLength(100);
    expect(Math.max(...loss.max)).toBe(1000);
    expect(loss.max.filter((v: number) => v === 1000)).toHaveLength(1);
    expect(Math.min(...loss.min)).toBe(1);
    expect(r.body.series['a,b'].step).toHaveLength(100);
    const full = await getJson(ui, `/api/runs/${spiky}/history?keys=loss&points=20000`);
    expect(full.body.series.loss.value).toHaveLength(10_000);
    expect(full.body.series.loss.value[5003]).toBe(1000);
    expect(full.body.series.loss.min).toBeUndefined();
  });

  it('pages and searches metric names', async () => {
    const k = await getJson(ui, `/api/runs/${spiky}/keys?q=A,`);
    expect(k.body).toMatchObject({ keys: ['a,b'], total: 1, allKeys: 2 });
  });

  it('gives a group its runs by rank and per-step mean, min and max across them', async () => {
    const g = await getJson(ui, `/api/groups/${encodeURIComponent('exp/1')}?keys=x`);
    expect(g.status).toBe(200);
    expect(g.body.runs.map((r: { id: string }) => r.id)).toEqual(ranks);
    const a = g.body.series.x.aggregate;
    expect(a.step).toHaveLength(50);
    expect(a.value[10]).toBe(11);
    expect(a.min[10]).toBe(10);
    expect(a.max[10]).toBe(12);
    expect(Object.keys(g.body.series.x.runs)).toEqual(ranks);
    // A chart's call (runs=0): the same series, without the runs and names the page already has.
    const c = await getJson(ui, `/api/groups/${encodeURIComponent('exp/1')}?keys=x&runs=0`);
    expect(c.body.runs).toBeUndefined();
    expect(c.body.keys).toBeUndefined();
    expect(c.body.series).toEqual(g.body.series);
  });

  it('a metric named __proto__ or constructor is a metric like any other, on a run page and a group page', async () => {
    const [id] = await logRuns(t, [{ name: 'protos', group: 'protos', rank: 0, steps: 5, row: "{ ['__proto__']: step, constructor: step * 2 }" }]);
    const h = await getJson(ui, `/api/runs/${id}/history?keys=__proto__&keys=constructor`);
    expect(Object.keys(h.body.series).sort()).toEqual(['__proto__', 'constructor']);
    expect(h.body.series.constructor.value).toEqual([0, 2, 4, 6, 8]);
    const g = await getJson(ui, '/api/groups/protos?keys=__proto__');
    expect(g.body.keys).toEqual(['__proto__', 'constructor']);
    expect(Object.keys(g.body.series)).toEqual(['__proto__']);
    expect(g.body.series.__proto__.aggregate.value).toEqual([0, 1, 2, 3, 4]);
  });

  it('streams new rows of a running run and its state change on the live feed', async () => {
    const worker = script(t, 'live.mjs', `
      const run = await logd.init({ project: 'ui', name: 'live' });
      console.log('run ' + run.id);
      for (let step = 0; step < 20; step++) {
        run.log({ v: step }, { step });
        await run.flush();
        console.log('acked ' + step);
        await new Promise((r) => setTimeout(r, 100));
      }
      await new Promise((r) => process.stdin.once('data', r));
    `);
    const w = spawnScript(t, worker);
    await waitUntil(() => w.lines.some((l) => l.startsWith('run ')), 20_000, 'the live run to start');
    const id = w.lines.find((l) => l.startsWith('run '))!.slice(4);
    const ctl = new AbortController();
    const res = await fetch(`${ui.base}/api/live?runs=${id}:0`, { headers: { authorization: `Bearer ${ui.token}` }, signal: ctl.signal });
    expect(res.headers.get('content-type')).toMatch(/text\/event-stream/);
    const seen = new Map<number, number>();
    const states: string[] = [];
    let buf = '';
    const reader = (async () => {
      const dec = new TextDecoder();
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buf += dec.decode(chunk);
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const ev = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const type = /^event: (.*)$/m.exec(ev)?.[1];
          const data = /^data: (.*)$/m.exec(ev)?.[1];
          if (type === 'rows') for (const row of JSON.parse(data!).rows) seen.set(row.v.v, Date.now());
          if (type === 'state') states.push(JSON.parse(data!).state);
        }
      }
    })().catch(() => {});
    try {
      await waitUntil(() => w.lines.includes('acked 19'), 30_000, 'the worker to log 20 rows');
      const ackedAt = Date.now();
      await waitUntil(() => seen.has(19), 5000, 'row 19 on the live feed');
      expect(Date.now() - ackedAt).toBeLessThan(2000);
      expect([...seen.keys()].sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i));
      w.kill('SIGKILL');
      await waitUntil(() => states.includes('crashed'), 15_000, 'the crashed state on the live feed');
    } finally {
      ctl.abort();
      await reader;
      w.kill('SIGKILL');
    }
  });
});

describe('logd ui: the daemon goes away', () => {
  it('keeps answering after the daemon is killed with kill -9: the next call reaches a new daemon, no run is lost', async () => {
    const before = (await getJson(ui, '/api/runs')).body.total;
    const [old] = daemonPids(t.dir);
    expect(old).toBeGreaterThan(0);
    await killDaemon(t.dir, 'SIGKILL');
    let after: { status: number; body: any } = { status: 0, body: null };
    await waitUntil(async () => {
      after = await getJson(ui, '/api/runs');
      return after.status === 200;
    }, 30_000, 'the dashboard to answer from a new daemon').catch((e) => {
      throw new Error(`${e.message}; last answer ${after.status} ${JSON.stringify(after.body).slice(0, 300)}; ui stderr: ${ui.stderr().slice(-1500)}`);
    });
    expect(after.body.total).toBe(before);
    expect(daemonPids(t.dir)).not.toContain(old);
    expect((await getJson(ui, `/api/runs/${spiky}/history?keys=loss&points=100`)).body.series.loss.points).toBe(10_000);
    expect(ui.stderr()).toMatch(/the daemon went away .*; reconnecting/);
  });
});
