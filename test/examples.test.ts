// The runnable examples and the demo, run as real processes against a real
// auto-started daemon; what they stored is read back with the logd CLI
// (`runs --json`, `show --json`, `export`). Nothing here imports logd's code.
// Every test has its own data dir and runtime dir, so its own daemon.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { describe, it, expect, beforeAll, beforeEach, afterEach } from 'vitest';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CLI = path.join(ROOT, 'dist', 'daemon', 'cli.js');
const example = (name: string) => path.join(ROOT, 'dist', 'examples', `${name}.js`);
const RUN_MS = 60_000;
const CLI_MS = 20_000;

interface RunJson {
  id: string; project: string; name: string; group: string; jobType: string; state: string; exitCode: number;
  historyRows: number; config: Record<string, unknown>; summary: Record<string, unknown>;
  metadata: { pid: number; rank: { rank: number; localRank: number; worldSize: number } | null; writers: Array<{ idx: number; pid: number }> };
}
type Row = Record<string, number> & { _step: number };

/** The examples' fake curve (examples/common.ts `fakeMetrics`), to check stored values exactly. */
function expected(step: number, steps: number, seed = 0): { loss: number; acc: number } {
  const progress = Math.exp((-3 * step) / steps);
  const r6 = (x: number) => Math.round(x * 1e6) / 1e6;
  return { loss: r6(2 * progress + 0.01 * seed), acc: r6(1 - progress) };
}

let dir = '';
let env: NodeJS.ProcessEnv = {};

function freshEnv(base: string): NodeJS.ProcessEnv {
  const e: NodeJS.ProcessEnv = { ...process.env, LOGD_DIR: path.join(base, 'data'), LOGD_RUNTIME_DIR: path.join(base, 'rt'), LOGD_IDLE_TIMEOUT_MS: '5000' };
  for (const k of ['LOGD_SERVICE', 'LOGD_MODE', 'LOGD_NO_AUTOSTART', 'RANK', 'LOCAL_RANK', 'WORLD_SIZE', 'LOCAL_WORLD_SIZE', 'GROUP_RANK', 'NODE_RANK']) delete e[k];
  return e;
}

/** Runs an example to its end; returns its output and the pid of its main process. */
async function runExample(name: string, args: string[]) {
  const proc = execa(process.execPath, [example(name), ...args], { env, extendEnv: false, all: true, reject: false, timeout: RUN_MS });
  const res = await proc;
  expect(res.exitCode, `${name} ${args.join(' ')} failed:\n${res.all}`).toBe(0);
  return { stdout: res.stdout, pid: proc.pid! };
}

async function cli(...args: string[]): Promise<string> {
  const res = await execa(process.execPath, [CLI, ...args], { env, extendEnv: false, reject: false, timeout: CLI_MS });
  expect(res.exitCode, `logd ${args.join(' ')} failed:\n${res.stderr}`).toBe(0);
  return res.stdout;
}

const runsOf = async (...filter: string[]) => JSON.parse(await cli('runs', ...filter, '--json')) as RunJson[];
const show = async (id: string) => JSON.parse(await cli('show', id, '--json')) as RunJson;
const jsonl = (text: string) => text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Row);
const exportRows = async (id: string, ...more: string[]) => jsonl(await cli('export', id, '--format', 'jsonl', ...more));

beforeAll(async () => {
  // `make test` builds first; build here only when someone runs vitest on a fresh clone.
  if (!fs.existsSync(example('demo')) || !fs.existsSync(CLI)) await execa('npx', ['tsc', '-p', 'tsconfig.json'], { cwd: ROOT, timeout: 120_000 });
});

beforeEach(() => {
  // Short: the daemon's Unix socket lives under it and socket paths are limited to 107 bytes.
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lde-'));
  env = freshEnv(dir);
});

