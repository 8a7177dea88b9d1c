// Bundles the client (dist/client/index.js and every module it imports, all
// of them logd's own or Node's) into one file, and writes what `import 'logd'`
// loads. Run after tsc (`make build`, `npm run build`).
//
//   dist/client/logd.cjs        the bundle (one file instead of twenty: most of what a fresh process paid to import
//                               the modules one by one was Node's ESM loader resolving and reading each of them)
//   dist/client/logd.cjs.cache  V8's code cache of the bundle, made after a whole run (import, init, log, finish
//                               against a throwaway daemon): the functions a first init() and finish() run are in
//                               it compiled, not only the top level. Valid for the Node that made it (V8 checks
//                               its version, flags and the source); any other Node compiles as if there were none.
//   dist/client/logd.js         the module `import 'logd'` loads (package.json "exports"): compiles logd.cjs with
//                               the cache through node:vm and exports its names. LOGD_CODE_CACHE=0 leaves the
//                               cache out; codeCache() says what happened (accepted, rejected, none, off).
//
// Measured (bench/RESULTS.md, "Start-up, fifth look"): a first init()'s CPU 18.8 -> 13.6 ms on this machine.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build } from 'esbuild';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dir = path.join(root, 'dist', 'client');
const bundle = path.join(dir, 'logd.cjs');
const cache = `${bundle}.cache`;
const entry = path.join(dir, 'logd.js');

await build({
  entryPoints: [path.join(dir, 'index.js')],
  outfile: bundle,
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  // The map beside it, no comment in it: the file the cache was made from is the file npm-pack ships.
  sourcemap: 'external',
  // The client finds the daemon's CLI (a sidecar) from its own URL: the loader's, dist/client/logd.js.
  define: { 'import.meta.url': '__logdUrl' },
  // api.historyArrow() loads the program's own apache-arrow, when it has one: never bundled.
  external: ['apache-arrow'],
  logLevel: 'warning',
});

