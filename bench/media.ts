// Issue 20's figures for the TypeScript client: what histograms cost, and
// whether a run that logs them keeps its scalar log() cost. Prints figures,
// asserts nothing.
//
// 1. `new Histogram(values)` (64 bins): a Float64Array of 1 M values, a plain
//    number[] of 1 M and a Float64Array of 10 M for scale; process CPU and
//    wall per call, medians, the variants taken in turn each round.
// 2. Scalar `log()` of 10 metrics against the same daemon: a run that never
//    logs media against one whose every 100th row also carries a Histogram
//    (64 bins, made once, so its binning is not counted here). Per round:
//    process CPU over the 99 scalar rows of each 100 (process.cpuUsage
//    around them), over row 0 of each 100 (the histogram row in the second
//    run), and over the whole round up to an acknowledged flush (encoding and
//    sending included); and the calling thread's own CPU over the loop
//    (schedstat: process.cpuUsage also counts V8's GC helper threads).
//    Twice:
//    2a. each run in a process of its own, the processes' order rotated each
//        round, so the scalars-only process is what ran before issue 20 (V8
//        never sees a media value there); a third process logs the
//        histogram row's shape with no media in it ('grad/w1': undefined,
//        which log() skips), to tell the shape's cost from the media's;
//    2b. both runs in this one process, rounds alternated, their order
//        swapped each round: log()'s code then sees both row shapes.
//
// Against a real daemon in a fresh data dir, auto-started by the first init.
//
//   npx tsc -p tsconfig.json && node dist/bench/media.js [--quick]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const self = fileURLToPath(import.meta.url);
const root = path.resolve(path.dirname(self), '..', '..');
const quick = process.argv.includes('--quick');

function median(a: number[]): number {
  const s = [...a].sort((x, y) => x - y);
  return s[s.length >> 1];
}

function load(): string {
  return os.loadavg().map((x) => x.toFixed(2)).join(' ');
}

function cpuUs(c: NodeJS.CpuUsage): number {
  return c.user + c.system;
}

/** [process CPU, wall] of one call, in ms. */
function timed(f: () => unknown): [number, number] {
  const c0 = process.cpuUsage();
  const w0 = performance.now();
  f();
  const w = performance.now() - w0;
  return [cpuUs(process.cpuUsage(c0)) / 1000, w];
}

type Logd = typeof import('../client/index.js');

function histogramCost(logd: Logd): void {
  const { Histogram } = logd;
  const f1 = new Float64Array(1_000_000);
  for (let i = 0; i < f1.length; i++) f1[i] = Math.random() * 2 - 1 + Math.random() - Math.random();
  const plain = Array.from(f1);
  const f10 = new Float64Array(10_000_000);
  for (let i = 0; i < f10.length; i++) f10[i] = Math.random() * 2 - 1;
  const variants: Array<[string, () => unknown, number]> = [
    ['new Histogram(Float64Array of 1 M)', () => new Histogram(f1), 1],
    ['new Histogram(number[] of 1 M)', () => new Histogram(plain), 1],
    ['new Histogram(Float64Array of 10 M)', () => new Histogram(f10), 3],
  ];
  const rounds = quick ? 10 : 30;
  console.log(`1. new Histogram(values), 64 bins, ${rounds} rounds (load ${load()})`);
  for (const [, f] of variants) for (let i = 0; i < 5; i++) f(); // warm-up (JIT)
  const got = new Map<string, Array<[number, number]>>(variants.map(([k]) => [k, []]));
  for (let r = 0; r < rounds; r++) {
    for (const [k, f, every] of variants) if (r % every === 0) got.get(k)!.push(timed(f));
  }
  for (const [k, xs] of got) {
    const cpu = median(xs.map((x) => x[0]));
    const wall = median(xs.map((x) => x[1]));
    console.log(`  ${k.padEnd(40)} CPU ${cpu.toFixed(2).padStart(7)} ms  wall ${wall.toFixed(2).padStart(7)} ms  (${xs.length})`);
  }
  console.log(`  load after: ${load()}`);
}

