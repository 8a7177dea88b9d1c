// A failed job's story (issue 34): how soon it is told, and whether it is
// right. Real torchrun jobs (4 ranks, gloo; test/python/fixtures/story_train.py)
// on a real daemon; rank 2 fails at a random step in each way, `--repeat`
// times each. Two figures, printed, asserting nothing:
// - the time from the first death (the dying rank prints its clock just
//   before it dies) to the story being told: `logd health GROUP --json`,
//   asked every 50 ms, answers with a story and every rank final;
// - right rank and cause named, out of the jobs tried.
//
//   node dist/bench/story.js [--repeat N] [--python PATH]
// (PATH: a Python with torch and logd; .venv-python/bin/python by default; the OOM fault needs root and cgroup v1)
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const CLI = path.join(root, 'dist', 'daemon', 'cli.js');
const arg = (name: string, d: string) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : d);
const repeat = Number(arg('--repeat', '3'));
const python = arg('--python', path.join(root, '.venv-python', 'bin', 'python'));
const fixture = path.join(root, 'test', 'python', 'fixtures', 'story_train.py');

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'logd-bench-story-'));
const logdBin = path.join(dir, 'logd');
fs.writeFileSync(logdBin, `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(CLI)} "$@"\n`, { mode: 0o755 });
const env: NodeJS.ProcessEnv = { ...process.env, LOGD_DIR: path.join(dir, 'data'), LOGD_RUNTIME_DIR: path.join(dir, 'rt'), LOGD_BIN: logdBin, OMP_NUM_THREADS: '1', PYTHONUNBUFFERED: '1', LOGD_IDLE_TIMEOUT_MS: '600000' };
for (const k of ['RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'MASTER_ADDR', 'MASTER_PORT', 'LOGD_SERVICE']) delete env[k];
const daemon = spawn(process.execPath, [CLI, 'serve'], { env, stdio: 'ignore' });
await new Promise((r) => setTimeout(r, 1500));

let cg: string | null = path.join('/sys/fs/cgroup/memory', `logd-bench-story-${process.pid}`);
try {
  fs.mkdirSync(cg);
  fs.writeFileSync(path.join(cg, 'memory.limit_in_bytes'), String(256 << 20));
} catch {
  cg = null;
}
const faults: Array<[string, string]> = [['kill', 'killed'], ['raise', 'exception'], ['abort', 'abort'], ['segv', 'segfault'], ['nan', 'nan'], ...(cg ? [['oom', 'oom'] as [string, string]] : [])];
console.log(`bench/story: ${faults.length} faults x ${repeat}, 4-rank torchrun jobs (gloo), ${os.cpus().length} cores, load ${os.loadavg().map((x) => x.toFixed(1)).join(' ')}${cg ? '' : '; OOM skipped (no writable cgroup v1 memory controller)'}`);

interface Story { verdict: string; line: string; first: Array<{ rank: number; cause: string }>; after: Array<{ consequence: boolean }> }
const lat: number[] = [];
let right = 0, tried = 0;
let port = 29800 + (process.pid % 100);
for (let i = 0; i < repeat; i++) {
  for (const [fault, cause] of faults) {
    const group = `bench-${fault}-${i}`;
    const step = 15 + Math.floor(Math.random() * 40);
    const out: string[] = [];
    const job = spawn(python, ['-m', 'torch.distributed.run', '--nproc_per_node', '4', '--master_port', String(port++), '--redirects', '1', '--tee', '1',
      '--log_dir', path.join(dir, `tr-${group}`), fixture, group, fault, '2', String(step)], { env: { ...env, ...(cg ? { STORY_CGROUP: cg } : {}) }, stdio: ['ignore', 'pipe', 'pipe'] });
    job.stdout!.on('data', (b: Buffer) => out.push(b.toString()));
    let story: Story | null = null;
    let toldAt = 0;
    const ask = async () => {
      try {
        const r = await run(process.execPath, [CLI, 'health', group, '--json'], { env, timeout: 10_000 });
        const g = (JSON.parse(r.stdout) as Array<{ story: Story | null; ranks: Array<{ runState: string }> }>)[0];
        if (g?.story && g.ranks.length === 4 && g.ranks.every((x) => x.runState !== 'running' && x.runState !== 'finishing')) {
          story = g.story;
          toldAt = Date.now() / 1000;
        }
      } catch {
        /* no run of the group yet */
      }
    };
    const deadline = Date.now() + 120_000;
    while (!story && Date.now() < deadline) {
      const t0 = Date.now();
      await ask();
      await new Promise((r) => setTimeout(r, Math.max(0, 50 - (Date.now() - t0))));
    }
    await new Promise((r) => (job.exitCode !== null || job.signalCode !== null ? r(null) : job.once('exit', r)));
    const died = /about to fail \(\w+\) at (\d+\.\d+)/.exec(out.join(''));
    tried++;
    const s = story as Story | null;
    const ok = !!s && s.verdict === 'failed' && s.first.length === 1 && s.first[0].rank === 2 && s.first[0].cause === cause && s.after.every((f) => f.consequence);
    if (ok) right++;
    const ms = died && s ? (toldAt - Number(died[1])) * 1000 : NaN;
    if (Number.isFinite(ms)) lat.push(ms);
    console.log(`  ${group} (step ${step}): ${ok ? 'right' : 'WRONG'}, told ${Number.isFinite(ms) ? `${ms.toFixed(0)} ms` : '?'} after the death; ${s ? s.line : 'no story'}`);
  }
}
lat.sort((a, b) => a - b);
console.log(`time from the first death to the story (asked every 50 ms): median ${lat[Math.floor(lat.length / 2)]?.toFixed(0)} ms, worst ${lat[lat.length - 1]?.toFixed(0)} ms over ${lat.length} jobs`);
console.log(`right rank and cause named: ${right} of ${tried}`);
daemon.kill('SIGTERM');
await new Promise((r) => daemon.once('exit', r));
if (cg) fs.rmdirSync(cg);
fs.rmSync(dir, { recursive: true, force: true });
