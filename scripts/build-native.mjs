// Builds the optional native addon (native/build/Release/logd_native.node)
// with cmake-js when libtorch is installed; otherwise explains what is missing
// and exits 0, so everything else still builds and the native tests skip.
// The native helper owns the details of this script; see native/README.md.
import { existsSync } from 'node:fs';
import { spawnSync } from 'node:child_process';

const torchConfig = ['/usr/share/cmake/Torch/TorchConfig.cmake', '/usr/lib/x86_64-linux-gnu/cmake/Torch/TorchConfig.cmake'];
if (!existsSync('native/CMakeLists.txt')) {
  console.log('native: no native/CMakeLists.txt yet; skipping the addon build');
  process.exit(0);
}
if (!torchConfig.some((p) => existsSync(p)) && !process.env.LOGD_TORCH_PREFIX) {
  console.log('native: libtorch not found; install it with `sudo apt-get install libtorch-dev libgloo-dev` (or set LOGD_TORCH_PREFIX); skipping the addon build');
  process.exit(0);
}
const r = spawnSync('npx', ['cmake-js', 'compile', '-d', 'native', '-O', 'native/build'], { stdio: 'inherit' });
process.exit(r.status ?? 1);
