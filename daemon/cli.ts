#!/usr/bin/env node
// The logd command line. `logd serve` (what a client starts when no daemon runs) loads the daemon's modules alone
// (cli/serve.ts); every other command loads the whole command line (cli/program.ts). Measured: the daemon's
// start to its service file 425 -> 266 ms here, with the lazy loads (bench/RESULTS.md, "The daemon's start").
// `logd serve --sidecar`, exactly the command a client starts, parses nothing: it is the sidecar's defaults.
const args = process.argv.slice(2);
if (args.length === 2 && args[0] === 'serve' && args[1] === '--sidecar') await (await import('./cli/serve-run.js')).runServe({ sidecar: true, host: '127.0.0.1' }, undefined);
else if (args[0] === 'serve') await (await import('./cli/serve.js')).serveMain();
else await import('./cli/program.js');
