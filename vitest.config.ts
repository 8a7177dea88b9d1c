import { defineConfig } from 'vitest/config';

// Native and integration suites start real processes: run files one at a time
// in forked workers, with room for slow rendezvous on small CI machines.
export default defineConfig({
  test: {
    pool: 'forks',
    fileParallelism: false,
    testTimeout: 120_000,
    hookTimeout: 120_000,
  },
});
