import { defineConfig } from 'vitest/config';

// Tests start real daemons, worker processes and process groups; on a 2-core
// machine they run one file at a time, in forked workers, with room for slow
// rendezvous.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    testTimeout: 120_000,
    hookTimeout: 120_000,
    fileParallelism: false,
  },
});
