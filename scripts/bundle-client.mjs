// Bundles the client (dist/client/index.js and every module it imports, all
// of them logd's own or Node's) into one file, dist/client/logd.js, which
// `import 'logd'` loads. One file instead of twenty cuts what a fresh process
// pays to import logd by about a third: most of that cost is Node's ESM loader
// resolving and reading each module. Run after tsc (`make build`, `npm run build`).
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
await build({
  entryPoints: [path.join(root, 'dist', 'client', 'index.js')],
  // Next to index.js: paths the client takes from import.meta.url (the daemon's CLI for a sidecar) stay right.
  outfile: path.join(root, 'dist', 'client', 'logd.js'),
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  sourcemap: true,
  // api.historyArrow() loads the program's own apache-arrow, when it has one: never bundled.
  external: ['apache-arrow'],
  logLevel: 'warning',
});
