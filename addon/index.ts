// The one module that loads logd's small C addon (addon/logd_addon.c), built
// by `make build` (scripts/build-addon.mjs) with the C compiler that
// better-sqlite3 already needs. Everything in it is optional: without it,
// `mallocTrim()` does nothing and the client runs without its crash journal,
// and each says so once.
//
// - Giving freed memory back to the system (glibc's malloc_trim). After a
//   flood, most of what the daemon allocated is free again but stays in its
//   RSS: glibc returns only the top of its heap, and the short-lived record
//   buffers of many streams leave the free space scattered below live blocks
//   (measured: 112 MB RSS fell to 79 MB with one malloc_trim(0)).
// - Mapping a file into memory (MAP_SHARED), for the client's crash journal
//   (docs/journal.md): Node has no mmap.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

interface Binding {
  mallocTrim: () => boolean;
  mapFile: (fd: number, length: number) => ArrayBuffer;
  unmap: (buffer: ArrayBuffer) => void;
  reserve: (fd: number, length: number) => void;
  mappingLost: (buffer: ArrayBuffer) => boolean;
}

let binding: Binding | null | undefined;
let why = '';

function load(): Binding | null {
  if (binding !== undefined) return binding;
  // '../addon/…' resolves to dist/addon/ from dist/addon/index.js and from the client's bundle in dist/client/.
  try {
    binding = require('../addon/logd_addon.node') as Binding;
  } catch (e) {
    binding = null;
    why = (e as Error).message.split('\n')[0];
  }
  return binding;
}

/** Why the addon is unavailable, or null when it works here. */
export function addonUnavailable(): string | null {
  return load() ? null : `logd's C addon is not built (${why}); run \`make build\` with a C compiler`;
}

/** Why trimming is unavailable, or null when it works here. */
export function mallocTrimUnavailable(): string | null {
  return addonUnavailable();
}

/** Releases free heap pages to the system; false when nothing could be released or trimming is unavailable. */
export function mallocTrim(): boolean {
  return load()?.mallocTrim() ?? false;
}

/** A MAP_SHARED, read-write mapping of the first `length` bytes of `fd`; null when the addon is unavailable. Throws on mmap errors. */
export function mapFile(fd: number, length: number): ArrayBuffer | null {
  const b = load();
  return b ? b.mapFile(fd, length) : null;
}

/** Gives the first `length` bytes of `fd` their blocks now (posix_fallocate); throws (code ENOSPC, …) when it cannot. */
export function reserve(fd: number, length: number): void {
  const b = load();
  if (!b) throw new Error(addonUnavailable()!);
  b.reserve(fd, length);
}

/** Unmaps a buffer from mapFile() now (its typed arrays become empty). */
export function unmap(buffer: ArrayBuffer): void {
  load()?.unmap(buffer);
}

/**
 * Whether a mapping from mapFile() lost its file: it was truncated under it, and the addon's SIGBUS handler put
 * anonymous memory in its place so that the process lived on (addon/logd_addon.c). Stores into it still work;
 * they just no longer reach the file.
 */
export function mappingLost(buffer: ArrayBuffer): boolean {
  return load()?.mappingLost?.(buffer) ?? false;
}
