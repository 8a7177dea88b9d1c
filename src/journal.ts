// The crash journal's format (docs/journal.md), shared by the TypeScript
// writer (client/journal.ts) and the daemon's reader (daemon/runs/journal.ts).
// The Python writer (python/logd/spool/journal.py) writes the same bytes.

export const JOURNAL_MAGIC = 'LOGDJRN1';
export const JOURNAL_VERSION = 1;
export const HEADER_BYTES = 4096;
export const RECORD_HEADER_BYTES = 16;

/** Header page offsets. */
export const H = {
  magic: 0,
  version: 8,
  checkKind: 12,
  head: 16,
  ackedSeq: 24,
  keysOffset: 32,
  keysBytes: 36,
  ringOffset: 40,
  ringBytes: 44,
  identityLength: 48,
  identityCrc: 52,
  identity: 56,
  notJournaled: 3584,
} as const;
export const MAX_IDENTITY_BYTES = 3000;

export const enum RecordType {
  ROW = 1,
  KEY = 2,
  UPDATE = 3,
  SEAL = 4,
  PAD = 5,
  /** A row naming the same keys, in the same order, as the batch's last ROW: its values without the ids (112 bytes for 10 metrics, not 152). */
  ROW_SAME = 6,
}

export const CHECK_SUM32 = 1;
export const CHECK_CRC32 = 2;

export const SEAL_DROPPED = 1;
export const UPDATE_SUMMARY = 1;
export const UPDATE_CONFIG = 2;
/** Console output (a RecordBatch.console_json entry): journaled as printed, so a line printed just before a kill survives it. */
export const UPDATE_CONSOLE = 3;
/** A histogram, image or text: one logd.v1.Media message (protobuf binary), so a value logged just before a kill survives it. */
export const UPDATE_MEDIA = 4;
/** Media larger than this (an image, in practice) are not journaled: kept in memory only, they would crowd rows out of the ring. */
export const MAX_JOURNALED_MEDIA_BYTES = 4 * 1024 * 1024;

/** A journal larger than this is refused by the reader (a hostile sparse file, say). */
export const MAX_JOURNAL_BYTES = 1024 * 1024 * 1024;

export interface JournalIdentity {
  runId: string;
  runToken: string;
  writerId: string;
  pid: number;
  host: string;
  /** Field 22 of /proc/<pid>/stat when the journal was made (0 when unknown). */
  startTime: number;
  client: 'ts' | 'py' | string;
}

export function journalFileName(runId: string, writerId: string): string {
  return `${runId}--${writerId}.journal`;
}

/** The region layout of a journal of `size` bytes (size a multiple of 8, at least 64 KiB). */
export function journalLayout(size: number): { keysOffset: number; keysBytes: number; ringOffset: number; ringBytes: number } {
  const keysBytes = Math.floor(size / 8 / 8) * 8;
  const ringOffset = HEADER_BYTES + keysBytes;
  return { keysOffset: HEADER_BYTES, keysBytes, ringOffset, ringBytes: size - ringOffset };
}

/**
 * Checksum kind 1: the wrapping 32-bit sum of the little-endian u32 words
 * `u32[from, to)`, xor SUM32_SEED (so a zeroed record never passes). It
 * catches every flipped bit and nearly every damaged byte, costs one add per
 * word (log() pays it for every row), and is not meant against forgery:
 * whoever can write the journal can write any checksum, which is why the
 * daemon checks the run's token instead.
 */
export const SUM32_SEED = 0x5bd1e995;
export function sum32Words(u32: Uint32Array, from: number, to: number): number {
  let a = 0;
  let b = 0;
  let i = from;
  for (; i + 1 < to; i += 2) {
    a = (a + u32[i]) | 0;
    b = (b + u32[i + 1]) | 0;
  }
  if (i < to) a = (a + u32[i]) | 0;
  return ((a + b) ^ SUM32_SEED) >>> 0;
}

export const pad8 = (n: number): number => (n + 7) & ~7;
