// Bundles the daemon and the `logd` command (dist/daemon/cli.js, tsc's output,
// with every module it imports: logd's own and node_modules' pure JavaScript)
// for the wheel, into OUT/dist/daemon/: cli.js, the encoder thread's
// encode-worker.js, the checkpoint reader's seal-worker.js, the history reads'
// read-worker.js, and a few chunks (esbuild's code splitting: what a command
// loads later with `await import()`, the daemon proper for `serve`, stays out
// of `logd runs`' start-up). Native addons are not bundled: the caller puts
// better_sqlite3.node next to cli.js and logd_addon.node in OUT/dist/addon/.
//
// OUT mirrors the places the code finds things relative to its own file, so
// no source changes for the bundle: OUT/dist/addon/ ('../addon/' from the
// daemon), OUT/web/ (the dashboard's page: '../../web' from daemon/ui),
// OUT/proto/ (found walking up), OUT/dist/daemon/cli.js (the client's path to
// the CLI for a sidecar: '../daemon/cli.js'). OUT/package.json says "type":
// "module".
//
//   node packaging/bundle-daemon.mjs OUT [--version V] [--protocol N]
//
// --version/--protocol replace LOGD_VERSION/PROTOCOL_VERSION in the bundle
// only (test/packaging builds a second wheel of another version with them).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const out = args[0];
if (!out) {
  console.error('usage: node packaging/bundle-daemon.mjs OUT [--version V] [--protocol N]');
  process.exit(2);
}
const flag = (name) => {
  const i = args.indexOf(name);
  return i > 0 ? args[i + 1] : undefined;
};
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const version = flag('--version') ?? pkg.version;
const protocol = flag('--protocol');

const entry = path.join(root, 'dist', 'daemon', 'cli.js');
const worker = path.join(root, 'dist', 'daemon', 'upload', 'encode-worker.js');
const sealWorker = path.join(root, 'dist', 'daemon', 'store', 'seal-worker.js');
const readWorker = path.join(root, 'dist', 'daemon', 'reads', 'read-worker.js');
for (const f of [entry, worker, sealWorker, readWorker, path.join(root, 'dist', 'web', 'app.js')]) {
  if (!fs.existsSync(f)) {
    console.error(`bundle-daemon: ${path.relative(root, f)} is missing; run \`make build\` first`);
    process.exit(1);
  }
}

/** Replaces `from` by `to` in one module of the bundle; fails the build when `from` is not there (the source moved on). */
function replaceIn(file, from, to) {
  return {
    name: `replace-${path.basename(file)}`,
    setup(b) {
      b.onLoad({ filter: new RegExp(file.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&') + '$') }, async (a) => {
        const text = await fs.promises.readFile(a.path, 'utf8');
        if (!from.test(text)) throw new Error(`bundle-daemon: ${from} not found in ${a.path}`);
        return { contents: text.replace(from, to), loader: 'js' };
      });
    },
  };
}

// The version of better-sqlite3 bundled (its JavaScript) and built (its addon): the project's own.
const SQLITE_VERSION = JSON.parse(fs.readFileSync(path.join(root, 'node_modules', 'better-sqlite3', 'package.json'), 'utf8')).version;
// `load`, an alias of require: esbuild would read require('./' + x) as "every file in the folder".
const SQLITE_SHIM = `
const load = require;
module.exports = () => {
  const abi = process.versions.modules;
  if (Number(abi) >= 137) {
    throw new Error('Node ' + process.version + ' is not supported: the better-sqlite3 ${SQLITE_VERSION} inside logd aborts on Node 24 ' +
      '(Assertion failed: (env) != nullptr, WiseLibs/better-sqlite3#1515). Run logd with Node 20 or 22');
  }
  try {
    return load('./better_sqlite3.abi' + abi + '.node');
  } catch (e) {
    if (e.code !== 'MODULE_NOT_FOUND') throw e;
  }
  try {
    return load('better-sqlite3/build/Release/better_sqlite3.node');
  } catch (e) {
    if (e.code !== 'MODULE_NOT_FOUND') throw e;
  }
  const fs = load('node:fs'), path = load('node:path');
  const here = path.dirname(load.resolve('./cli.js'));
  const built = fs.readdirSync(here).map((f) => /^better_sqlite3\\.abi(\\d+)\\.node$/.exec(f)?.[1]).filter(Boolean);
  throw new Error('no SQLite addon for Node ' + process.version + ' (ABI ' + abi + ') in ' + here + ' (it has ' +
    (built.length ? 'ABI ' + built.join(', ') : 'none') + '): run logd with a Node of one of those ABIs (' +
    'ABI 115 is Node 20, 127 Node 22), or install better-sqlite3@${SQLITE_VERSION} next to logd (npm install better-sqlite3@${SQLITE_VERSION}, which compiles it)');
};
`;

const plugins = [
  // better-sqlite3 finds its addon through `bindings`, which searches from the
  // caller's file on disk. In the bundle the addons lie next to cli.js, one per
  // Node ABI they were built for: better_sqlite3.abi<N>.node. Without one for
  // the running Node, a better-sqlite3 installed next to the package (npm
  // install better-sqlite3, which compiles it) is used; else the error says so.
  {
    name: 'better-sqlite3-binding',
    setup(b) {
      b.onResolve({ filter: /^bindings$/ }, () => ({ path: 'bindings', namespace: 'logd-bindings' }));
      b.onLoad({ filter: /.*/, namespace: 'logd-bindings' }, () => ({
        contents: SQLITE_SHIM,
        loader: 'js',
      }));
    },
  },
  replaceIn('src/version.js', /LOGD_VERSION = '[^']*'/, `LOGD_VERSION = ${JSON.stringify(version)}`),
  // launcher/main.js runs `logd launch` when it is the program itself (import.meta.url is argv[1]);
  // inside the bundle it shares cli.js's URL, so that test would take every command for `launch`.
  replaceIn('launcher/main.js', /import\.meta\.url === pathToFileURL\(process\.argv\[1\][^)]*\)\.href/, 'false'),
];
if (protocol) plugins.push(replaceIn('src/config.js', /PROTOCOL_VERSION = \d+/, `PROTOCOL_VERSION = ${Number(protocol)}`));

