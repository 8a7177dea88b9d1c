// `logd serve`: the daemon's command, registered on the whole command line (program.ts) and run on its own by
// daemon/cli.ts, which loads this instead of every command's modules when the command is `serve` (what a client
// starts: the daemon's start is the first log()'s wait on a cold node).
import { Option, type Command } from 'commander';
import { fail, intArg, logdProgram } from './common.js';
import { runServe, type ServeFlags } from './serve-run.js';
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
    .action(async (o: ServeFlags & UrlOptions) => {
      await runServe(o, urlOrExit('upload', o));
    });
}

/** `logd serve …` alone: the same command, on a command line that has only it. */
export async function serveMain(): Promise<void> {
  const program = logdProgram();
  registerServeCommand(program);
  await program.parseAsync(process.argv).catch((e: Error) => fail(e.message));
}
