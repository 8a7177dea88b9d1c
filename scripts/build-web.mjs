// Bundles the dashboard's page (web/) into dist/web: app.js (uPlot inside)
// and app.css. `make build` and `npm run build` run it after tsc; the server
// (daemon/ui) serves these files from the package, never from a CDN.
import { build } from 'esbuild';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
try {
  await build({
    entryPoints: [path.join(root, 'web', 'main.ts')],
    outfile: path.join(root, 'dist', 'web', 'app.js'),
    bundle: true,
    format: 'esm',
    target: ['es2020', 'chrome100', 'firefox100', 'safari15'],
    minify: true,
    sourcemap: true,
    legalComments: 'linked',
    logLevel: 'warning',
  });
} catch (e) {
  console.error(`build-web: the dashboard's page did not build: ${e.message}`);
  process.exit(1);
}
