import { defineConfig } from 'vitest/config';

// Tests start real daemons, worker processes and process groups; on a 2-core
// machine they run one file at a time, in forked workers, with room for slow
// rendezvous.
//
// Two sets (LOGD_TESTS): `make test` runs `fast` (about 8 minutes of tests on
// the 2-core machine), `make test-slow` runs `slow`, and `.ci/run` runs both;
// plain `npx vitest run` runs every file. Slow: whatever kills, floods or
// restarts real processes at length (the chaos suites, the crash-journal kill
// matrix, rank health under load), the shared store's suites (a throwaway
// PostgreSQL each), the packages (a wheel and a tarball installed), native and
// Python DDP, the browser, and any other file that takes over 15 s there
// (measured in CI's log; bench/RESULTS.md is for speed figures, not this).
const SLOW = [
  'test/chaos-*.test.ts', 'test/fuzz.test.ts', 'test/journal/kill.test.ts', 'test/liveness.test.ts', 'test/reach.test.ts',
  'test/upload/*.test.ts', 'test/pg/*.test.ts', 'test/packaging/*.test.ts', 'test/native/*.test.ts',
  'test/python/{health,ddp,reach,rewind,documented,journal,media}.test.ts',
  'test/health/{rate,gloo-kill}.test.ts', 'test/ui/{health,browser,many-ranks,explore}.test.ts', 'test/story/{torchrun-faults,two-nodes}.test.ts', 'test/alerts/alerts.test.ts',
  'test/examples.test.ts', 'test/sampler/sampler.test.ts', 'test/console/console.test.ts', 'test/system.test.ts',
  'test/manage-runs.test.ts',
];
const set = process.env.LOGD_TESTS ?? 'all';
if (!['all', 'fast', 'slow'].includes(set)) throw new Error(`LOGD_TESTS=${set}: use fast, slow or all`);

export default defineConfig({
  test: {
    include: set === 'slow' ? SLOW : ['test/**/*.test.ts'],
    exclude: set === 'fast' ? ['**/node_modules/**', ...SLOW] : ['**/node_modules/**'],
    pool: 'forks',
    testTimeout: 120_000,
    hookTimeout: 120_000,
    fileParallelism: false,
  },
});