const ROW: Record<string, number> = { loss: 0.5, acc: 0.9, lr: 0.001, m3: 3, m4: 4, m5: 5, m6: 6, m7: 7, m8: 8, m9: 9 };
const NO_MEDIA = 'scalars only';
const WITH_HIST = 'a Histogram every 100 rows';
// The histogram row's object shape (11 keys) with no media in it ('grad/w1': undefined, which log() skips):
// what the shape alone costs, apart from the media.
const SHAPE_ONLY = "that row's shape, no media";
type Round = { scalar: number; first: number; all: number; main: number; wall: number };
type Run = Awaited<ReturnType<Logd['init']>>;

function histogramOf(logd: Logd): InstanceType<Logd['Histogram']> {
  const src = new Float64Array(10_000);
  for (let i = 0; i < src.length; i++) src[i] = Math.random();
  return new logd.Histogram(src);
}

/**
 * This thread's CPU time in ns (Linux schedstat: run time on a CPU, not
 * ticks), NaN where it cannot be read. process.cpuUsage() counts every
 * thread, V8's concurrent GC helpers included; this counts only the thread
 * that calls log().
 */
function mainThreadNs(): number {
  try {
    return Number(fs.readFileSync(`/proc/self/task/${process.pid}/schedstat`, 'utf8').split(' ')[0]);
  } catch {
    return NaN;
  }
}

/** One round of `rows` rows into `run`, its row 0 of each 100 being `first`: µs per row. */
async function round(run: Run, first: Record<string, unknown>, rows: number): Promise<Round> {
  const row = { ...ROW };
  let scalar = 0;
  let head = 0;
  const segments = rows / 100;
  const all0 = process.cpuUsage();
  const m0 = mainThreadNs();
  const w0 = performance.now();
  for (let s = 0; s < segments; s++) {
    const c0 = process.cpuUsage();
    first.loss = 1 / (s + 1);
    run.log(first); // row 0 of each 100: the histogram row (a plain row where the run logs no media)
    const c1 = process.cpuUsage();
    for (let i = 0; i < 99; i++) {
      row.loss = 1 / (i + 2);
      run.log(row);
    }
    const c2 = process.cpuUsage();
    head += cpuUs(c1) - cpuUs(c0);
    scalar += cpuUs(c2) - cpuUs(c1);
    // A training step awaits something now and then (data, a GPU sync): let the writer send.
    if (s % 10 === 9) await new Promise((res) => setImmediate(res));
  }
  const wall = performance.now() - w0;
  const main = mainThreadNs() - m0;
  await run.flush(60_000);
  const all = cpuUs(process.cpuUsage(all0));
  return { scalar: scalar / (99 * segments), first: head / segments, all: all / rows, main: main / 1000 / rows, wall: (wall * 1000) / rows };
}

/** A process of its own: the process that never logs media never makes a Histogram, so V8 never sees one. */
async function role(logd: Logd, which: string, rows: number): Promise<void> {
  const run = await logd.init({ project: 'bench', name: `media-proc-${which}` });
  const first: Record<string, unknown> = which === 'hist' ? { ...ROW, 'grad/w1': histogramOf(logd) } : which === 'shape' ? { ...ROW, 'grad/w1': undefined } : { ...ROW };
  await round(run, first, 50_000); // warm-up (JIT, names, the connection)
  const r = await round(run, first, rows);
  await run.finish();
  console.log(JSON.stringify(r));
}

function rolePass(which: string, rows: number): Promise<Round> {
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, [self, '--role', which, String(rows)], { env: process.env, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    p.stdout.on('data', (d) => { out += d; });
    // 'close', not 'exit': a child's last line may still be in the pipe when 'exit' fires
    p.on('close', (code) => (code === 0 ? resolve(JSON.parse(out.trim().split('\n').pop()!)) : reject(new Error(`bench role ${which} exited with ${code}`))));
  });
}

