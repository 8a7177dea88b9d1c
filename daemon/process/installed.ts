// A daemon whose installation was removed stops. `pip uninstall logd` (or
// `npm uninstall -g logd`, or `make clean` in a checkout) cannot stop the
// daemons started from that install: wheels have no uninstall hooks. Such a
// daemon would otherwise run on from deleted files until its idle timeout, and
// a `logd serve` forever. So the daemon looks at its own program (the CLI
// script it was started with and the node binary) every few seconds, and
// shuts down gracefully when one has been gone for two looks in a row (a
// rebuild that replaces a file in place is not mistaken for a removal).
import fs from 'node:fs';
import path from 'node:path';

export function stopWhenUninstalled(stop: (why: string) => void, everyMs = 2000): void {
  const files = [process.execPath];
  if (process.argv[1]) files.push(path.resolve(process.argv[1]));
  let missingBefore = '';
  const t = setInterval(() => {
    const missing = files.find((f) => !fs.existsSync(f)) ?? '';
    if (missing && missing === missingBefore) {
      clearInterval(t);
      stop(`its program ${missing} was removed (logd uninstalled)`);
    }
    missingBefore = missing;
  }, everyMs);
  t.unref();
}
