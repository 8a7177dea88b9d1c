// Builds dist/addon/logd_addon.node (addon/): one C file against Node-API,
// with the system C compiler and Node's headers. Optional: without a
// compiler, headers or glibc it says why and exits 0; the daemon then runs
// without trimming and the client without its crash journal (each says so).
import { existsSync, mkdirSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import path from 'node:path';

const src = 'addon/logd_addon.c';
const out = 'dist/addon/logd_addon.node';
const cc = process.env.CC || 'cc';
const nodedir = process.env.npm_config_nodedir || path.resolve(path.dirname(process.execPath), '..');
const include = [path.join(nodedir, 'include', 'node'), '/usr/include/node'].find((d) => existsSync(path.join(d, 'node_api.h')));
if (process.platform !== 'linux') {
  console.log('addon: not Linux; skipping (the daemon runs without trimming, the client without its crash journal)');
  process.exit(0);
}
if (!include) {
  console.log(`addon: node_api.h not found under ${nodedir}/include/node or /usr/include/node; skipping (the daemon runs without trimming, the client without its crash journal)`);
  process.exit(0);
}
mkdirSync(path.dirname(out), { recursive: true });
const r = spawnSync(cc, ['-O2', '-shared', '-fPIC', `-I${include}`, '-o', out, src, '-lpthread'], { stdio: 'inherit' });
if (r.error || r.status !== 0) {
  console.log(`addon: ${cc} failed (${r.error?.message ?? `exit ${r.status}`}); skipping (the daemon runs without trimming, the client without its crash journal)`);
  process.exit(0);
}
const probe = spawnSync(process.execPath, ['-e', `const a=require('./${out}'); a.mallocTrim(); a.unmap(a.mapFile(require('fs').openSync('/dev/zero','r+'),4096))`], { stdio: 'inherit' });
if (probe.status !== 0) console.log(`addon: ${out} was built but does not load; the daemon runs without trimming, the client without its crash journal`);
else console.log(`addon: built ${out}`);
