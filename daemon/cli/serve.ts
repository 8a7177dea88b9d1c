// `logd serve`: the daemon's command, registered on the whole command line (program.ts) and run on its own by
// daemon/cli.ts, which loads this instead of every command's modules when the command is `serve` (what a client
// starts: the daemon's start is the first log()'s wait on a cold node).
import path from 'node:path';
import { Option, type Command } from 'commander';
import { resolvePaths, daemonTunables } from '../../src/config.js';
import { fail, intArg, logdProgram } from './common.js';
import { urlOption, urlFileOption, urlOrExit, type UrlOptions } from './store-url.js';

export function registerServeCommand(program: Command): void {
  program
    .command('serve')
    .description('run the daemon for this node in the foreground (Unix socket; TCP with --port)')
    .option('--port <n>', 'also listen on TCP (0 picks a free port); every call then needs the token', intArg('--port'))
    .option('--host <addr>', 'TCP address to bind', '127.0.0.1')
    .option('--allow-remote', 'allow --host to be a non-loopback address')
    .option('--sample-interval <ms>', 'system-metric sampling interval in ms (0: off; default LOGD_SAMPLE_INTERVAL_MS or 2000)', intArg('--sample-interval'))
    .addOption(urlOption('upload', 'upload every run to the shared PostgreSQL store'))
    .addOption(urlFileOption('upload'))
    .option('--on-stall <cmd>', 'run this shell command when a rank or a job stalls, the event as JSON on stdin (default LOGD_ON_STALL; killed after LOGD_ON_STALL_TIMEOUT_MS)')
    .option('--alerts <file>', 'the alerts file: sinks, filters and rules (docs/alerts.md; default LOGD_ALERTS)')
    .addOption(new Option('--sidecar', 'exit when idle (used when a client auto-starts the daemon)').hideHelp())
    .action(async (o: { port?: number; host: string; allowRemote?: boolean; sidecar?: boolean; sampleInterval?: number; onStall?: string; alerts?: string } & UrlOptions) => {
      const uploadUrl = urlOrExit('upload', o);
      // The file names the sinks (its URLs stay in it, or in the variables it names): only its path is on argv.
      if (o.alerts) process.env.LOGD_ALERTS = path.resolve(o.alerts);
      // The lock first: a daemon that loses the start race exits before loading the daemon proper.
      const { acquireLockWhenFree, refuseSecondDaemon } = await import('../process/lock.js');
      const paths = resolvePaths();
      process.umask(0o077);
      let lock;
      try {
        // A daemon that is stopping hands the lock over: wait for it (at most its own stop deadline and 2 s).
        lock = await acquireLockWhenFree(paths, daemonTunables().shutdownTimeoutMs + 2000);
      } catch (e) {
        fail((e as Error).message);
      }
      if (!lock) refuseSecondDaemon(paths, (line) => process.stderr.write(`${new Date().toISOString()} ${line}\n`));
      const { serve } = await import('../daemon.js');
      try {
        await serve({ sidecar: !!o.sidecar, port: o.port ?? null, host: o.host, allowRemote: !!o.allowRemote, sampleIntervalMs: o.sampleInterval, uploadUrl, onStall: o.onStall }, paths, lock);
      } catch (e) {
        fail((e as Error).message);
      }
    });
}

/** `logd serve …` alone: the same command, on a command line that has only it. */
export async function serveMain(): Promise<void> {
  const program = logdProgram();
  registerServeCommand(program);
  await program.parseAsync(process.argv).catch((e: Error) => fail(e.message));
}
