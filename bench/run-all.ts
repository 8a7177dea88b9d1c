// `make bench`: every benchmark in turn; each prints its own figures.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const quick = process.argv.includes('--quick') ? ['--quick'] : [];
const benches = ['core.js', 'sampler.js', 'allreduce.js', 'memory.js', 'upload.js', 'ui.js'];
let failed = 0;
for (const b of benches) {
  const file = path.join(here, b);
  if (!existsSync(file)) continue;
  console.log(`\n=== bench/${b.replace('.js', '.ts')} ===`);
  const r = spawnSync(process.execPath, [file, ...quick], { stdio: 'inherit', timeout: 30 * 60_000 });
  if (r.status !== 0) {
    failed++;
    console.log(`bench: ${b} exited with ${r.status ?? r.signal}`);
  }
}
process.exit(failed ? 1 : 0);
