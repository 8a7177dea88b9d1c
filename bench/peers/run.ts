// The peer benchmark: logd against wandb (offline mode, wandb-core) and MLflow
// (local file store), side by side in one run. Every process of every tool
// gets a fresh, isolated environment (its own HOME and data dirs, no inherited
// service); tools are alternated round by round; stored counts are verified
// after every run. Prints medians and pair-by-pair ratios.
//
//   make bench-peers            (bench/peers/setup.sh, then this)
//   node dist/bench/peers/run.js [--quick] [--only empty,steps,group,logcost,kill,sigterm]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '..', '..', '..');
const srcDir = path.join(root, 'bench', 'peers');
const venvPy = path.join(srcDir, '.venv', 'bin', 'python');
const cli = path.join(root, 'dist', 'daemon', 'cli.js');
const tsWorker = path.join(here, 'ts-worker.js');
const quick = process.argv.includes('--quick');
const onlyArg = process.argv[process.argv.indexOf('--only') + 1];
const only = process.argv.includes('--only') ? new Set(onlyArg.split(',')) : null;

if (!fs.existsSync(venvPy)) {
  console.error(`peers: ${venvPy} is missing; run bench/peers/setup.sh (or make bench-peers) first`);
  process.exit(2);
}
const hasLogdPy = (() => {
  try {
    execFileSync(venvPy, ['-c', 'import logd'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

type Tool = 'logd' | 'logd-py' | 'wandb' | 'mlflow';
const TOOLS: Tool[] = ['logd', ...(hasLogdPy ? (['logd-py'] as Tool[]) : []), 'wandb', 'mlflow'];

interface Env { dir: string; env: NodeJS.ProcessEnv }

/** A fresh, isolated environment: own HOME, data dirs, caches; nothing inherited from a running logd or wandb. */
function freshEnv(tag: string): Env {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `peers-${tag}-`));
  const env: NodeJS.ProcessEnv = {};
  for (const k of ['PATH', 'LANG', 'TZ']) if (process.env[k]) env[k] = process.env[k];
  Object.assign(env, {
    HOME: path.join(dir, 'home'), PEERS_DIR: path.join(dir, 'out'), TMPDIR: path.join(dir, 'tmp'),
    LOGD_DIR: path.join(dir, 'logd'), LOGD_RUNTIME_DIR: path.join(dir, 'rt'), LOGD_IDLE_TIMEOUT_MS: '2000',
    LOGD_BIN: path.join(dir, 'logd-bin'),
    WANDB_DIR: path.join(dir, 'out'), WANDB_CACHE_DIR: path.join(dir, 'cache'), WANDB_CONFIG_DIR: path.join(dir, 'config'),
    WANDB_DATA_DIR: path.join(dir, 'data'), WANDB_SILENT: 'true', WANDB_MODE: 'offline', WANDB_DISABLE_GIT: 'true',
    MLFLOW_ALLOW_FILE_STORE: 'true', PYTHONDONTWRITEBYTECODE: '1',
  });
  for (const d of ['home', 'out', 'tmp']) fs.mkdirSync(path.join(dir, d), { recursive: true });
  // logd's Python client starts the same daemon as a sidecar: LOGD_BIN points at this checkout's CLI.
  fs.writeFileSync(env.LOGD_BIN!, `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(cli)} "$@"\n`, { mode: 0o755 });
  return { dir, env };
}

function cleanup(e: Env): void {
  try {
    execFileSync(process.execPath, [cli, 'stop'], { env: e.env, stdio: 'ignore', timeout: 15_000 });
  } catch {
    /* no daemon */
  }
  fs.rmSync(e.dir, { recursive: true, force: true });
}

function command(tool: Tool, args: string[]): [string, string[]] {
  if (tool === 'logd') return [process.execPath, [tsWorker, ...args]];
  return [venvPy, [path.join(srcDir, 'workload.py'), '--tool', tool === 'logd-py' ? 'logd' : tool, ...args]];
}

interface Proc { child: ChildProcess; lines: string[]; stderr: string; done: Promise<{ code: number | null; ms: number }> }

function start(tool: Tool, e: Env, args: string[]): Proc {
  const [cmd, argv] = command(tool, args);
  const t0 = performance.now();
  const child = spawn(cmd, argv, { env: e.env, stdio: ['ignore', 'pipe', 'pipe'] });
  const p: Proc = { child, lines: [], stderr: '', done: null as never };
  let buf = '';
  child.stdout!.on('data', (d: Buffer) => {
    buf += d;
    const parts = buf.split('\n');
    buf = parts.pop()!;
    p.lines.push(...parts.filter(Boolean));
  });
  child.stderr!.on('data', (d: Buffer) => (p.stderr += d));
  p.done = new Promise((resolve) => child.on('exit', (code) => resolve({ code, ms: performance.now() - t0 })));
  return p;
}

async function finished(p: Proc, what: string, timeoutMs = 600_000): Promise<{ ms: number; out: Record<string, number & string> }> {
  const timer = setTimeout(() => p.child.kill('SIGKILL'), timeoutMs);
  const { code, ms } = await p.done;
  clearTimeout(timer);
  if (code !== 0) throw new Error(`${what} exited with ${code}:\n${p.stderr.slice(-2000)}`);
  const last = p.lines.filter((l) => l.startsWith('{')).pop();
  return { ms, out: last ? JSON.parse(last) : {} };
}

/** Rows each run kept, read back from the tool's own store. */
function storedRows(tool: Tool, e: Env): number[] {
  if (tool === 'logd' || tool === 'logd-py') {
    const out = execFileSync(process.execPath, [cli, 'runs', '--json'], { env: e.env, timeout: 60_000 }).toString();
    return (JSON.parse(out) as Array<{ historyRows: number }>).map((r) => r.historyRows).sort((a, b) => a - b);
  }
  const args = tool === 'wandb' ? ['wandb', e.env.PEERS_DIR!] : ['mlflow', e.env.PEERS_DIR!, 'm0'];
  const out = execFileSync(venvPy, [path.join(srcDir, 'count.py'), ...args], { env: e.env, timeout: 120_000 }).toString();
  return (JSON.parse(out).rows as number[]).sort((a, b) => a - b);
}

function verify(tool: Tool, e: Env, runs: number, rows: number, what: string): void {
  const got = storedRows(tool, e);
  const ok = got.length === runs && got.every((n) => n === rows);
  if (!ok) throw new Error(`${what}: ${tool} stored ${JSON.stringify(got)}, expected ${runs} run(s) of ${rows} rows`);
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const fmt = (x: number, unit: string) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2)) + ' ' + unit;

/** Per tool, per figure, one value per round. */
type Table = Map<string, Map<Tool, number[]>>;
function record(t: Table, figure: string, tool: Tool, v: number): void {
  if (!t.has(figure)) t.set(figure, new Map());
  const m = t.get(figure)!;
  if (!m.has(tool)) m.set(tool, []);
  m.get(tool)!.push(v);
}

function printTable(title: string, t: Table, units: Record<string, string>): void {
  console.log(`\n### ${title}\n`);
  const peers = TOOLS.filter((x) => x !== 'logd');
  console.log(`| figure | ${TOOLS.map((x) => `${x} (median)`).join(' | ')} | ${peers.map((p) => `${p} / logd (median of pairs)`).join(' | ')} |`);
  console.log(`|---|${TOOLS.map(() => '---').join('|')}|${peers.map(() => '---').join('|')}|`);
  for (const [fig, m] of t) {
    const base = m.get('logd') ?? [];
    const cells = TOOLS.map((x) => (m.get(x)?.length ? fmt(median(m.get(x)!), units[fig]) : '–'));
    const ratios = peers.map((p) => {
      const v = m.get(p) ?? [];
      const pairs = v.map((x, i) => x / base[i]).filter((r) => Number.isFinite(r));
      return pairs.length ? `${median(pairs).toFixed(2)}×` : '–';
    });
    console.log(`| ${fig} | ${cells.join(' | ')} | ${ratios.join(' | ')} |`);
  }
}

async function emptyRun(t: Table, rounds: number): Promise<void> {
  for (let r = 0; r < rounds; r++) {
    for (const tool of TOOLS) {
      const e = freshEnv('empty');
      try {
        const { ms, out } = await finished(start(tool, e, ['--work', 'empty']), `${tool} empty run`);
        verify(tool, e, 1, 0, 'empty run');
        record(t, 'empty run, whole process (cold: no daemon running)', tool, ms);
        record(t, 'empty run, init + finish in-process (cold)', tool, out.init_ms + out.finish_ms);
        record(t, 'import of the client', tool, out.import_ms);
        // logd's steady state on a training node: the daemon is already up.
        // The peers keep no service between processes (each wandb process starts
        // its own wandb-core): their steady state is the cold figure, so it is
        // recorded in this row too and the ratio columns compare like with like.
        const warmRow = 'empty run, whole process (logd daemon already running; the peers have no service to keep)';
        if (tool === 'logd' || tool === 'logd-py') {
          const warm = await finished(start(tool, e, ['--work', 'empty']), `${tool} empty run (warm)`);
          record(t, warmRow, tool, warm.ms);
          record(t, 'empty run, init + finish in-process (daemon running)', tool, warm.out.init_ms + warm.out.finish_ms);
        } else record(t, warmRow, tool, ms);
      } finally {
        cleanup(e);
      }
    }
  }
}

async function manyProcs(t: Table, rounds: number, n: number, steps: number, floats: number, label: string, group: boolean, stepsFor: (tool: Tool) => number): Promise<void> {
  for (let r = 0; r < rounds; r++) {
    for (const tool of TOOLS) {
      const e = freshEnv('many');
      try {
        const s = stepsFor(tool);
        const t0 = performance.now();
        const procs = Array.from({ length: n }, (_, i) => start(tool, e, ['--work', 'steps', '--steps', String(s), '--floats', String(floats), '--name', `r${i}`, ...(group ? ['--group', 'g'] : [])]));
        const services = group ? watchServices(tool, e, procs) : null;
        for (const [i, p] of procs.entries()) await finished(p, `${tool} process ${i} of ${label}`);
        const ms = performance.now() - t0;
        const rss = services?.stop();
        verify(tool, e, n, s, label);
        // A tool that ran fewer steps (MLflow) has its time scaled up to the full count.
        record(t, label, tool, (ms * steps) / s);
        if (rss && rss.n > 0) {
          record(t, 'the job\'s service processes: peak RSS of one (MB)', tool, rss.max);
          record(t, 'the job\'s service processes: peak RSS summed (MB)', tool, rss.sum);
        }
      } finally {
        cleanup(e);
      }
    }
  }
}

/** Peak RSS (VmHWM) of a process in MB; 0 when it is gone. */
function peakRssMb(pid: number): number {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

/**
 * The service processes of a job while it runs, their peak RSS sampled every 200 ms: logd's one daemon of the node
 * (its service.json), or the wandb-core that each wandb trainer starts (MLflow has none). The peak of one and
 * the sum of every one's peak: what the node pays for the job's logging besides the trainers.
 */
function watchServices(tool: Tool, e: Env, procs: Proc[]): { stop(): { max: number; sum: number; n: number } } {
  const peaks = new Map<number, number>();
  const cores = new Map<number, number>(); // trainer pid -> its wandb-core's
  const look = () => {
    const pids: number[] = [];
    if (tool === 'logd' || tool === 'logd-py') {
      try {
        pids.push(JSON.parse(fs.readFileSync(path.join(e.env.LOGD_RUNTIME_DIR!, 'service.json'), 'utf8')).pid);
      } catch {
        /* not up yet */
      }
    } else if (tool === 'wandb') {
      for (const p of procs) {
        const tp = p.child.pid;
        if (!tp) continue;
        if (!cores.has(tp)) {
          try {
            const found = Number(execFileSync('pgrep', ['-P', String(tp), '-f', 'wandb-core']).toString().trim().split('\n')[0]);
            if (found) cores.set(tp, found);
          } catch {
            /* not started yet, or gone */
          }
        }
        if (cores.has(tp)) pids.push(cores.get(tp)!);
      }
    }
    for (const pid of pids) {
      const mb = peakRssMb(pid);
      if (mb > 0) peaks.set(pid, Math.max(peaks.get(pid) ?? 0, mb));
    }
  };
  const timer = setInterval(look, 200);
  return {
    stop() {
      clearInterval(timer);
      look();
      const v = [...peaks.values()];
      return { max: v.length ? Math.max(...v) : 0, sum: v.reduce((a, b) => a + b, 0), n: v.length };
    },
  };
}

async function logCost(t: Table, rounds: number, calls: (tool: Tool) => number): Promise<void> {
  for (let r = 0; r < rounds; r++) {
    for (const tool of TOOLS) {
      const e = freshEnv('cost');
      try {
        const n = calls(tool);
        const { out } = await finished(start(tool, e, ['--work', 'logcost', '--steps', String(n), '--floats', '10']), `${tool} log cost`);
        verify(tool, e, 1, out.rows, 'log cost');
        record(t, 'trainer CPU per log() of 10 metrics', tool, out.cpu_us_per_log);
        record(t, 'wall time per log() call', tool, out.wall_us_per_log);
      } finally {
        cleanup(e);
      }
    }
  }
}

function readyAt(p: Proc, n: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const deadline = setTimeout(() => reject(new Error(`no progress line "logged ${n}" within 120 s:\n${p.stderr.slice(-1500)}`)), 120_000);
    const tick = setInterval(() => {
      if (p.lines.some((l) => l.includes('"logged"') && JSON.parse(l).logged >= n)) {
        clearInterval(tick);
        clearTimeout(deadline);
        resolve();
      }
    }, 20);
  });
}
const lastLogged = (p: Proc) => Math.max(0, ...p.lines.filter((l) => l.includes('"logged"')).map((l) => JSON.parse(l).logged as number));

/** kill -9 of one of 8 workers: how long until its run shows a final state, and how many of its rows were kept. */
async function killOne(notes: string[]): Promise<void> {
  for (const tool of TOOLS) {
    const e = freshEnv('kill');
    try {
      const others = Array.from({ length: 7 }, (_, i) => start(tool, e, ['--work', 'steps', '--steps', '2000', '--floats', '10', '--name', `r${i + 1}`, '--group', 'g']));
      const victim = start(tool, e, ['--work', 'paced', '--steps', '0', '--floats', '10', '--name', 'r0', '--group', 'g']);
      await readyAt(victim, 1000);
      victim.child.kill('SIGKILL');
      const killedAt = performance.now();
      const logged = lastLogged(victim);
      for (const [i, p] of others.entries()) await finished(p, `${tool} survivor ${i}`);
      let final = 'never (no process marks the run)';
      if (tool === 'logd' || tool === 'logd-py') {
        for (;;) {
          const runs = JSON.parse(execFileSync(process.execPath, [cli, 'runs', '--json'], { env: e.env }).toString()) as Array<{ name: string; state: string }>;
          if (runs.find((x) => x.name === 'r0')?.state === 'crashed') break;
          if (performance.now() - killedAt > 60_000) throw new Error(`${tool}: the killed worker's run is not crashed after 60 s`);
          await new Promise((r) => setTimeout(r, 50));
        }
        final = `crashed after ${fmt(performance.now() - killedAt, 'ms')} (upper bound: includes the survivors' run time)`;
      } else if (tool === 'mlflow') {
        final = 'stays RUNNING (no process marks it)';
      } else {
        final = 'no final state (offline run; `wandb sync` uploads it as it is)';
      }
      const kept = storedRows(tool, e);
      notes.push(`| ${tool} | ${logged} printed as logged | ${Math.min(...kept)} kept of the victim (min over runs) | ${kept.filter((n) => n === 2000).length}/7 survivors whole | ${final} |`);
    } finally {
      cleanup(e);
    }
  }
}

/** SIGTERM of the tool's service process while a trainer logs: is the trainer alive, and what was kept? */
async function sigtermService(notes: string[]): Promise<void> {
  for (const tool of TOOLS) {
    if (tool === 'mlflow') {
      notes.push('| mlflow | – | – | no service process: the file store is written by the trainer itself |');
      continue;
    }
    const e = freshEnv('term');
    try {
      const p = start(tool, e, ['--work', 'paced', '--steps', '20000', '--floats', '10', '--name', 'victim']);
      await readyAt(p, 2000);
      // The service: logd's daemon (service.json), or the wandb-core child of the trainer.
      let svc = 0;
      if (tool === 'wandb') {
        try {
          svc = Number(execFileSync('pgrep', ['-P', String(p.child.pid), '-f', 'wandb-core']).toString().trim().split('\n')[0]) || 0;
        } catch {
          /* none */
        }
      } else {
        svc = JSON.parse(fs.readFileSync(path.join(e.env.LOGD_RUNTIME_DIR!, 'service.json'), 'utf8')).pid;
      }
      if (!svc) throw new Error(`${tool}: no service process found`);
      const at = lastLogged(p);
      process.kill(svc, 'SIGTERM');
      const { code } = await p.done;
      // A count that fails is said as such, never shown as 0 rows kept.
      let kept: string;
      try {
        kept = storedRows(tool, e).join(', ') || '0';
      } catch (err) {
        kept = `(count failed: ${(err as Error).message.split('\n')[0].slice(0, 120)})`;
      }
      notes.push(`| ${tool} | exit code ${code} | ${kept} of 20000 rows kept | service SIGTERMed after ${at} rows |`);
    } finally {
      cleanup(e);
    }
  }
}

async function main(): Promise<void> {
  const rounds = quick ? 1 : 3;
  const want = (w: string) => !only || only.has(w);
  console.log(`# logd vs peers (${new Date().toISOString()}, ${os.cpus().length} cores, node ${process.version}; tools: ${TOOLS.join(', ')}${quick ? '; --quick' : ''})`);
  const t: Table = new Map();
  if (want('empty')) await emptyRun(t, quick ? 2 : 5);
  if (want('steps')) await manyProcs(t, rounds, 10, 100, 100, '10 processes × 100 steps × 100 floats', false, () => 100);
  // MLflow's file store costs milliseconds per call: it runs a tenth of the steps and its time is scaled up.
  if (want('group')) await manyProcs(t, quick ? 1 : 2, 8, quick ? 1000 : 10_000, 10, `8 processes × ${quick ? '1 000' : '10 000'} steps × 10 metrics, one group`, true, (tool) => (tool === 'mlflow' ? (quick ? 100 : 1000) : quick ? 1000 : 10_000));
  if (want('logcost')) await logCost(t, quick ? 1 : 3, (tool) => (tool === 'mlflow' ? 1000 : quick ? 10_000 : 100_000));
  printTable('Figures', t, Object.fromEntries([...t.keys()].map((k) => [k, k.includes('per log') ? 'µs' : k.includes('(MB)') ? 'MB' : 'ms'])));
  if (want('kill')) {
    const notes: string[] = [];
    await killOne(notes);
    console.log('\n### kill -9 of one of 8 workers (7 others log 2000 steps each)\n');
    console.log('| tool | victim progress | victim rows kept | survivors | victim run\'s final state |\n|---|---|---|---|---|');
    for (const n of notes) console.log(n);
  }
  if (want('sigterm')) {
    const notes: string[] = [];
    await sigtermService(notes);
    console.log('\n### SIGTERM of the service while a trainer logs 20 000 rows\n');
    console.log('| tool | trainer | rows kept | note |\n|---|---|---|---|');
    for (const n of notes) console.log(n);
  }
}

main().catch((e) => {
  console.error(`peers: ${(e as Error).stack ?? e}`);
  process.exit(1);
});