fs.rmSync(path.join(out, 'dist'), { recursive: true, force: true });
const result = await build({
  entryPoints: { main: entry, 'encode-worker': worker, 'seal-worker': sealWorker, 'read-worker': readWorker },
  outdir: path.join(out, 'dist', 'daemon'),
  bundle: true,
  splitting: true,
  chunkNames: 'chunk-[hash]',
  platform: 'node',
  format: 'esm',
  target: 'node20',
  minifySyntax: true,
  // CommonJS packages inside an ES module bundle call require(): give them one,
  // resolving from the bundle's own folder (the .node addons lie there).
  banner: { js: "import { createRequire as __logdCreateRequire } from 'node:module'; const require = __logdCreateRequire(import.meta.url);" },
  external: ['*.node', 'pg-native'],
  legalComments: 'linked',
  logLevel: 'warning',
  metafile: true,
  plugins,
});

// The licences of the npm packages inside the bundle (and of better-sqlite3's SQLite, in the addons), in one file.
const pkgDirs = new Set();
for (const input of Object.keys(result.metafile.inputs)) {
  const m = /^(.*node_modules\/(?:@[^/]+\/)?[^/]+)\//.exec(input);
  if (m) pkgDirs.add(path.resolve(root, m[1]));
}
pkgDirs.add(path.join(root, 'node_modules', 'better-sqlite3'));
let notices = `Third-party software in logd ${version}'s bundled daemon (packaging/bundle-daemon.mjs).\n` +
  'better_sqlite3.abi*.node holds better-sqlite3 (below) and SQLite, which is in the public domain.\n';
for (const dir of [...pkgDirs].sort()) {
  const meta = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
  const file = fs.readdirSync(dir).find((f) => /^(licen[cs]e|copying)/i.test(f));
  notices += `\n${'='.repeat(78)}\n${meta.name} ${meta.version} (${meta.license ?? 'see below'})\n${'='.repeat(78)}\n`;
  notices += file ? fs.readFileSync(path.join(dir, file), 'utf8').trim() + '\n' : `(no licence file in the package; its package.json says ${meta.license})\n`;
}
fs.writeFileSync(path.join(out, 'THIRD_PARTY_LICENSES.txt'), notices);

// The dashboard's page, the wire's .proto, and what makes .js files ES modules here.
fs.mkdirSync(path.join(out, 'web'), { recursive: true });
for (const f of ['app.js', 'app.css']) fs.copyFileSync(path.join(root, 'dist', 'web', f), path.join(out, 'web', f));
for (const f of fs.readdirSync(path.join(root, 'dist', 'web'))) {
  if (f.endsWith('.LEGAL.txt')) fs.copyFileSync(path.join(root, 'dist', 'web', f), path.join(out, 'web', f));
}
fs.mkdirSync(path.join(out, 'proto', 'logd', 'v1'), { recursive: true });
fs.copyFileSync(path.join(root, 'proto', 'logd', 'v1', 'logd.proto'), path.join(out, 'proto', 'logd', 'v1', 'logd.proto'));
fs.writeFileSync(path.join(out, 'package.json'), JSON.stringify({ name: 'logd-bundled-daemon', version, private: true, type: 'module' }, null, 2) + '\n');
// cli.js: turns on Node's compile cache (Node >= 22.1; nothing on 20) before the CLI's modules load, so a
// sidecar's start skips compiling them again (measured: `serve` to its service file 230 -> 200 ms). The
// cache is the user's own (XDG_CACHE_HOME or ~/.cache, logd/node-compile-cache); Node checks each entry
// against the source it caches, and a cache it cannot write is no error.
fs.writeFileSync(path.join(out, 'dist', 'daemon', 'cli.js'), `#!/usr/bin/env node
// The \`logd\` command of logd ${version}: main.js and its chunks, bundled by packaging/bundle-daemon.mjs.
import module from 'node:module';
import os from 'node:os';
import path from 'node:path';
if (module.enableCompileCache && !process.env.NODE_COMPILE_CACHE && process.env.LOGD_COMPILE_CACHE !== '0') {
  try {
    const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
    module.enableCompileCache(path.join(base, 'logd', 'node-compile-cache'));
  } catch {
    /* no cache, no harm */
  }
}
await import('./main.js');
`, { mode: 0o755 });
const files = fs.readdirSync(path.join(out, 'dist', 'daemon'));
const bytes = files.reduce((n, f) => n + fs.statSync(path.join(out, 'dist', 'daemon', f)).size, 0);
console.log(`bundle-daemon: ${files.length} files, ${(bytes / 1e6).toFixed(1)} MB in ${path.join(out, 'dist', 'daemon')} (logd ${version}${protocol ? `, wire protocol ${protocol}` : ''})`);
