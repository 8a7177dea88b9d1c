// `logd ui`: serves the dashboard (daemon/ui) on the local store, through the
// node's daemon, or on the shared store with --store.
import type { Command } from 'commander';
import { InvalidArgumentError } from 'commander';
import { daemonTunables, resolvePaths } from '../../src/config.js';
import { parseStoreUrl } from '../upload/url.js';
import { openSource } from '../query/index.js';
import { urlOption, urlFileOption, urlOrExit, type UrlOptions } from './store-url.js';

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);

function portArg(v: string): number {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError('--port must be an integer from 0 to 65535');
  return n;
}

export function registerUiCommand(program: Command, fail: (msg: string, code?: number) => never): void {
  program
    .command('ui')
    .description('serve the dashboard: a live web page of runs, groups and every GPU (prints the URL to open)')
    .option('--port <n>', 'TCP port (0 picks a free one)', portArg, 7321)
    .option('--host <addr>', 'address to bind', '127.0.0.1')
    .option('--allow-remote', 'allow --host to be a non-loopback address (anyone who can reach it and has the token sees every run)')
    .addOption(urlOption('store', 'show the shared PostgreSQL store instead of the local one'))
    .addOption(urlFileOption('store'))
    .action(async (o: { port: number; host: string; allowRemote?: boolean } & UrlOptions) => {
      const store = urlOrExit('store', o);
      if (!LOOPBACK.has(o.host) && !o.allowRemote) {
        fail(`--host ${o.host} is not a loopback address; add --allow-remote to serve the dashboard beyond this machine`, 2);
      }
      if (!LOOPBACK.has(o.host)) {
        process.stderr.write(`logd: WARNING: the dashboard listens on ${o.host}, beyond this machine; anyone who can reach it with the token sees every run (plain HTTP: put it behind TLS or an SSH tunnel)\n`);
      }
      const log = (l: string) => process.stderr.write(`logd: ${l}\n`);
      // The source outlives daemons: when the node's daemon goes away (killed,
      // restarted, an on-demand daemon that stopped), the next call finds or starts a new one.
      const source = await openSource({ store, onReconnect: (why) => log(`ui: ${why}`) }).catch((e: Error) => fail(e.message));
      const { startUi } = await import('../ui/server.js');
      // Saved views live beside the store shown: views.json in the data dir, or the shared store's logd_views table.
      const views = store || process.env.LOGD_STORE_URL
        ? new (await import('../views/shared.js')).SharedViews(parseStoreUrl(store || process.env.LOGD_STORE_URL!))
        : new (await import('../views/file.js')).FileViews(resolvePaths().dataDir);
      // The node's alerts (its daemon's outbox) are listed on the run and group pages, of either store.
      const ui = await startUi({ source, port: o.port, host: o.host, log, views, alertsDataDir: resolvePaths().dataDir }).catch((e: NodeJS.ErrnoException) =>
        fail(e.code === 'EADDRINUSE' ? `port ${o.port} on ${o.host} is in use; pick another with --port (0 picks a free one)` : e.message));
      // A daemon started on demand stops when no call comes for a while: the
      // dashboard calls now and then so that it keeps serving while open.
      if (source.keepAlive) {
        const every = Math.max(250, Math.min(5000, daemonTunables().idleTimeoutMs / 3));
        setInterval(() => void source.keepAlive!().catch(() => {}), every);
        await source.keepAlive().catch(() => {});
      }
      console.log(`logd: dashboard of ${source.where}`);
      console.log(`open ${ui.url}`);
      const stop = () => void ui.close().then(() => process.exit(0));
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    });
}
