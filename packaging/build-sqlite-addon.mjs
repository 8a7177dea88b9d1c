// Builds better-sqlite3's addon (the project's node_modules/better-sqlite3:
// the same version the daemon is tested with) for one Node ABI, from that
// Node's headers, never downloading any: node-gyp runs on that Node itself,
// with --nodedir. Cached as build/sqlite/better_sqlite3-<version>.abi<N>.node;
// checked by loading it with that Node and running a query.
//
//   node packaging/build-sqlite-addon.mjs NODE_BINARY NODEDIR   # NODEDIR holds include/node (node_api.h, common.gypi)
//
// Prints the addon's path. Takes minutes the first time per ABI (SQLite's
// amalgamation is one large C file), and a C/C++ compiler and make: at build
// time only, never where logd is installed.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const [node, nodedir] = process.argv.slice(2).map((p) => (p ? path.resolve(p) : p));
if (!node || !nodedir) {
  console.error('usage: node packaging/build-sqlite-addon.mjs NODE_BINARY NODEDIR');
  process.exit(2);
}
if (!fs.existsSync(path.join(nodedir, 'include', 'node', 'node_api.h'))) {
  console.error(`build-sqlite-addon: ${nodedir}/include/node has no Node headers`);
  process.exit(1);
}
const run = (argv, opts = {}) => spawnSync(argv[0], argv.slice(1), { encoding: 'utf8', ...opts });
const abi = run([node, '-p', 'process.versions.modules']).stdout.trim();
const headerVersion = /define NODE_MODULE_VERSION (\d+)/.exec(fs.readFileSync(path.join(nodedir, 'include', 'node', 'node_version.h'), 'utf8'))?.[1];
if (!abi || (headerVersion && headerVersion !== abi)) {
  console.error(`build-sqlite-addon: ${node} has ABI ${abi || '?'} but the headers in ${nodedir} are for ABI ${headerVersion}`);
  process.exit(1);
}
const src = path.join(root, 'node_modules', 'better-sqlite3');
const version = JSON.parse(fs.readFileSync(path.join(src, 'package.json'), 'utf8')).version;
const outDir = path.join(root, 'build', 'sqlite');
const out = path.join(outDir, `better_sqlite3-${version}.abi${abi}.node`);

function check(file) {
  const probe = `const D = require(${JSON.stringify(path.join(src, 'lib'))}); const db = new D(':memory:', { nativeBinding: process.argv[1] }); db.prepare('select 1').get();`;
  return run([node, '-e', probe, file]);
}

if (!fs.existsSync(out)) {
  const gyp = [
    path.join(path.dirname(path.dirname(fs.realpathSync(spawnSync('sh', ['-c', 'command -v npm'], { encoding: 'utf8' }).stdout.trim() || '/nonexistent/x/x'))), 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'),
    '/usr/lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js',
    path.join(root, 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'),
  ].find((f) => { try { return fs.existsSync(f); } catch { return false; } });
  if (!gyp) {
    console.error('build-sqlite-addon: node-gyp not found (npm ships it); install npm');
    process.exit(1);
  }
  const work = path.join(outDir, `work-abi${abi}`);
  fs.rmSync(work, { recursive: true, force: true });
  fs.mkdirSync(work, { recursive: true });
  for (const part of ['binding.gyp', 'package.json', 'src', 'deps']) fs.cpSync(path.join(src, part), path.join(work, part), { recursive: true });
  const logFile = path.join(outDir, `abi${abi}.log`);
  console.error(`build-sqlite-addon: building better-sqlite3 ${version} for Node ABI ${abi} (headers ${nodedir}); a few minutes, log ${path.relative(root, logFile)}`);
  const started = Date.now();
  const r = run([node, gyp, 'rebuild', '--release', `--nodedir=${nodedir}`, '-j', String(os.availableParallelism?.() ?? 2)], {
    cwd: work, env: { ...process.env, npm_config_nodedir: nodedir }, maxBuffer: 256 * 1024 * 1024,
  });
  fs.writeFileSync(logFile, (r.stdout ?? '') + (r.stderr ?? '') + (r.error ? `\n${r.error.message}\n` : ''));
  const built = path.join(work, 'build', 'Release', 'better_sqlite3.node');
  if (r.status !== 0 || !fs.existsSync(built)) {
    console.error(`build-sqlite-addon: node-gyp failed (a C/C++ compiler and make are needed at build time); see ${logFile}`);
    process.exit(1);
  }
  fs.copyFileSync(built, out);
  fs.rmSync(work, { recursive: true, force: true });
  console.error(`build-sqlite-addon: built in ${Math.round((Date.now() - started) / 1000)} s`);
}
const c = check(out);
if (c.status !== 0) {
  console.error(`build-sqlite-addon: ${out} does not load in ${node}: ${c.stderr}`);
  process.exit(1);
}
console.log(out);
