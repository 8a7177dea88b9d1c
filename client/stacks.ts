// Stacks on a stall (docs/health.md): this process asks Node for a
// diagnostic report on SIGUSR2, written next to a registration file in the
// daemon's `<data dir>/stacks/` (`<pid>.<start ticks>.stacks`), so that the daemon can see
// what it is doing when its group stalls. Opt out with LOGD_STACKS=0; a
// program that listens to SIGUSR2 or set up its own reports is left alone.
import fs from 'node:fs';
import path from 'node:path';

let registeredPid = 0;

function startTicks(): number {
  const stat = fs.readFileSync('/proc/self/stat', 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
}

/** Registers this process once (the daemon made `<data dir>/stacks`: without it, nothing). Never throws. */
export function registerStacks(spoolDir: string): void {
  const dir = path.join(path.dirname(spoolDir), 'stacks');
  if (registeredPid === process.pid || /^(0|false|no|off)$/i.test(process.env.LOGD_STACKS ?? '')) return;
  try {
    const report = process.report;
    if (!report || report.reportOnSignal || process.listenerCount('SIGUSR2') > 0) return;
    if (!fs.statSync(dir).isDirectory()) return;
    const start = startTicks();
    const name = `${process.pid}.${start}.stacks`;
    const file = path.join(dir, name);
    const fd = fs.openSync(file, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_TRUNC | fs.constants.O_NOFOLLOW, 0o600);
    try {
      fs.writeSync(fd, `logd-stacks 1 pid=${process.pid} start=${start} signal=SIGUSR2 kind=node\n`);
    } finally {
      fs.closeSync(fd);
    }
    report.directory = dir;
    report.filename = `${name}.json`;
    report.signal = 'SIGUSR2';
    report.reportOnSignal = true;
    registeredPid = process.pid;
    process.once('exit', () => {
      fs.rmSync(file, { force: true });
      fs.rmSync(`${file}.json`, { force: true });
    });
  } catch {
    /* no stacks for this process: everything else works */
  }
}