afterEach(async () => {
  // Stop this test's daemon and wait (with a deadline) until it is gone before deleting its files.
  const status = await execa(process.execPath, [CLI, 'status', '--json'], { env, extendEnv: false, reject: false, timeout: CLI_MS });
  const pid = status.exitCode === 0 ? (JSON.parse(status.stdout) as { pid: number }).pid : 0;
  await execa(process.execPath, [CLI, 'stop'], { env, extendEnv: false, reject: false, timeout: CLI_MS });
  const deadline = Date.now() + 10_000;
  while (pid > 0 && fs.existsSync(`/proc/${pid}`) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('rank0 example', () => {
  it('stores one finished run, created by rank 0 of the job, with every step of the loop', async () => {
    const res = await runExample('rank0', ['--workers', '3', '--steps', '8', '--project', 'p-rank0', '--step-ms', '5']);
    expect(res.stdout).toContain('see: ');
    expect(res.stdout).toContain('runs --project p-rank0');

    const runs = await runsOf('--project', 'p-rank0');
    expect(runs).toHaveLength(1); // ranks 1 and 2 trained but never created a run
    const run = await show(runs[0].id);
    expect(run.state).toBe('finished');
    expect(run.exitCode).toBe(0);
    expect(run.jobType).toBe('train');
    expect(run.metadata.rank).toMatchObject({ rank: 0, localRank: 0, worldSize: 3 });
    expect(run.config).toMatchObject({ world_size: 3, steps: 8 });
    expect(run.summary.final_loss).toBe(expected(7, 8).loss);

    const rows = await exportRows(run.id);
    expect(rows.map((r) => r._step)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    for (const r of rows) expect({ loss: r.loss, acc: r.acc }).toEqual(expected(r._step, 8));
  });
});

describe('group example', () => {
  it('stores one finished run per rank, all in the same group, each with its rank and its own curve', async () => {
    await runExample('group', ['--workers', '3', '--steps', '6', '--project', 'p-group', '--group', 'exp-test', '--step-ms', '5']);

    const runs = await runsOf('--project', 'p-group', '--group', 'exp-test');
    expect(runs).toHaveLength(3);
    expect(await runsOf('--project', 'p-group')).toHaveLength(3); // nothing outside the group
    for (const r of runs) {
      expect(r.group).toBe('exp-test');
      expect(r.jobType).toBe('train');
      expect(r.state).toBe('finished');
      expect(r.historyRows).toBe(6);
      expect(r.metadata.rank?.worldSize).toBe(3);
    }
    expect(runs.map((r) => r.metadata.rank?.rank).sort()).toEqual([0, 1, 2]);
    expect(new Set(runs.map((r) => r.metadata.pid)).size).toBe(3); // three processes, three runs
    // The ranks raced to auto-start a daemon: exactly one came up, the others connected to it.
    const daemonLog = fs.readFileSync(path.join(env.LOGD_RUNTIME_DIR!, 'daemon.log'), 'utf8');
    expect(daemonLog.match(/server: logd .* serving /g)).toHaveLength(1);

    for (const r of runs) {
      const rank = r.metadata.rank!.rank;
      const rows = await exportRows(r.id);
      expect(rows.map((x) => x._step)).toEqual([0, 1, 2, 3, 4, 5]);
      for (const x of rows) expect({ loss: x.loss, acc: x.acc }).toEqual(expected(x._step, 6, rank));
    }
  });

  it('names a fresh exp-<timestamp> group by default and prints how to list it', async () => {
    const res = await runExample('group', ['--workers', '2', '--steps', '3', '--project', 'p-group2', '--step-ms', '0']);
    const runs = await runsOf('--project', 'p-group2');
    expect(runs).toHaveLength(2);
    const group = runs[0].group;
    expect(group).toMatch(/^exp-\d{4}-/);
    expect(runs[1].group).toBe(group);
    expect(res.stdout).toContain(`runs --project p-group2 --group ${group}`);
  });
});

describe('pool example', () => {
  it('stores one finished run per trial, created by the forked pool workers through the parent\'s daemon', async () => {
    const res = await runExample('pool', ['--workers', '2', '--trials', '5', '--steps', '4', '--project', 'p-pool', '--step-ms', '5']);

    const runs = await runsOf('--project', 'p-pool');
    expect(runs).toHaveLength(5);
    expect(runs.map((r) => r.config.trial).sort()).toEqual([0, 1, 2, 3, 4]);
    expect(runs.map((r) => r.config.lr as number).sort((a, b) => b - a)).toEqual([0.1, 0.05, 0.025, 0.0125, 0.00625]);
    const group = runs[0].group;
    expect(group).toMatch(/^sweep-/);
    for (const r of runs) {
      expect(r.group).toBe(group);
      expect(r.jobType).toBe('sweep');
      expect(r.state).toBe('finished');
      expect(r.name).toBe(`trial${r.config.trial}`);
      const rows = await exportRows(r.id);
      expect(rows.map((x) => x._step)).toEqual([0, 1, 2, 3]);
      for (const x of rows) expect({ loss: x.loss, acc: x.acc }).toEqual(expected(x._step, 4, r.config.trial as number));
    }
    // The runs come from the two workers (so each worker made several), never from the parent.
    const pids = new Set(runs.map((r) => r.metadata.pid));
    expect(pids.size).toBeLessThanOrEqual(2);
    expect(pids.has(res.pid)).toBe(false);
  });
});

describe('shared example', () => {
  it('keeps the rows of the parent and of every child, including rows of the same step from different writers', async () => {
    const res = await runExample('shared', ['--workers', '2', '--steps', '10', '--project', 'p-shared', '--step-ms', '5']);

    const runs = await runsOf('--project', 'p-shared');
    expect(runs).toHaveLength(1);
    const run = await show(runs[0].id);
    expect(run.state).toBe('finished');
    expect(run.historyRows).toBe(30);
    expect(run.metadata.pid).toBe(res.pid); // the parent owns the run
    expect(run.metadata.writers).toHaveLength(3);
    expect(new Set(run.metadata.writers.map((w) => w.pid)).size).toBe(3);

    // As stored: each writer's rows, tagged with the writer.
    const raw = await exportRows(run.id, '--raw');
    expect(raw).toHaveLength(30);
    const byWriter = new Map<number, Row[]>();
    for (const r of raw) byWriter.set(r._writer, [...(byWriter.get(r._writer) ?? []), r]);
    expect(byWriter.size).toBe(3);
    const keysOf = (rows: Row[]) => [...new Set(rows.flatMap((r) => Object.keys(r).filter((k) => !k.startsWith('_'))))].sort();
    const writerKeys = [...byWriter.values()].map(keysOf).sort((a, b) => a[0].localeCompare(b[0]));
    expect(writerKeys).toEqual([['acc', 'loss'], ['child0/loss'], ['child1/loss']]);
    for (const rows of byWriter.values()) expect(rows.map((r) => r._step).sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    for (let step = 0; step < 10; step++) {
      const same = raw.filter((r) => r._step === step);
      expect(new Set(same.map((r) => r._writer)).size, `step ${step}`).toBe(3);
    }
    for (const r of raw) {
      if ('loss' in r) expect({ loss: r.loss, acc: r.acc }).toEqual(expected(r._step, 10));
      if ('child0/loss' in r) expect(r['child0/loss']).toBe(expected(r._step, 10, 1).loss);
      if ('child1/loss' in r) expect(r['child1/loss']).toBe(expected(r._step, 10, 2).loss);
    }

    // Merged by step: one row per step carrying every writer's keys.
    const merged = await exportRows(run.id);
    expect(merged.map((r) => r._step)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    for (const r of merged) expect(Object.keys(r).filter((k) => !k.startsWith('_')).sort()).toEqual(['acc', 'child0/loss', 'child1/loss', 'loss']);
  });
});

/** `make install`'s step (scripts/install-cli.sh) into a prefix of the test's own; returns its bin dir. */
async function installCli(prefix: string): Promise<string> {
  const r = await execa('bash', [path.join(ROOT, 'scripts', 'install-cli.sh')], { env: { ...env, PREFIX: prefix }, extendEnv: false, reject: false });
  expect(r.exitCode, r.stderr).toBe(0);
  return path.join(prefix, 'bin');
}

describe('make install', () => {
  it('puts a logd command on PATH that runs this checkout\'s CLI; uninstall removes only its own', async () => {
    const bin = await installCli(path.join(dir, 'prefix'));
    const withLogd = { ...env, PATH: `${bin}:${env.PATH}` };
    const version = await execa('logd', ['--version'], { env: withLogd, extendEnv: false });
    expect(version.stdout.trim()).toBe(JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).version);
    const runs = await execa('logd', ['runs', '--json'], { env: withLogd, extendEnv: false });
    expect(JSON.parse(runs.stdout)).toEqual([]);
    const removed = await execa('bash', [path.join(ROOT, 'scripts', 'install-cli.sh'), '--remove'], { env: { ...env, PREFIX: path.join(dir, 'prefix') }, extendEnv: false });
    expect(removed.stdout).toContain('removed');
    expect(fs.existsSync(path.join(bin, 'logd'))).toBe(false);
    // A logd that is not ours is left alone.
    fs.writeFileSync(path.join(bin, 'logd'), '#!/bin/sh\necho other\n', { mode: 0o755 });
    const refused = await execa('bash', [path.join(ROOT, 'scripts', 'install-cli.sh')], { env: { ...env, PREFIX: path.join(dir, 'prefix') }, extendEnv: false, reject: false });
    expect(refused.exitCode).toBe(1);
    expect(refused.stderr).toContain('is not ours');
  });
});

describe('demo', () => {
  it('runs the four patterns against an auto-started daemon, stores ten finished runs and exits 0 within 30 s', async () => {
    // After `make install`: the commands the demo prints are `logd …`, and they run as printed.
    env = { ...env, PATH: `${await installCli(path.join(dir, 'prefix'))}:${env.PATH}` };
    const t0 = Date.now();
    const res = await execa(process.execPath, [example('demo')], { env, extendEnv: false, all: true, reject: false, timeout: RUN_MS });
    const took = Date.now() - t0;
    expect(res.exitCode, res.all).toBe(0);
    expect(took).toBeLessThan(30_000);
    expect(res.stdout).toContain(`logd data dir: ${env.LOGD_DIR}`);
    for (const s of ['[1/4] rank0: ok', '[2/4] group: ok', '[3/4] pool: ok', '[4/4] shared: ok', 'Look further:']) expect(res.stdout).toContain(s);

    const runs = await runsOf();
    expect(runs).toHaveLength(10);
    expect(runs.every((r) => r.state === 'finished')).toBe(true);
    const perProject = Object.fromEntries(['demo-rank0', 'demo-group', 'demo-pool', 'demo-shared'].map((p) => [p, runs.filter((r) => r.project === p).length]));
    expect(perProject).toEqual({ 'demo-rank0': 1, 'demo-group': 4, 'demo-pool': 4, 'demo-shared': 1 });
    const shared = runs.find((r) => r.project === 'demo-shared')!;
    expect(res.stdout).toContain(`run ${shared.id}: demo-shared/`); // the `logd show` it printed

    // Every command it prints is `logd …`; none is `node …/cli.js`, and no hint about PATH (logd is on it).
    expect(res.stdout).not.toMatch(/node \S*cli\.js/);
    expect(res.stdout).not.toContain('no `logd` on PATH');
    const printed = res.stdout.split('\n').map((l) => l.trim()).filter((l) => /^(LOGD_\w+=\S+ )*logd /.test(l));
    expect(printed.length).toBeGreaterThanOrEqual(6);
    const group = await execa('bash', ['-c', `${printed.find((l) => l.endsWith('logd runs --project demo-group'))!} --json`], { env, extendEnv: false, reject: false });
    expect(group.exitCode, group.stderr).toBe(0);
    expect(JSON.parse(group.stdout)).toHaveLength(4);
    // It ends with the one command that opens the dashboard on these runs: run it as printed (on a free port).
    const last = res.stdout.trimEnd().split('\n').at(-1)!.trim();
    expect(last, last).toMatch(/^(LOGD_\w+=\S+ )*logd ui$/);
    const ui = execa('bash', ['-c', `exec env ${last} --port 0`], { env, extendEnv: false, reject: false });
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let out = '';
        ui.stdout!.on('data', (d: Buffer) => {
          out += d.toString();
          const u = /open (http\S+)/.exec(out);
          if (u) resolve(u[1]);
        });
        void ui.then((r) => reject(new Error(`logd ui exited: ${r.stderr}`)));
      });
      const page = await fetch(url.replace('/?token=', '/api/runs?token='));
      expect((await page.json()).total).toBe(10);
    } finally {
      ui.kill('SIGTERM');
      await ui;
    }
  });

  it('exits non-zero with a clear message when the daemon cannot start', async () => {
    const notADir = path.join(dir, 'not-a-dir');
    fs.writeFileSync(notADir, '');
    env = { ...env, LOGD_DIR: notADir };
    const res = await execa(process.execPath, [example('demo')], { env, extendEnv: false, all: true, reject: false, timeout: RUN_MS });
    expect(res.exitCode).not.toBe(0);
    expect(res.stderr).toContain('demo: FAILED: [1/4] rank0');
    expect(res.stderr).toContain('the logd daemon exited with code 1 while starting');
  });
});
