// Checkpoints: a run's replayed state written into its own record log, so
// that continuing a run with a million rows does not read a million rows.
//
// When the daemon closes a run's log (the run final, or killed by a daemon
// stop) it appends a CHECKPOINT frame holding everything replay builds from
// the frames before it (replay.ts ReplayState), then a CHECKPOINT_AT frame: a
// fixed-size pointer to that checkpoint. A replay reads the log's last 33
// bytes; when they are a valid pointer, and the checkpoint it names passes
// every check below, the replay starts from the checkpoint's state and reads
// only the frames after it. Anything else (an old log without one, a daemon
// that died before it closed the log, a frame that fails its checksum, a
// pointer past the end of the file, a state that does not parse or does not
// add up) is not an error: the replay reads the whole log, as before.
//
// Why a pointer at the end of the log rather than only the index or a file
// beside the log: the log stays the one source of truth (a copied, uploaded
// or rebuilt log keeps its checkpoints, nothing else can disagree with it),
// and only the daemon writes the last frame of a log it closed. Client data
// cannot pose as a pointer: the pointer ends in 0xff, which no JSON frame's
// payload can end with (UTF-8 never holds the byte) and a HISTORY frame's only
// with a key id of 0xff000000 or more; its CRC must match too, and the RUN
// frame at offset 0 must name the same run. The pointer is not searched for
// anywhere but at the very end (a search could find one inside a client's
// values). A log being appended to no longer ends with its pointer; the index
// remembers where its checkpoint was (Store.replay), as a hint checked the
// same way. A checkpoint is not written again when the frames since the last
// one are fewer bytes than it (seal.ts): then only a new pointer to the last
// one is, so checkpoints never outweigh the log.
//
// What is not checked: the frames before a valid checkpoint are not read
// again, so damage that appears in them later is found by the next whole
// read (Store.verify, a history read), not by the replay.
//
// CHECKPOINT payload (little-endian):
//    0  u32  version (1)
//    4  u32  J: bytes of the JSON part
//    8  u32  N: key ids the summary holds
//   12  u32  0
//   16  J bytes of JSON (CheckpointData without the summary's columns), zero-padded to a multiple of 8
//   ..  f64 x N each: last, min, max, count per key id (RunSummary.snapshot)
// CHECKPOINT_AT payload: f64 the CHECKPOINT frame's offset, u32 its payload
// length, u32 version (1), 8 bytes of magic ending in 0xff.
import fs from 'node:fs';
import { FRAME_HEADER_BYTES, MAX_FRAME_BYTES, readFrame, type DamagedRegion } from '../../src/frames.js';
import { FrameType, type Attempt, type FinalState, type MediaIndex, type RunMeta, type WriterMeta } from './format.js';
import type { SummarySnapshot } from './summary.js';
import type { WriterPlacement } from './timeline.js';

const VERSION = 1;
const HEAD = 16;
const POINTER_PAYLOAD = 24;
/** A whole CHECKPOINT_AT frame: what a replay reads from the end of a log. */
export const POINTER_FRAME_BYTES = FRAME_HEADER_BYTES + POINTER_PAYLOAD;
const MAGIC = Buffer.from([0x00, 0x6c, 0x6f, 0x67, 0x64, 0x43, 0x4b, 0xff]); // "\0logdCK\xff"

/** Where a CHECKPOINT frame is: its file offset and payload length. */
export interface CheckpointRef { offset: number; length: number }

/** Everything a replay builds from the frames before a checkpoint (replay.ts ReplayState), and what the read of them found. */
export interface CheckpointData {
  meta: RunMeta;
  keys: string[];
  writers: WriterMeta[];
  maxSeq: number[];
  summary: SummarySnapshot;
  userSummary: Record<string, unknown>;
  config: Record<string, unknown>;
  final: FinalState | null;
  attempts: Attempt[];
  media: MediaIndex;
  /** Rows a rewind left out of `summary`, and rows the shared store's BASE frames said were superseded. */
  timelineSuperseded: number;
  baseSuperseded: number;
  placement: WriterPlacement;
  /** Valid frames before the checkpoint, and the damaged regions among them: what a whole read reports. */
  frames: number;
  damaged: DamagedRegion[];
}

