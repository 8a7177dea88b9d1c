import { defineConfig } from 'vitest/config';

// Tests start real daemons and worker processes; on a 2-core machine they run
// one file at a time so timings stay sane.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    testTimeout: 120_000,
    hookTimeout: 60_000,
    fileParallelism: false,
  },
});