function table(per: Record<string, Round[]>): void {
  console.log(`  ${'run'.padEnd(28)} ${'scalar row'.padStart(12)} ${'row 0 of 100'.padStart(14)} ${'all rows (+flush)'.padStart(18)} ${'main thread/row'.padStart(16)} ${'loop wall/row'.padStart(14)}`);
  for (const [name, rs] of Object.entries(per)) {
    const m = (k: keyof Round) => median(rs.map((r) => r[k]));
    console.log(`  ${name.padEnd(28)} ${m('scalar').toFixed(3).padStart(9)} µs ${m('first').toFixed(3).padStart(11)} µs ${m('all').toFixed(3).padStart(15)} µs ${m('main').toFixed(3).padStart(13)} µs ${m('wall').toFixed(3).padStart(11)} µs`);
    console.log(`  ${''.padEnd(28)} scalar per round: ${rs.map((r) => r.scalar.toFixed(3)).join(', ')}`);
  }
  const a = per[NO_MEDIA];
  for (const name of Object.keys(per).filter((n) => n !== NO_MEDIA)) {
    const b = per[name];
    for (const k of ['scalar', 'main', 'all'] as const) {
      const ratio = a.map((x, i) => b[i][k] / x[k]);
      console.log(`  ${{ scalar: 'scalar row', main: 'main thread per row (loop)', all: 'all rows (+flush)' }[k]}, "${name}" / "${NO_MEDIA}", per round: median ${median(ratio).toFixed(3)} (min ${Math.min(...ratio).toFixed(3)}, max ${Math.max(...ratio).toFixed(3)})`);
    }
  }
}

async function scalarCost(logd: Logd): Promise<void> {
  const rows = quick ? 100_000 : 200_000;
  const rounds = quick ? 3 : 10;
  // (a) One process each, alternated: the honest before/after (a process that never logs media is what ran
  // before issue 20).
  console.log(`2a. run.log() of 10 metrics, one process per run, ${rounds} rounds x ${rows} rows, order rotated (load ${load()})`);
  const byProcess: Record<string, Round[]> = { [NO_MEDIA]: [], [WITH_HIST]: [], [SHAPE_ONLY]: [] };
  const roles: Array<[string, string]> = [[NO_MEDIA, 'scalars'], [WITH_HIST, 'hist'], [SHAPE_ONLY, 'shape']];
  for (let r = 0; r < rounds; r++) {
    for (const [name, which] of [...roles.slice(r % 3), ...roles.slice(0, r % 3)]) byProcess[name].push(await rolePass(which, rows));
  }
  table(byProcess);
  // (b) Both runs in this one process: V8 sees both row shapes in the same log() code, so the scalars-only run
  // pays for the mix too.
  const runs: Record<string, Run> = {
    [NO_MEDIA]: await logd.init({ project: 'bench', name: 'media-scalars-only' }),
    [WITH_HIST]: await logd.init({ project: 'bench', name: 'media-hist-every-100' }),
  };
  const firsts: Record<string, Record<string, unknown>> = { [NO_MEDIA]: { ...ROW }, [WITH_HIST]: { ...ROW, 'grad/w1': histogramOf(logd) } };
  console.log(`2b. the same, both runs in this one process, ${rounds} rounds, alternated (load ${load()})`);
  for (const name of [NO_MEDIA, WITH_HIST]) await round(runs[name], firsts[name], 50_000); // warm-up
  const inProcess: Record<string, Round[]> = { [NO_MEDIA]: [], [WITH_HIST]: [] };
  for (let r = 0; r < rounds; r++) {
    for (const name of r % 2 === 0 ? [NO_MEDIA, WITH_HIST] : [WITH_HIST, NO_MEDIA]) inProcess[name].push(await round(runs[name], firsts[name], rows));
  }
  table(inProcess);
  for (const run of Object.values(runs)) await run.finish();
  console.log(`  load after: ${load()}`);
}

async function main(): Promise<void> {
  const isRole = process.argv[2] === '--role';
  const base = isRole ? '' : fs.mkdtempSync(path.join(os.tmpdir(), 'ldbench-media-'));
  if (!isRole) { // a role inherits its parent's data dir and daemon
    process.env.LOGD_DIR = path.join(base, 'data');
    process.env.LOGD_RUNTIME_DIR = path.join(base, 'rt');
    process.env.LOGD_IDLE_TIMEOUT_MS = '5000';
    delete process.env.LOGD_SERVICE;
    delete process.env.LOGD_CONSOLE;
  }
  const logd = await import('../client/index.js');
  if (process.argv[2] === '--role') {
    await role(logd, process.argv[3], Number(process.argv[4]));
    process.exit(0);
  }
  console.log(`node ${process.version}, logd from ${path.join(root, 'dist', 'client')}; ${new Date().toISOString().slice(0, 16)} UTC; load ${load()}`);
  try {
    histogramCost(logd);
    await scalarCost(logd);
  } finally {
    if (base) fs.rmSync(base, { recursive: true, force: true });
  }
}

await main();
