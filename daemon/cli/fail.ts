// How a command fails: its message on stderr, then the exit code. Apart from common.ts (which loads commander) for
// the sidecar's start (serve-run.ts), which parses no command line.

export function fail(msg: string, code = 1): never {
  process.stderr.write(`logd: ${msg}\n`);
  process.exit(code);
}
