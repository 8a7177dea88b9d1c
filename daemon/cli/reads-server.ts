// `logd reads-server`: the shared store's reads on a private socket, for a client library's reader
// (`logd.Api(store=URL)` starts it as its child; daemon/shared-reads). Not for people: hidden from --help.
// It prints one JSON line, {"target", "token", "where"}, once it serves, and ends when its standard input
// closes (its parent is gone, however it ended), on SIGTERM, or after --idle-ms without a call.
import { Command, Option } from 'commander';
import { openSource } from '../query/index.js';
import { serveSharedReads } from '../shared-reads/server.js';
import { urlFileOption, urlOption, urlFromOptions, type UrlOptions } from './store-url.js';

export function registerReadsServerCommand(program: Command, fail: (msg: string, code?: number) => never): void {
  program
    .command('reads-server', { hidden: true })
    .description('serve the shared store\'s reads on a private socket for a client library (logd.Api(store=...))')
    .addOption(urlOption('store', 'read the shared store'))
    .addOption(urlFileOption('store'))
    .addOption(new Option('--idle-ms <ms>', 'end after this long without a call').default('1800000'))
    .action(async (o: UrlOptions & { idleMs: string }) => {
      let url: string | undefined;
      try {
        url = urlFromOptions('store', o) ?? process.env.LOGD_STORE_URL;
      } catch (e) {
        fail((e as Error).message, 2);
      }
      if (!url) fail('reads-server reads the shared store: give its URL in LOGD_STORE_URL (or --store with ~/.pgpass, or --store-url-file)', 2);
      const idleMs = Number(o.idleMs);
      if (!Number.isFinite(idleMs) || idleMs <= 0) fail(`--idle-ms ${o.idleMs}: give a positive number of milliseconds`, 2);
      const source = await openSource({ store: url }).catch((e: Error) => fail(e.message));
      let last = Date.now();
      const server = await serveSharedReads(source, () => (last = Date.now()));
      let ending = false;
      const end = async (code: number) => {
        if (ending) return;
        ending = true;
        await Promise.race([Promise.all([server.close(), source.close?.()]), new Promise((r) => setTimeout(r, 3000).unref())]);
        process.exit(code);
      };
      process.on('SIGTERM', () => void end(0));
      process.on('SIGINT', () => void end(0));
      process.stdin.on('end', () => void end(0));
      process.stdin.on('error', () => void end(0));
      process.stdin.resume();
      setInterval(() => {
        if (Date.now() - last > idleMs) void end(0);
      }, Math.min(idleMs, 10_000)).unref();
      process.stdout.write(JSON.stringify({ target: server.target, token: server.token, where: source.where }) + '\n');
    });
}
