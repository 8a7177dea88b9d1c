// Issue 32 item 2: `logd ui` must not buffer without bound for live-feed
// clients that never read (a background tab holding the token). Before: 50
// such clients on a run logging thousands of rows a second made `logd ui`
// grow about 45 MB/s, to 3.2 GB. Real processes: a daemon, `logd ui`, a
// trainer logging fast, 50 raw sockets that ask for the feed and never read,
// and one page-like client that reads.
import fs from 'node:fs';
import { spawn, type ChildProcess } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { makeEnv, script, spawnScript, startDaemon, waitUntil, type TestEnv } from '../helpers.js';
import { startUi, type UiProcess } from './helpers.js';

let t: TestEnv;
let ui: UiProcess | null = null;
const procs: ChildProcess[] = [];
afterEach(async () => {
  for (const p of procs.splice(0)) p.kill('SIGKILL');
  await ui?.stop();
  ui = null;
  if (t) await t.cleanup();
});

const mb = (pid: number, field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

/**
 * Clients that ask for the live feed and never read a byte of the answer, with a small receive buffer (as a
 * stalled tab's is soon full): Python, as Node cannot set SO_RCVBUF on a TCP socket. It prints `connected N`.
 */
function stalledClients(ui: UiProcess, path: string, n: number): ChildProcess {
  const u = new URL(ui.base);
  const code = `
import socket, sys, time
socks = []
for i in range(int(sys.argv[4])):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect((sys.argv[1], int(sys.argv[2])))
    s.sendall(("GET %s HTTP/1.1\\r\\nHost: x\\r\\nAuthorization: Bearer %s\\r\\nAccept: text/event-stream\\r\\n\\r\\n" % (sys.argv[3], sys.argv[5])).encode())
    socks.append(s)
print("connected %d" % len(socks), flush=True)
sys.stdin.readline()  # the test says when: then each client reads what the server holds for it
got = []
for s in socks:
    s.settimeout(1.0)
    n = 0
    try:
        while True:
            b = s.recv(1 << 20)
            if not b:
                break
            n += len(b)
    except socket.timeout:
        pass
    got.append(n)
print("bytes " + " ".join(map(str, got)), flush=True)
`;
  const p = spawn('/usr/bin/python3', ['-c', code, u.hostname, u.port, path, String(n), ui.token], { stdio: ['pipe', 'pipe', 'inherit'] });
  procs.push(p);
  return p;
}

describe('issue 32 item 2: live-feed clients that do not read', () => {
  it('50 stalled clients on a fast live run keep `logd ui` bounded, and a reading client still gets rows', async () => {
    t = makeEnv({ LOGD_IDLE_TIMEOUT_MS: '600000', LOGD_SAMPLE_INTERVAL_MS: '0' });
    await startDaemon(t);
    const trainer = spawnScript(t, script(t, 'fast.mjs', `
      const run = await logd.init({ project: 'live', name: 'fast' });
      console.log('run ' + run.id);
      const until = Date.now() + Number(process.argv[2]);
      let step = 0;
      while (Date.now() < until) {
        for (let i = 0; i < 150; i++, step++) {
          const row = {};
          for (let k = 0; k < 50; k++) row['m' + k] = step * 0.001 + k;
          run.log(row, { step });
        }
        await new Promise((r) => setTimeout(r, 50));
      }
      await run.finish();
      console.log('steps ' + step);
    `), ['15000']);
    await waitUntil(() => trainer.lines.some((l) => l.startsWith('run ')), 30_000, 'the trainer to start its run');
    const id = trainer.lines.find((l) => l.startsWith('run '))!.slice(4);
    ui = await startUi(t);
    const uiPid = ui.proc.pid!;
    const before = mb(uiPid, 'VmRSS');
    fs.writeFileSync(`/proc/${uiPid}/clear_refs`, '5'); // VmHWM from here on

    const stalled = stalledClients(ui, `/api/live?runs=${id}:0`, 50);
    let said = '';
    stalled.stdout!.on('data', (d: Buffer) => (said += d.toString()));
    await waitUntil(() => said.includes('connected 50'), 20_000, `50 stalled clients to connect: ${said}`);
    // The page-like client: reads, and counts the rows events.
    let rowsEvents = 0;
    const ctl = new AbortController();
    const reading = fetch(`${ui.base}/api/live?runs=${id}:0`, { headers: { authorization: `Bearer ${ui.token}` }, signal: ctl.signal }).then(async (res) => {
      const dec = new TextDecoder();
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) rowsEvents += (dec.decode(chunk).match(/event: rows/g) ?? []).length;
    }).catch(() => {});

    let peakSeen = 0;
    const sampler = setInterval(() => (peakSeen = Math.max(peakSeen, mb(uiPid, 'VmRSS'))), 250);
    const [code] = await trainer.closed;
    clearInterval(sampler);
    expect(code).toBe(0);
    const peak = Math.max(peakSeen, mb(uiPid, 'VmHWM'));
    ctl.abort();
    await reading;
    const steps = Number(trainer.lines.find((l) => l.startsWith('steps '))!.slice(6));
    // What the stalled clients find once they read: what `logd ui` (and the kernel's socket buffers) held for each.
    stalled.stdin!.write('read\n');
    await waitUntil(() => /bytes [\d ]+\n/.test(said), 120_000, `the stalled clients to read: ${said}`);
    const held = /bytes ([\d ]+)\n/.exec(said)![1].trim().split(' ').map((x) => Number(x) / 2 ** 20);
    const sentAll = held.reduce((a, b) => Math.max(a, b), 0);
    console.log(`stalled live clients: ${steps} rows x 50 metrics in 15 s; logd ui RSS ${before.toFixed(0)} MB before, peak ${peak.toFixed(0)} MB ` +
      `with 50 stalled clients; at most ${sentAll.toFixed(1)} MB held for one stalled client; ${rowsEvents} rows events to the reading client`);
    expect(rowsEvents).toBeGreaterThan(3);
    expect(held).toHaveLength(50);
    // Per stalled client: the socket's kernel buffers (up to 4 MiB to send on Linux), 1 MiB of slack and one event
    // at most; before, everything the run logged (about 25 MB here), for each of them.
    expect(sentAll).toBeLessThan(10);
    expect(peak - before).toBeLessThan(600);
  }, 120_000);
});
