// A real process tree for attribution tests: a child that busy-loops and has
// one idle grandchild. Cleaned up by the caller's cleanup list, and on its own
// if the test process dies.
import { spawn } from 'node:child_process';
import { isAlive, waitFor } from './helpers.js';

// Each waits on its parent by pid (not ppid === 1: orphans may go to a subreaper).
const SCRIPT = (testPid: number): string => `
  const { spawn } = require('node:child_process');
  const alive = (pid) => { try { process.kill(pid, 0); return true; } catch { return false; } };
  const g = spawn(process.execPath, ['-e', 'setInterval(() => { try { process.kill(' + process.pid + ', 0); } catch { process.exit(0); } }, 200)'], { stdio: 'ignore' });
  process.stdout.write(String(g.pid) + '\\n');
  process.on('SIGTERM', () => { g.kill('SIGKILL'); process.exit(0); });
  (function burn() { const t = Date.now(); while (Date.now() - t < 50); setImmediate(burn); })();
  setInterval(() => { if (!alive(${testPid})) { g.kill('SIGKILL'); process.exit(0); } }, 200);`;

export interface Family {
  child: number;
  grandchild: number;
  kill: () => Promise<void>;
}

export async function spawnBusyFamily(cleanups: Array<() => Promise<void> | void>): Promise<Family> {
  const child = spawn(process.execPath, ['-e', SCRIPT(process.pid)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const kill = async (): Promise<void> => {
    child.kill('SIGTERM');
    await waitFor('the test process family to exit', 5000, () => !isAlive(child.pid!) && !isAlive(grandchild));
  };
  let grandchild = 0;
  cleanups.push(kill);
  grandchild = await new Promise<number>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('child did not report its grandchild within 10 s')), 10_000);
    child.stdout!.once('data', (d: Buffer) => {
      clearTimeout(t);
      resolve(Number(String(d).trim()));
    });
  });
  return { child: child.pid!, grandchild, kill };
}
