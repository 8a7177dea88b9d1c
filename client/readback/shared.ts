// The shared store's reader process for api.shared() (client/readback/index.ts): `logd reads-server` started as a
// child of this program, its address read from the one line it prints (daemon/shared-reads). Its standard input
// stays open while this program runs: it ends when this program does, however that ends, or on close().
import { createRequire } from 'node:module';
import { cliPath } from '../discovery.js';
const START_MS = 30_000;

export interface ReadsServerAddress { target: string; token: string; where: string; close(): Promise<void> }

export function startReadsServer(url: string): Promise<ReadsServerAddress> {
  const env: NodeJS.ProcessEnv = { ...process.env, LOGD_STORE_URL: url };
  delete env.LOGD_SERVICE;
  // node:child_process loads only here: a trainer's import of logd does not pay for it.
  const { spawn } = createRequire(import.meta.url)('node:child_process') as typeof import('node:child_process');
  const child = spawn(process.execPath, [cliPath, 'reads-server'], { stdio: ['pipe', 'pipe', 'pipe'], env });
  let out = '';
  let err = '';
  const close = (): Promise<void> => new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const kill = setTimeout(() => child.kill('SIGKILL'), 5000);
    child.once('exit', () => (clearTimeout(kill), resolve()));
    child.stdin!.end(); // it ends itself, closing its store connections
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      void close();
      reject(new Error(`logd: the shared store's reader did not answer within ${START_MS / 1000} s (is the store reachable?)`));
    }, START_MS);
    child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const nl = out.indexOf('\n');
      if (nl < 0) return;
      clearTimeout(timer);
      try {
        const said = JSON.parse(out.slice(0, nl)) as { target: string; token: string; where: string };
        // It must not keep this program alive: a program that forgets close() still exits, and the reader with it.
        child.unref();
        for (const s of [child.stdin, child.stdout, child.stderr] as unknown as Array<{ unref?: () => void }>) s.unref?.();
        resolve({ target: said.target, token: said.token, where: said.where, close });
      } catch {
        void close();
        reject(new Error(`logd: could not open the shared store: the reader said ${JSON.stringify(out.slice(0, 200))}`));
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`logd: could not open the shared store: ${err.trim().replace(/^logd: /, '') || `the reader ended at once (exit ${code})`}`));
    });
    child.once('error', (e) => (clearTimeout(timer), reject(new Error(`logd: could not start the shared store's reader: ${e.message}`))));
  });
}
