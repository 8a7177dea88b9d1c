// The readers of a big job in the shared store (issue 37): after bench/cluster's
// simulation wrote a group of N nodes x R ranks, how long each reader takes to
// answer for the whole group, first (cold) and the median of 5 more:
//   - the dashboard's group page (`logd ui --store-url-file`): as the page loads
//     (GET /api/groups/<group>, then a chart per metric with its mean and band),
//     and every rank's line of the asked metrics in one answer;
//   - `logd health <group> --store-url-file … --json` (a fresh CLI process each time);
//   - Python's `logd.Api(store=…).group(g).history(keys=…)`, the group's
//     history of the asked metrics as one DataFrame (one process; the first
//     call starts its reader process).
// Called by run.ts with --readers; prints rows of the result table.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';

const run = promisify(execFile);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
// LOGD_BENCH_CLI: another tree's dist/daemon/cli.js, to compare readers against the same store in one sitting.
const cli = process.env.LOGD_BENCH_CLI ?? path.join(root, 'dist', 'daemon', 'cli.js');

export interface ReaderFigure { what: string; firstMs: number; medianMs: number; note: string }

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function timed<T>(fn: () => Promise<T>): Promise<[number, T]> {
  const t0 = performance.now();
  const v = await fn();
  return [performance.now() - t0, v];
}