// A script compiled by node:vm has no import(): the one the client makes (apache-arrow) goes through the loader's.
let source = fs.readFileSync(bundle, 'utf8');
const dynamic = 'await import(ARROW)';
if (source.split(dynamic).length !== 2) throw new Error(`bundle-client: expected one \`${dynamic}\` in the bundle; the client changed: update scripts/bundle-client.mjs`);
source = source.replace(dynamic, 'await __logdImport(ARROW)');
const left = source.match(/\bimport\s*\(|import\.meta/);
if (left) throw new Error(`bundle-client: the bundle still uses ${left[0]}, which a node:vm script cannot; route it through the loader`);
fs.writeFileSync(bundle, source);

// The loader exports exactly the client's names (test/client-bundle.test.ts compares them).
const names = Object.keys(await import(pathToFileURL(path.join(dir, 'index.js')).href)).sort();
for (const n of names) if (!/^[A-Za-z_][\w$]*$/.test(n)) throw new Error(`bundle-client: export ${n} is not a plain name without a leading $ (the loader's own names)`);
fs.writeFileSync(entry, `// logd's client, what \`import 'logd'\` loads: the bundle logd.cjs, compiled with V8's code cache of it when
// this Node can use it (made by scripts/bundle-client.mjs; LOGD_CODE_CACHE=0 leaves it out), then its exports.
import $fs from 'node:fs';
import $path from 'node:path';
import $vm from 'node:vm';
import { createRequire as $createRequire } from 'node:module';
import { fileURLToPath as $fileURLToPath } from 'node:url';

// Its own names start with $, which no export of the client does.
const $file = $fileURLToPath(new URL('./logd.cjs', import.meta.url));
const $off = process.env.LOGD_CODE_CACHE === '0';
let $cachedData;
if (!$off) {
  try {
    $cachedData = $fs.readFileSync($file + '.cache');
  } catch {
    /* none: compiled as usual */
  }
}
const $script = new $vm.Script('(function (exports, require, module, __filename, __dirname, __logdUrl, __logdImport, __logdCodeCache) {' + $fs.readFileSync($file, 'utf8') + '\\n})', { filename: $file, cachedData: $cachedData });
const $status = $off ? 'off' : !$cachedData ? 'none' : $script.cachedDataRejected ? 'rejected' : 'accepted';
const $mod = { exports: {} };
$script.runInThisContext()($mod.exports, $createRequire($file), $mod, $file, $path.dirname($file), import.meta.url, (s) => import(s), $status);
// scripts/bundle-client.mjs asks for the cache this way, after a whole run; only a file beside the bundle (a
// variable left in an environment names no other file to write).
const $write = process.env.LOGD_BUILD_CODE_CACHE;
if ($write && $path.dirname($write) === $path.dirname($file) && $path.basename($write).startsWith('logd.cjs.cache.')) process.once('exit', () => $fs.writeFileSync($write, $script.createCachedData()));
const $m = $mod.exports;
${names.map((n) => `export const ${n} = $m.${n};`).join('\n')}
`);

/** Runs the client once, whole, against a throwaway daemon, and keeps V8's code cache of the bundle. */
async function makeCache() {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'logd-bundle-'));
  const env = { ...process.env, LOGD_DIR: path.join(tmp, 'data'), LOGD_RUNTIME_DIR: path.join(tmp, 'rt'), LOGD_QUIET: '1', LOGD_IDLE_TIMEOUT_MS: '60000' };
  for (const k of ['LOGD_SERVICE', 'LOGD_UPLOAD_URL', 'RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'LOGD_CODE_CACHE']) delete env[k];
  const cli = path.join(root, 'dist', 'daemon', 'cli.js');
  const warm = path.join(tmp, 'warm.mjs');
  fs.writeFileSync(warm, `
    const logd = await import(${JSON.stringify(pathToFileURL(entry).href)});
    const run = await logd.init({ project: 'bundle', name: 'code-cache', config: { lr: 0.1 } });
    for (let i = 0; i < 200; i++) run.log({ loss: 1 / (i + 1), acc: i / 200 }, { step: i });
    run.summary.best = 1;
    console.log('a line for the console capture');
    const res = await run.finish();
    if (res.state !== 'finished') throw new Error('the warm-up run ended ' + res.state + ': ' + res.message);
  `);
  const part = `${cache}.${process.pid}`;
  try {
    const r = await new Promise((resolve) => {
      const p = spawn(process.execPath, [warm], { env: { ...env, LOGD_BUILD_CODE_CACHE: part }, stdio: ['ignore', 'ignore', 'pipe'] });
      let err = '';
      p.stderr.on('data', (d) => (err += d));
      const timer = setTimeout(() => p.kill('SIGKILL'), 60_000);
      p.on('exit', (code, signal) => (clearTimeout(timer), resolve({ code, signal, err })));
    });
    if (r.code !== 0 || !fs.existsSync(part)) throw new Error(`the warm-up run exited ${r.code ?? r.signal}: ${r.err.trim().split('\n').slice(-3).join(' | ')}`);
    fs.renameSync(part, cache);
    return fs.statSync(cache).size;
  } finally {
    spawnSync(process.execPath, [cli, 'stop'], { env, stdio: 'ignore', timeout: 30_000 });
    fs.rmSync(part, { force: true });
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

fs.rmSync(cache, { force: true }); // a stale cache would be rejected anyway; none is clearer
fs.rmSync(`${entry}.map`, { force: true }); // the map of logd.js when it was the bundle (logd.cjs.map now)
try {
  const bytes = await makeCache();
  console.log(`bundle-client: ${path.relative(root, entry)}, ${path.relative(root, bundle)} and its code cache (${(bytes / 1024).toFixed(0)} kB, Node ${process.version})`);
} catch (e) {
  // The client works without it (compiled as usual): the build goes on, and says why there is none.
  console.error(`bundle-client: no code cache for the client (${e.message}); it loads without one`);
}