/**
 * A checkpoint that passed every check: its state, where it is, where the
 * frames after it start, and whether the log ends with the pointer to it.
 */
export interface FoundCheckpoint { data: CheckpointData; ref: CheckpointRef; resumeAt: number; pointed: boolean }

/** The CHECKPOINT payload for `data`, to be appended at `offset`; null when it would be larger than a frame may be. */
export function encodeCheckpoint(data: CheckpointData, offset: number): Uint8Array | null {
  const { summary, ...rest } = data;
  const { last, min, max, count, ...totals } = summary;
  let json: Buffer;
  try {
    // Replayed state comes from JSON.parse of frames that logd wrote with toJson, so
    // every number is finite; a log made by hand could hold 1e999, which JSON would
    // turn into null: such a log gets no checkpoint rather than a wrong one.
    json = Buffer.from(`{"v":${VERSION},"offset":${offset},"keys":${JSON.stringify(rest.keys)},"state":${JSON.stringify({ ...rest, keys: undefined, summary: totals }, finiteOnly)}}`);
  } catch {
    return null;
  }
  const n = summary.size;
  const columns = align8(HEAD + json.byteLength);
  const bytes = columns + 32 * n;
  if (bytes > MAX_FRAME_BYTES) return null;
  const out = new Uint8Array(bytes);
  const dv = new DataView(out.buffer);
  dv.setUint32(0, VERSION, true);
  dv.setUint32(4, json.byteLength, true);
  dv.setUint32(8, n, true);
  out.set(json, HEAD);
  const f = new Float64Array(out.buffer, columns, 4 * n);
  f.set(last, 0);
  f.set(min, n);
  f.set(max, 2 * n);
  f.set(count, 3 * n);
  return out;
}

/** The CHECKPOINT_AT payload naming a checkpoint. */
export function encodePointer(ref: CheckpointRef): Uint8Array {
  const out = Buffer.alloc(POINTER_PAYLOAD);
  out.writeDoubleLE(ref.offset, 0);
  out.writeUInt32LE(ref.length, 8);
  out.writeUInt32LE(VERSION, 12);
  MAGIC.copy(out, 16);
  return out;
}

/**
 * The log's latest checkpoint, checked: the one the pointer at its end names,
 * or with `at`, the one there (a log being closed, whose end is not a pointer
 * yet). Null: the log has no pointer at its end. `problem`: it has one, or `at`
 * was given, and it does not hold up; the caller reads the whole log.
 */