export async function measureReaders(o: { url: string; group: string; keys: string[]; rounds?: number; python?: string; log?: (l: string) => void }): Promise<ReaderFigure[]> {
  const say = o.log ?? (() => {});
  const rounds = o.rounds ?? 5;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'logd-readers-'));
  const urlFile = path.join(dir, 'store-url');
  fs.writeFileSync(urlFile, `${o.url}\n`, { mode: 0o600 });
  const env = { ...process.env, LOGD_DIR: path.join(dir, 'data'), XDG_RUNTIME_DIR: path.join(dir, 'rt'), LOGD_RUNTIME_DIR: path.join(dir, 'rt') };
  fs.mkdirSync(env.XDG_RUNTIME_DIR, { mode: 0o700 });
  const out: ReaderFigure[] = [];
  try {
    // The dashboard's group page, each way on a `logd ui` of its own (a cold cache first):
    //   - as the page loads with more than 64 ranks: the group (its runs and metric names), then one chart per
    //     metric asking the group's mean and band (`aggregate=1`), the charts together;
    //   - every rank's line of the metrics in one answer (the page in "ranks" mode, or a script).
    const q = (keys: string[], more = '') => `${keys.map((k) => `keys=${encodeURIComponent(k)}`).join('&')}${more}`;
    const g = `/api/groups/${encodeURIComponent(o.group)}?`;
    const ways: Array<{ what: string; asks: string[][] }> = [
      { what: `dashboard group page as it loads (the names, then ${o.keys.length} charts' mean and band)`, asks: [[g], o.keys.map((k) => g + q([k], '&aggregate=1&runs=0'))] },
      // One `keys` parameter per metric (a metric's name may hold a comma): the page's charts ask the same way.
      { what: `dashboard group page, every rank's line of ${o.keys.length} metrics in one answer`, asks: [[g + q(o.keys)]] },
      // The runs table over every run in the store: its first page, and the first page sorted by a summary value.
      { what: 'dashboard runs table, first page of 100', asks: [['/api/runs?limit=100']] },
      { what: `dashboard runs table sorted by summary.${o.keys[0]}, first page of 100`, asks: [[`/api/runs?limit=100&sort=${encodeURIComponent(`summary.${o.keys[0]}`)}&desc=1`]] },
    ];
    for (const way of ways) {
      const ui = spawn(process.execPath, [cli, 'ui', '--port', '0', '--store-url-file', urlFile], { env, stdio: ['ignore', 'pipe', 'pipe'] });
      try {
        const base = await new Promise<string>((resolve, reject) => {
          let seen = '';
          const timer = setTimeout(() => reject(new Error(`logd ui printed no URL in 60 s: ${seen}`)), 60_000);
          const look = (b: Buffer) => {
            seen += b.toString();
            const m = /open (http:\/\/\S+)\n/.exec(seen);
            if (m) {
              clearTimeout(timer);
              resolve(m[1]);
            }
          };
          ui.stdout!.on('data', look);
          ui.stderr!.on('data', look);
          ui.on('exit', (c) => reject(new Error(`logd ui exited (${c}): ${seen}`)));
        });
        const opened = new URL(base);
        const token = opened.searchParams.get('token');
        const fetchOne = async (ask: string) => {
          const page = `${opened.origin}${ask}`;
          const res = await fetch(page, { headers: token ? { authorization: `Bearer ${token}` } : {}, signal: AbortSignal.timeout(300_000) });
          const body = await res.text();
          if (res.status !== 200) throw new Error(`${page}: ${res.status} ${body.slice(0, 300)}`);
          return body.length;
        };
        // Each step's asks together, the steps one after the other; the bytes of every answer.
        const get = async () => {
          let bytes = 0;
          for (const step of way.asks) for (const n of await Promise.all(step.map(fetchOne))) bytes += n;
          return bytes;
        };
        const [first, bytes] = await timed(get);
        const again: number[] = [];
        for (let i = 0; i < rounds; i++) again.push((await timed(get))[0]);
        out.push({ what: way.what, firstMs: first, medianMs: median(again), note: `${(bytes / 1024).toFixed(0)} KiB of answers; again = the dashboard's cache` });
        say(`readers: ${way.what}: ${first.toFixed(0)} ms first`);
      } finally {
        ui.kill('SIGTERM');
      }
    }

    // logd health --store.
    const health = async () => {
      const r = await run(process.execPath, [cli, 'health', o.group, '--store-url-file', urlFile, '--json'], { env, maxBuffer: 256 << 20, timeout: 300_000 });
      return r.stdout.length;
    };
    const [hFirst, hBytes] = await timed(health);
    const hAgain: number[] = [];
    for (let i = 0; i < rounds; i++) hAgain.push((await timed(health))[0]);
    out.push({ what: '`logd health GROUP --store … --json` (a fresh process each time)', firstMs: hFirst, medianMs: median(hAgain), note: `${(hBytes / 1024).toFixed(0)} KiB of JSON` });
    say(`readers: health ${hFirst.toFixed(0)} ms first`);

    // Python's API.
    const py = o.python ?? path.join(root, '.venv-python', 'bin', 'python');
    if (fs.existsSync(py)) {
      const script = `
import json, os, time
import logd
api = logd.Api(store=os.environ["LOGD_BENCH_URL"])
ts = []
for i in range(${rounds + 1}):
    t = time.perf_counter()
    df = api.group(${JSON.stringify(o.group)}).history(keys=${JSON.stringify(o.keys)})
    ts.append((time.perf_counter() - t) * 1000)
print(json.dumps({"ms": ts, "rows": len(df)}))
`;
      // Its reader process is `logd reads-server`, started the way the client starts the daemon.
      const r = await run(py, ['-c', script], { env: { ...env, LOGD_BENCH_URL: o.url, LOGD_BIN: `${process.execPath} ${cli}` }, maxBuffer: 64 << 20, timeout: 600_000 });
      const got = JSON.parse(r.stdout.trim().split('\n').pop()!) as { ms: number[]; rows: number };
      out.push({ what: `Python \`Api(store=…).group(g).history(keys=[${o.keys.length} metrics])\``, firstMs: got.ms[0], medianMs: median(got.ms.slice(1)), note: `${got.rows.toLocaleString('en')} rows in one DataFrame; first = with its reader process's start` });
    } else {
      say(`readers: no ${py}; the Python figure is left out (make test makes it)`);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  return out;
}
