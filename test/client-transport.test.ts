// The client's gRPC over node:http2 (client/transport), against a real
// daemon: each failure reaches the caller as the gRPC status the rest of the
// client acts on, every call ends by its deadline, and the connection never
// keeps a process alive.
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { execa } from 'execa';
import { makeEnv, startDaemon, serviceFile, script, runScript, type TestEnv } from './helpers.js';
import { connectionFor, CallError, Status } from '../client/connection.js';

let t: TestEnv;
let stopped: number | null = null;
afterEach(async () => {
  if (stopped) process.kill(stopped, 'SIGCONT');
  stopped = null;
  if (t) await t.cleanup();
});

async function callError(p: Promise<unknown>): Promise<CallError> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(CallError);
    return e as CallError;
  }
  throw new Error('the call succeeded; it should have failed');
}

describe('the client transport', () => {
  it('answers, and maps a wrong token, an unknown run and a missing daemon to their gRPC codes', async () => {
    t = makeEnv();
    await startDaemon(t);
    const s = serviceFile(t.runtimeDir)!;
    const hello = await connectionFor({ target: s.socket, token: s.token }).unary<unknown, { daemonPid: number }>('hello', { protocolVersion: 1 }, 10_000);
    expect(hello.daemonPid).toBe(s.pid);

    const badToken = await callError(connectionFor({ target: s.socket, token: 'not-the-token' }).unary('hello', { protocolVersion: 1 }, 10_000));
    expect(badToken.code).toBe(16); // UNAUTHENTICATED
    expect(badToken.message).toMatch(/token/);

    const unknown = await callError(connectionFor({ target: s.socket, token: s.token }).unary('getRun', { runId: 'nosuchrun' }, 10_000));
    expect(unknown.code).toBe(Status.NOT_FOUND);

    const nowhere = await callError(connectionFor({ target: `unix:${path.join(t.dir, 'no.sock')}`, token: 'x' }).unary('hello', { protocolVersion: 1 }, 10_000));
    expect(nowhere.code).toBe(Status.UNAVAILABLE);
    expect(nowhere.message).toMatch(/ENOENT/);
  });

  it('a call to a daemon that does not answer ends with DEADLINE_EXCEEDED at its deadline', async () => {
    t = makeEnv();
    const d = await startDaemon(t);
    const s = serviceFile(t.runtimeDir)!;
    const conn = connectionFor({ target: s.socket, token: s.token });
    await conn.unary('hello', { protocolVersion: 1 }, 10_000); // connected
    process.kill(d.pid, 'SIGSTOP');
    stopped = d.pid;
    const t0 = Date.now();
    const e = await callError(conn.unary('hello', { protocolVersion: 1 }, 300));
    expect(e.code).toBe(Status.DEADLINE_EXCEEDED);
    expect(e.message).toMatch(/no answer within 300 ms/);
    expect(Date.now() - t0).toBeLessThan(10_000); // bounded: the deadline, plus a loaded machine's delay
  });

  it('a process that imports logd with a daemon running, and never calls init, exits on its own', async () => {
    t = makeEnv();
    await startDaemon(t);
    // The import opens the connection to the known daemon; a timer keeps the
    // process up long enough for the background Hello to go out and come back.
    const file = script(t, 'idle.mjs', `setTimeout(() => console.log('done'), 300);`);
    const r = await runScript(t, file, [], {}, 30_000);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toBe('done');
    expect(r.timedOut).toBeFalsy();
  });
});
