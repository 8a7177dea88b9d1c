// Builds dist/addon/malloc_trim.node (addon/): one
// C file against Node-API, with the system C compiler and Node's headers.
// Optional: without a compiler, headers or glibc it says why and exits 0; the
// daemon then runs without trimming (and says so in its log).
import { existsSync, mkdirSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import path from 'node:path';

const src = 'addon/malloc_trim.c';
const out = 'dist/addon/malloc_trim.node';
const cc = process.env.CC || 'cc';
const nodedir = process.env.npm_config_nodedir || path.resolve(path.dirname(process.execPath), '..');
const include = [path.join(nodedir, 'include', 'node'), '/usr/include/node'].find((d) => existsSync(path.join(d, 'node_api.h')));
if (process.platform !== 'linux') {
  console.log('malloc-trim: not Linux; skipping (the daemon runs without trimming)');
  process.exit(0);
}
if (!include) {
  console.log(`malloc-trim: node_api.h not found under ${nodedir}/include/node or /usr/include/node; skipping (the daemon runs without trimming)`);
  process.exit(0);
}
mkdirSync(path.dirname(out), { recursive: true });
const r = spawnSync(cc, ['-O2', '-shared', '-fPIC', `-I${include}`, '-o', out, src], { stdio: 'inherit' });
if (r.error || r.status !== 0) {
  console.log(`malloc-trim: ${cc} failed (${r.error?.message ?? `exit ${r.status}`}); skipping (the daemon runs without trimming)`);
  process.exit(0);
}
const probe = spawnSync(process.execPath, ['-e', `require('./${out}').mallocTrim()`], { stdio: 'inherit' });
if (probe.status !== 0) console.log(`malloc-trim: ${out} was built but does not load; the daemon runs without trimming`);
else console.log(`malloc-trim: built ${out}`);
