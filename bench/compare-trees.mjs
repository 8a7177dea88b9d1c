// Alternates two builds of logd (A: an older clone's dist, B: this tree's), this tree with its crash journal off and on,
// for log() cost (core.js log-cost, 300 k rows) and 8-writer durable ingest (core.js ingest, 200 k rows each).
//   node bench/compare-trees.mjs ROUNDS   (OLD_TREE=/path/to/older/clone, default /tmp/base)
import fs from 'node:fs'; import os from 'node:os'; import path from 'node:path'; import { spawn } from 'node:child_process';
const trees = { old: process.env.OLD_TREE || '/tmp/base', new: new URL('..', import.meta.url).pathname };
function run(file, args, env, onLine) {
  return new Promise((res, rej) => { const p = spawn(process.execPath, [file, ...args], { env, stdio: ['ignore', 'pipe', 'inherit'] }); let out = '';
    p.stdout.on('data', (d) => { out += d; if (onLine) for (const l of String(d).split('\n')) if (l) onLine(l.trim()); });
    p.on('close', (c) => c === 0 ? res(JSON.parse(out.trim().split('\n').pop())) : rej(new Error('exit ' + c))); });
}
function env(base, extra) { const e = { ...process.env, LOGD_DIR: path.join(base, 'd'), LOGD_RUNTIME_DIR: path.join(base, 'r'), LOGD_IDLE_TIMEOUT_MS: '60000', ...extra }; delete e.LOGD_SERVICE; return e; }
async function ingest(core, e, per) {
  const go = path.join(e.LOGD_DIR, '..', 'go' + Math.random()); let ready = 0;
  const ends = Array.from({ length: 8 }, (_, r) => run(core, ['--role', 'ingest', String(per)], { ...e, RANK: String(r), WORLD_SIZE: '8', BENCH_GO: go }, (l) => { if (l === 'ready') ready++; }));
  while (ready < 8) await new Promise((r) => setTimeout(r, 10));
  fs.writeFileSync(go, ''); const spans = await Promise.all(ends);
  return 8 * per * 10 / ((Math.max(...spans.map((s) => s.end)) - Math.min(...spans.map((s) => s.start))) / 1000) / 1e6;
}
const variants = [['old', {}], ['new-journal-off', { LOGD_JOURNAL_MB: '0' }], ['new-journal-on', {}]];
const res = {}; const rounds = Number(process.argv[2] ?? 3);
for (let r = 0; r < rounds; r++) for (const [name, extra] of (r % 2 ? [...variants].reverse() : variants)) {
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'cmp-')); const core = path.join(trees[name.startsWith('old') ? 'old' : 'new'], 'dist/bench/core.js');
  const e = env(base, extra);
  const lc = await run(core, ['--role', 'log-cost', '300000'], e);
  const ing = await ingest(core, e, 200000);
  (res[name] ??= { log: [], ingest: [] }); res[name].log.push(lc.cpuUsPerLog); res[name].ingest.push(ing);
  console.log(`round ${r + 1} ${name}: log() ${lc.cpuUsPerLog.toFixed(3)} µs, ingest ${ing.toFixed(2)} M points/s`);
  try { const svc = JSON.parse(fs.readFileSync(path.join(base, 'r', 'service.json'))); process.kill(svc.pid, 'SIGTERM'); } catch {}
}
const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
for (const [k, v] of Object.entries(res)) console.log(`${k}: log() median ${med(v.log).toFixed(3)} µs [${v.log.map((x) => x.toFixed(3)).join(', ')}], ingest median ${med(v.ingest).toFixed(2)} M points/s [${v.ingest.map((x) => x.toFixed(2)).join(', ')}]`);
console.log('load average', os.loadavg().map((x) => x.toFixed(1)).join(' '));