export function findCheckpoint(file: string, at: CheckpointRef | null = null): FoundCheckpoint | { problem: string } | null {
  let fd: number;
  try {
    fd = fs.openSync(file, 'r');
  } catch {
    return null; // the whole read says what is wrong with the file
  }
  try {
    const size = fs.fstatSync(fd).size;
    let ref = at;
    if (!ref) {
      if (size < POINTER_FRAME_BYTES) return null;
      const tail = Buffer.alloc(POINTER_FRAME_BYTES);
      if (fs.readSync(fd, tail, 0, POINTER_FRAME_BYTES, size - POINTER_FRAME_BYTES) < POINTER_FRAME_BYTES) return null;
      const p = tail.subarray(FRAME_HEADER_BYTES);
      if (tail[8] !== FrameType.CHECKPOINT_AT || tail.readUInt32LE(0) !== POINTER_PAYLOAD || !p.subarray(16).equals(MAGIC)) return null;
      if (!readFrame(fd, { type: FrameType.CHECKPOINT_AT, offset: size - POINTER_FRAME_BYTES, length: POINTER_PAYLOAD, crc: tail.readUInt32LE(4) })) return { problem: 'its pointer at the end of the log fails its checksum' };
      if (p.readUInt32LE(12) !== VERSION) return { problem: `its pointer has version ${p.readUInt32LE(12)}, not ${VERSION}` };
      ref = { offset: p.readDoubleLE(0), length: p.readUInt32LE(8) };
    }
    const where = `the checkpoint at offset ${ref.offset} (${ref.length} bytes)`;
    if (!Number.isSafeInteger(ref.offset) || ref.offset <= 0 || ref.offset + FRAME_HEADER_BYTES + ref.length > size || ref.length > MAX_FRAME_BYTES) {
      return { problem: `${where} lies outside the ${size}-byte log` };
    }
    const head = Buffer.alloc(FRAME_HEADER_BYTES);
    fs.readSync(fd, head, 0, FRAME_HEADER_BYTES, ref.offset);
    if (head[8] !== FrameType.CHECKPOINT || head.readUInt32LE(0) !== ref.length) return { problem: `${where} is not a checkpoint frame` };
    const payload = readFrame(fd, { type: FrameType.CHECKPOINT, offset: ref.offset, length: ref.length, crc: head.readUInt32LE(4) });
    if (!payload) return { problem: `${where} fails its checksum` };
    const decoded = decodeCheckpoint(payload, ref.offset);
    if (typeof decoded === 'string') return { problem: `${where}: ${decoded}` };
    const first = firstRunFrame(fd, size);
    if (!first || first.id !== decoded.meta.id || first.createdAt !== decoded.meta.createdAt) return { problem: `${where} is not of the run the log's RUN frame names` };
    return { data: decoded, ref, resumeAt: ref.offset + FRAME_HEADER_BYTES + ref.length, pointed: !at };
  } catch (e) {
    return { problem: `it cannot be read (${(e as Error).message})` };
  } finally {
    fs.closeSync(fd);
  }
}

/** The payload's state, or what is wrong with it. Every field is checked: the replay trusts what passes. */
function decodeCheckpoint(p: Uint8Array, offset: number): CheckpointData | string {
  if (p.byteLength < HEAD) return 'too short';
  const dv = new DataView(p.buffer, p.byteOffset, p.byteLength);
  if (dv.getUint32(0, true) !== VERSION) return `version ${dv.getUint32(0, true)}, not ${VERSION}`;
  const jsonBytes = dv.getUint32(4, true);
  const n = dv.getUint32(8, true);
  const columns = align8(HEAD + jsonBytes);
  if (columns + 32 * n !== p.byteLength) return 'its sizes do not add up';
  let doc: { v?: unknown; offset?: unknown; keys?: unknown; state?: Record<string, unknown> };
  try {
    doc = JSON.parse(Buffer.from(p.buffer, p.byteOffset + HEAD, jsonBytes).toString('utf8'));
  } catch {
    return 'its JSON does not parse';
  }
  if (!isObject(doc) || doc.v !== VERSION || !isObject(doc.state)) return 'its JSON is not a checkpoint';
  if (doc.offset !== offset) return `it says it was written at offset ${String(doc.offset)}`;
  const s = doc.state;
  const keys = doc.keys;
  if (!Array.isArray(keys) || !keys.every((k) => k === null || typeof k === 'string')) return 'bad keys';
  const meta = s.meta as RunMeta;
  if (!isObject(meta) || typeof meta.id !== 'string' || typeof meta.createdAt !== 'number' || !isObject(meta.config) || typeof meta.runToken !== 'string' || typeof meta.ownerWriterId !== 'string') return 'bad meta';
  const writers = s.writers;
  if (!Array.isArray(writers) || !writers.every((w, i) => w === null || (isObject(w) && w.idx === i && typeof w.writerId === 'string'))) return 'bad writers';
  if (!isArrayOf(s.maxSeq, (x) => x === null || isCount(x))) return 'bad maxSeq';
  const totals = s.summary as Record<string, unknown>;
  if (!isObject(totals) || totals.size !== n || !isCount(totals.rows) || !isCount(totals.stepsBackwards) || typeof totals.lastStep !== 'number') return 'bad summary';
  if (!isObject(s.userSummary) || !isObject(s.config)) return 'bad summary or config';
  if (s.final !== null && !(isObject(s.final) && typeof s.final.state === 'string')) return 'bad final state';
  if (!isArrayOf(s.attempts, (a) => isObject(a) && isCount(a.n)) || (s.attempts as unknown[]).length === 0) return 'bad attempts';
  if (!isObject(s.media) || !Object.values(s.media).every((m) => isObject(m) && typeof m.kind === 'string' && isCount(m.count) && typeof m.lastStep === 'number')) return 'bad media index';
  if (!isCount(s.timelineSuperseded) || !isCount(s.baseSuperseded)) return 'bad superseded rows';
  const placement = s.placement as WriterPlacement;
  if (!isObject(placement) || !isCount(placement.attemptNow) || !isArrayOf(placement.writerAttempt, (x) => x === null || isCount(x))) return 'bad writer placement';
  if (!isCount(s.frames) || !isArrayOf(s.damaged, (d) => isObject(d) && isCount(d.offset) && isCount(d.bytes) && d.offset + d.bytes <= offset)) return 'bad scan counts';
  const f = new Float64Array(p.buffer, p.byteOffset + columns, 4 * n); // payloads are read into their own buffer: aligned
  return {
    meta, keys: sparse(keys as Array<string | null>), writers: sparse(writers as Array<WriterMeta | null>), maxSeq: sparse(s.maxSeq as Array<number | null>),
    summary: { size: n, rows: totals.rows as number, lastStep: totals.lastStep, stepsBackwards: totals.stepsBackwards as number, last: f.subarray(0, n), min: f.subarray(n, 2 * n), max: f.subarray(2 * n, 3 * n), count: f.subarray(3 * n) },
    userSummary: s.userSummary, config: s.config, final: s.final as FinalState | null, attempts: s.attempts as Attempt[], media: s.media as MediaIndex,
    timelineSuperseded: s.timelineSuperseded as number, baseSuperseded: s.baseSuperseded as number, placement,
    frames: s.frames as number, damaged: s.damaged as DamagedRegion[],
  };
}

