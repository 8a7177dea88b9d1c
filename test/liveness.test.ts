// Issue 24, case 3: an owner the daemon cannot watch by pid (on another host,
// over TCP) is judged by its client's keep-alive. One that stops without a
// word (SIGSTOP, then SIGKILL) is `crashed` within the lease; one that is
// idle but alive stays `running` for as long as it lives. Another host is made
// real with a UTS namespace of its own (another hostname; root only).
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { makeEnv, script, startDaemon, serviceFile, cliJson, waitUntil, type TestEnv } from './helpers.js';
import { PYTHON, pythonMissing, pyEnv } from './python/py-helpers.js';

let t: TestEnv;
let owner: ChildProcess | null = null;
afterEach(async () => {
  if (owner && owner.exitCode === null) owner.kill('SIGKILL');
  owner = null;
  if (t) await t.cleanup();
});

function canUnshare(): string | null {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return 'needs root for a UTS namespace (another hostname)';
  try {
    execFileSync('unshare', ['--uts', 'true'], { stdio: 'ignore' });
    return null;
  } catch (e) {
    return `unshare --uts is not allowed here (${(e as Error).message.split('\n')[0]})`;
  }
}
const why = canUnshare();
const LEASE_MS = 2500;

/** Starts an idle owner "on another host": a process whose hostname is remote-node, speaking TCP to the daemon. */
async function remoteOwner(env: TestEnv, lang: 'ts' | 'py'): Promise<{ proc: ChildProcess; id: string }> {
  const s = serviceFile(env.runtimeDir)!;
  let argv: string[];
  if (lang === 'ts') {
    const file = script(env, 'owner.mjs', `
      const run = await logd.init({ project: 'lease', name: 'remote' });
      for (let i = 0; i < 10; i++) run.log({ loss: i }, { step: i });
      await run.flush();
      console.log('run ' + run.id);
      setInterval(() => {}, 1 << 30); // idle, alive: no logging, no calls of its own
    `);
    argv = [process.execPath, file];
  } else {
    const file = path.join(env.dir, 'owner.py');
    fs.writeFileSync(file, [
      'import time, logd',
      "run = logd.init(project='lease', name='remote')",
      'for i in range(10): run.log({"loss": i}, step=i)',
      'run._writer.wait_acked(10.0)',
      "print('run ' + run.id, flush=True)",
      'while True: time.sleep(3600)  # idle, alive',
    ].join('\n'));
    argv = [PYTHON, file];
  }
  const base = lang === 'py' ? pyEnv(env) : env.env;
  const proc = spawn('unshare', ['--uts', 'sh', '-c', `hostname remote-node && exec "$@"`, 'sh', ...argv], {
    env: { ...base, LOGD_SERVICE: `${s.tcp}#${s.token}`, LOGD_NO_AUTOSTART: '1', LOGD_KEEPALIVE_MS: '400' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  proc.stdout!.on('data', (d) => (out += d));
  await waitUntil(() => /run (\w+)/.test(out), 30_000, 'the remote owner to create its run');
  return { proc, id: /run (\w+)/.exec(out)![1] };
}

describe.skipIf(!!why)(`an owner on another host, judged by its keep-alive${why ? ` — skipped: ${why}` : ''}`, () => {
  it.each([['ts'], ['py']] as const)('%s: idle but alive for 3 leases: still running; stopped without a word (SIGSTOP): crashed, lost contact, within the lease', async (lang) => {
    if (lang === 'py' && pythonMissing) return void console.log(`skipped the Python owner: ${pythonMissing}`);
    t = makeEnv({ LOGD_OWNER_LEASE_MS: String(LEASE_MS) });
    await startDaemon(t, ['--port', '0']);
    const o = await remoteOwner(t, lang);
    owner = o.proc;
    const info = await cliJson(t, ['show', o.id]);
    expect(info.metadata.host).toBe('remote-node');
    await new Promise((r) => setTimeout(r, 3 * LEASE_MS + 500));
    expect((await cliJson(t, ['show', o.id])).state).toBe('running');
    owner.kill('SIGSTOP');
    const stoppedAt = Date.now();
    let after: any;
    await waitUntil(async () => {
      after = await cliJson(t, ['show', o.id]);
      return after.state !== 'running';
    }, 4 * LEASE_MS, 'the silent owner to be judged gone');
    const tookMs = Date.now() - stoppedAt;
    expect(after.state).toBe('crashed');
    expect(after.stateReason).toMatch(/lost contact: its owner on remote-node .* sent nothing, not even a keep-alive/);
    expect(tookMs).toBeLessThan(LEASE_MS + 2000); // the lease, plus the liveness check's half-second tick, on a loaded box
    expect(after.historyRows).toBe(10);
    owner.kill('SIGKILL');
  });
});
