// Length-prefixed, checksummed frames: the format of every run's record log
// and of client spill files.
//
//   u32 LE  payload length
//   u32 LE  crc32 of (type byte + payload)
//   u8      frame type
//   ...     payload
//
// A reader skips a frame that fails its checksum and goes on at the next valid
// frame (a damaged region, reported). Bytes with no valid frame after them are
// a torn tail from a crash; the store keeps them aside before cutting them.
import fs from 'node:fs';
import { createRequire } from 'node:module';

// node:zlib loads on the first checksum, not with the module: a trainer
// imports this for its exit-time spill, which most processes never write.
let zlibCrc32: ((data: Uint8Array, value?: number) => number) | null = null;
const crc32 = (data: Uint8Array, value?: number): number => (zlibCrc32 ??= (createRequire(import.meta.url)('node:zlib') as typeof import('node:zlib')).crc32)(data, value);

export const FRAME_HEADER_BYTES = 9;
export const MAX_FRAME_BYTES = 256 * 1024 * 1024;

export function frameHeader(type: number, parts: readonly Uint8Array[]): Buffer {
  let len = 0;
  const typeByte = Buffer.of(type);
  let crc = crc32(typeByte);
  for (const p of parts) {
    len += p.byteLength;
    crc = crc32(p, crc);
  }
  const h = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
  h.writeUInt32LE(len, 0);
  h.writeUInt32LE(crc >>> 0, 4);
  h[8] = type;
  return h;
}

export function encodeFrame(type: number, parts: readonly Uint8Array[]): Buffer {
  return Buffer.concat([frameHeader(type, parts), ...parts]);
}

export interface DamagedRegion {
  /** File offset where the unreadable bytes start. */
  offset: number;
  bytes: number;
}

export interface ScanResult {
  /** File offset just past the last valid frame: where appends continue. */
  validBytes: number;
  /** Bytes after the last valid frame: a true tail (a torn write), with no valid frame in it. */
  tornBytes: number;
  frames: number;
  /** Regions in the middle that fail their checksum; reading went on at the next valid frame after each. */
  damaged: DamagedRegion[];
}

/**
 * A frame header at `pos` that could be real: a known type, a length that
 * fits. `type` 0 and types above 63 never occur in logd files.
 */
function plausible(h: Buffer, pos: number, size: number): boolean {
  const len = h.readUInt32LE(0);
  return h[8] !== 0 && h[8] < 64 && len <= MAX_FRAME_BYTES && pos + FRAME_HEADER_BYTES + len <= size;
}

/**
 * Reads every valid frame of a file in order. `onFrame` gets a payload in its
 * own ArrayBuffer (offset 0, so typed-array views are aligned).
 *
 * A frame that fails its checksum (or whose header is garbage) does not end
 * the read: the scan looks for the next offset where a whole frame passes its
 * checksum and goes on from there, and reports the bytes it skipped in
 * `damaged`. Only bytes with no valid frame after them are a tail.
 *
 * `from`: where to start, which must be a frame boundary the caller knows of
 * (a record log's checkpoint: daemon/store/checkpoint.ts); `validBytes` is
 * then `from` when no frame follows. Past the end of the file: a RangeError.
 */