/** The id and creation time of the RUN frame a log starts with, or null. */
function firstRunFrame(fd: number, size: number): { id: unknown; createdAt: unknown } | null {
  const head = Buffer.alloc(FRAME_HEADER_BYTES);
  if (fs.readSync(fd, head, 0, FRAME_HEADER_BYTES, 0) < FRAME_HEADER_BYTES || head[8] !== FrameType.RUN) return null;
  const length = head.readUInt32LE(0);
  if (FRAME_HEADER_BYTES + length > size || length > MAX_FRAME_BYTES) return null;
  const p = readFrame(fd, { type: FrameType.RUN, offset: 0, length, crc: head.readUInt32LE(4) });
  if (!p) return null;
  try {
    const m = JSON.parse(Buffer.from(p).toString('utf8')) as { id?: unknown; createdAt?: unknown };
    return isObject(m) ? { id: m.id, createdAt: m.createdAt } : null;
  } catch {
    return null;
  }
}

function finiteOnly(_k: string, v: unknown): unknown {
  if (typeof v === 'number' && !Number.isFinite(v)) throw new Error('not finite');
  return v;
}

const align8 = (n: number) => (n + 7) & ~7;
const isObject = (x: unknown): x is Record<string, any> => typeof x === 'object' && x !== null && !Array.isArray(x);
const isCount = (x: unknown): x is number => Number.isSafeInteger(x) && (x as number) >= 0;
const isArrayOf = (x: unknown, each: (v: any) => boolean): boolean => Array.isArray(x) && x.every(each);

/** JSON's nulls back into the holes they stood for (an array indexed by key id or writer index). */
function sparse<T>(a: Array<T | null>): T[] {
  const out: T[] = [];
  out.length = a.length;
  a.forEach((v, i) => {
    if (v !== null) out[i] = v;
  });
  return out;
}
