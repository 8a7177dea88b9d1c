// Builds the optional native addon (native/build/Release/logd_native.node)
// with cmake-js when libtorch is installed; otherwise explains what is missing
// and exits 0, so everything else still builds and the native tests skip.
// After a build it loads the addon once, so an ABI or linking problem shows
// up here with its message rather than as a skipped test later.
// See native/README.md.
import { existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';

const torchConfig = ['/usr/share/cmake/Torch/TorchConfig.cmake', '/usr/lib/x86_64-linux-gnu/cmake/Torch/TorchConfig.cmake'];
const addon = 'native/build/Release/logd_native.node';
if (!existsSync('native/CMakeLists.txt')) {
  console.log('native: no native/CMakeLists.txt yet; skipping the addon build');
  process.exit(0);
}
if (!torchConfig.some((p) => existsSync(p)) && !process.env.LOGD_TORCH_PREFIX) {
  console.log('native: libtorch not found; install it with `sudo apt-get install libtorch-dev libgloo-dev` (or set LOGD_TORCH_PREFIX); skipping the addon build');
  process.exit(0);
}
const extra = process.env.LOGD_TORCH_PREFIX ? [`--CDCMAKE_PREFIX_PATH=${process.env.LOGD_TORCH_PREFIX}`] : [];
const r = spawnSync('npx', ['cmake-js', 'compile', '-d', 'native', '-O', 'native/build', ...extra], { stdio: 'inherit' });
if (r.status !== 0) {
  console.error(`native: the addon build failed (exit ${r.status ?? r.signal}); see the compiler output above`);
  process.exit(r.status ?? 1);
}
const probe = spawnSync(process.execPath, ['-e', `const b = require('./${addon}'); console.log('native: built ${addon} (backends: ' + b.buildInfo().backends.join(', ') + ', libtorch ' + b.buildInfo().torchVersion + ')')`], {
  stdio: 'inherit',
});
if (probe.status !== 0) {
  console.error(`native: ${addon} was built but does not load; see the error above (a libtorch ABI mismatch shows up as an undefined symbol)`);
  process.exit(1);
}