export function scanFrames(
  file: string,
  onFrame: (type: number, payload: Uint8Array, offset: number) => void,
  chunkBytes = 8 * 1024 * 1024,
  from = 0,
): ScanResult {
  let fd: number;
  try {
    fd = fs.openSync(file, 'r');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { validBytes: 0, tornBytes: 0, frames: 0, damaged: [] };
    throw e;
  }
  try {
    const size = fs.fstatSync(fd).size;
    if (from > size) throw new RangeError(`frames: ${file} is ${size} bytes, shorter than the offset ${from} to read from`);
    let pos = from; // file offset of the next frame
    let validEnd = from; // just past the last valid frame
    let frames = 0;
    const damaged: DamagedRegion[] = [];
    const header = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
    const nextHeader = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
    let buf = Buffer.allocUnsafe(Math.min(chunkBytes, Math.max(size - from, FRAME_HEADER_BYTES)));
    let bufStart = 0; // file offset of buf[0]
    let bufLen = 0;
    const read = (offset: number, length: number): Buffer | null => {
      if (offset + length > size) return null;
      if (offset >= bufStart && offset + length <= bufStart + bufLen) return buf.subarray(offset - bufStart, offset - bufStart + length);
      if (length > buf.length) buf = Buffer.allocUnsafe(length);
      bufStart = offset;
      bufLen = fs.readSync(fd, buf, 0, Math.min(buf.length, size - offset), offset);
      return bufLen >= length ? buf.subarray(0, length) : null;
    };
    /** The frame at `at` if it is whole and passes its checksum. */
    const frameAt = (at: number): Buffer | null => {
      const h = read(at, FRAME_HEADER_BYTES);
      if (!h || !plausible(h, at, size)) return null;
      h.copy(header);
      const len = header.readUInt32LE(0);
      // A large candidate found while resynchronising must also be followed by
      // the end of the file or a plausible header before its payload is
      // checksummed, so that searching through damage stays cheap.
      const next = at + FRAME_HEADER_BYTES + len;
      if (at !== pos && len > 1024 * 1024 && next !== size) {
        // A small read of its own: refilling the chunk buffer so far away, for each candidate, costs a lot.
        if (next + FRAME_HEADER_BYTES > size || fs.readSync(fd, nextHeader, 0, FRAME_HEADER_BYTES, next) < FRAME_HEADER_BYTES) return null;
        if (!plausible(nextHeader, next, size)) return null;
      }
      const body = read(at + FRAME_HEADER_BYTES, len);
      if (!body) return null;
      if ((crc32(body, crc32(header.subarray(8, 9))) >>> 0) !== header.readUInt32LE(4)) return null;
      return body;
    };
    while (pos + FRAME_HEADER_BYTES <= size) {
      let body = frameAt(pos);
      if (!body) {
        // Resynchronise: the next offset holding a valid frame.
        // Most offsets fail on the type byte or the length, read in place.
        let at = pos + 1;
        for (; at + FRAME_HEADER_BYTES <= size; at++) {
          if (at < bufStart || at + FRAME_HEADER_BYTES > bufStart + bufLen) read(at, FRAME_HEADER_BYTES);
          const o = at - bufStart;
          const type = buf[o + 8];
          if (type === 0 || type >= 64) continue;
          const len = buf.readUInt32LE(o);
          if (len > MAX_FRAME_BYTES || at + FRAME_HEADER_BYTES + len > size) continue;
          if ((body = frameAt(at))) break;
        }
        if (!body) break; // nothing valid after `pos`: a tail
        damaged.push({ offset: pos, bytes: at - pos });
        pos = at;
      }
      const type = header[8];
      const len = header.readUInt32LE(0);
      const payload = new Uint8Array(len);
      payload.set(body);
      onFrame(type, payload, pos);
      pos += FRAME_HEADER_BYTES + len;
      validEnd = pos;
      frames++;
    }
    return { validBytes: validEnd, tornBytes: size - validEnd, frames, damaged };
  } finally {
    fs.closeSync(fd);
  }
}

export interface FrameRef { type: number; offset: number; length: number; crc: number }

/** Reads one frame's payload (own aligned buffer); null if its checksum fails (when `check`). */
export function readFrame(fd: number, ref: FrameRef, length = ref.length, check = true): Uint8Array | null {
  const payload = new Uint8Array(length);
  fs.readSync(fd, payload, 0, length, ref.offset + FRAME_HEADER_BYTES);
  if (check && length === ref.length && (crc32(payload, crc32(Buffer.of(ref.type))) >>> 0) !== ref.crc) return null;
  return payload;
}
