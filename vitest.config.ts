import { defineConfig } from 'vitest/config';

// Integration tests start real processes and measure timing: one file at a time.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    testTimeout: 60_000,
    fileParallelism: false,
  },
});
