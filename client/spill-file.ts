// Writing a spill file (src/spill.ts's format): the batches a process could
// not hand to the daemon before it ended, written synchronously (it runs at
// exit) to a temp name and renamed into place, so a reader never sees half a
// file. The writer (client/writer.ts) decides what goes in; this file only
// writes it, or says exactly how many rows are lost.
import fs from 'node:fs';
import path from 'node:path';
import { decode } from './transport/codec.js';
import { encodeFrame } from '../src/frames.js';
import { SPILL_BATCH, SPILL_HEADER, type SpillHeader } from '../src/spill.js';
import type { Sealed } from './overflow.js';
import { resolvePaths } from '../src/config.js';
import { deferredFallbackDir } from '../src/deferred.js';

/** Records that could not be handed to the daemon, not even through a spill file: `rows` of them are lost. */
export class SpillError extends Error {
  override name = 'SpillError';
  constructor(message: string, readonly rows: number) {
    super(message);
  }
}

/** Writes `header` and `batches` (as encoded for the stream) to `dir/name`; throws a SpillError counting the rows lost. */
export function writeSpillFile(dir: string, name: string, header: SpillHeader, batches: Sealed[], droppedBefore: number): string {
  const frames = [encodeFrame(SPILL_HEADER, [Buffer.from(JSON.stringify(header))])];
  for (const s of batches) frames.push(encodeFrame(SPILL_BATCH, [s.bytes]));
  const file = path.join(dir, name);
  const tmp = `${file}.${process.pid}.tmp`;
  try {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    fs.writeFileSync(tmp, Buffer.concat(frames), { mode: 0o600 });
    fs.renameSync(tmp, file);
  } catch (e) {
    try {
      fs.rmSync(tmp, { force: true }); // no half-written temp file left behind
    } catch {
      /* the directory itself is unusable */
    }
    const rows = batches.reduce((n, s) => n + ((decode('WriteRequest', s.bytes) as { batch?: { rows?: number } | null }).batch?.rows ?? 0), 0);
    throw new SpillError(`run ${header.runId}: ${rows} unsent rows could not be written to ${file} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}) and are lost${droppedBefore ? `, besides ${droppedBefore} rows dropped before` : ''}`, rows);
  }
  return file;
}

/** The other place a spill can go when `dir` refuses it (a full disk): the user's private fallback for this data dir. */
export function spillFallback(dir: string): string | null {
  const fallback = deferredFallbackDir(resolvePaths().dataDir);
  return path.resolve(fallback) === path.resolve(dir) ? null : fallback;
}
