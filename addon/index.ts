// Giving freed memory back to the system (glibc's malloc_trim). After a
// flood, most of what the daemon allocated is free again but stays in its
// RSS: glibc returns only the top of its heap, and the short-lived record
// buffers of many streams leave the free space scattered below live blocks
// (measured: 112 MB RSS fell to 79 MB with one malloc_trim(0)). Node has no
// API for it, so this folder holds a one-function C addon, built by
// `make build` (scripts/build-malloc-trim.mjs) with the C compiler that
// better-sqlite3 already needs. It is optional: without it (no compiler, not
// glibc), `mallocTrim()` does nothing and says so once.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

let binding: { mallocTrim: () => boolean } | null | undefined;
let why = '';

function load(): { mallocTrim: () => boolean } | null {
  if (binding !== undefined) return binding;
  try {
    binding = require('./malloc_trim.node') as { mallocTrim: () => boolean };
  } catch (e) {
    binding = null;
    why = (e as Error).message.split('\n')[0];
  }
  return binding;
}

/** Why trimming is unavailable, or null when it works here. */
export function mallocTrimUnavailable(): string | null {
  return load() ? null : `the malloc-trim addon is not built (${why}); run \`make build\``;
}

/** Releases free heap pages to the system; false when nothing could be released or trimming is unavailable. */
export function mallocTrim(): boolean {
  return load()?.mallocTrim() ?? false;
}
