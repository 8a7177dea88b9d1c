// The throwaway PostgreSQL of the tests (shared with bench/upload.ts, which
// needs one too): see bench/pg-cluster.ts.
export * from '../../dist/bench/pg-cluster.js';
