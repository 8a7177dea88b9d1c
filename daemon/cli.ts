#!/usr/bin/env node
// The logd command line. `logd serve` (what a client starts when no daemon runs) loads the daemon's modules alone
// (cli/serve.ts); every other command loads the whole command line (cli/program.ts). Measured: the daemon's
// start to its service file 425 -> 266 ms here, with the lazy loads (bench/RESULTS.md, "The daemon's start").
if (process.argv[2] === 'serve') await (await import('./cli/serve.js')).serveMain();
else await import('./cli/program.js');
