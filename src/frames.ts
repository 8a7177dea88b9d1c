// Length-prefixed, checksummed frames: the format of every run's record log
// and of client spill files.
//
//   u32 LE  payload length
//   u32 LE  crc32 of (type byte + payload)
//   u8      frame type
//   ...     payload
//
// A reader stops at the first frame that is cut short or fails its checksum:
// that is a torn tail from a crash, never data.
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

export interface ScanResult {
  /** Bytes of whole, valid frames from the start of the file. */
  validBytes: number;
  /** Bytes after them (a torn or corrupt tail). */
  tornBytes: number;
  frames: number;
}

/**
 * Reads every valid frame of a file in order. `onFrame` gets a payload in its
 * own ArrayBuffer (offset 0, so typed-array views are aligned).
 */
export function scanFrames(
  file: string,
  onFrame: (type: number, payload: Uint8Array, offset: number) => void,
  chunkBytes = 8 * 1024 * 1024,
): ScanResult {
  let fd: number;
  try {
    fd = fs.openSync(file, 'r');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return { validBytes: 0, tornBytes: 0, frames: 0 };
    throw e;
  }
  try {
    const size = fs.fstatSync(fd).size;
    let pos = 0; // file offset of the next frame
    let frames = 0;
    const header = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
    let buf = Buffer.allocUnsafe(Math.min(chunkBytes, Math.max(size, FRAME_HEADER_BYTES)));
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
    while (pos + FRAME_HEADER_BYTES <= size) {
      const h = read(pos, FRAME_HEADER_BYTES);
      if (!h) break;
      h.copy(header);
      const len = header.readUInt32LE(0);
      const crc = header.readUInt32LE(4);
      const type = header[8];
      if (len > MAX_FRAME_BYTES) break;
      const body = read(pos + FRAME_HEADER_BYTES, len);
      if (!body) break;
      if ((crc32(body, crc32(header.subarray(8, 9))) >>> 0) !== crc) break;
      const payload = new Uint8Array(len);
      payload.set(body);
      onFrame(type, payload, pos);
      pos += FRAME_HEADER_BYTES + len;
      frames++;
    }
    return { validBytes: pos, tornBytes: size - pos, frames };
  } finally {
    fs.closeSync(fd);
  }
}

export interface FrameRef { type: number; offset: number; length: number; crc: number }

/**
 * Hops from frame header to frame header without reading payloads: the cheap
 * way to find the last frames of a large log. Stops where a header points
 * past the end of the file (a torn tail). Payload checksums are checked only
 * when a payload is read (readFrame).
 */
export function indexFrames(file: string): FrameRef[] {
  const fd = fs.openSync(file, 'r');
  try {
    const size = fs.fstatSync(fd).size;
    const out: FrameRef[] = [];
    const h = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
    let pos = 0;
    while (pos + FRAME_HEADER_BYTES <= size) {
      if (fs.readSync(fd, h, 0, FRAME_HEADER_BYTES, pos) < FRAME_HEADER_BYTES) break;
      const length = h.readUInt32LE(0);
      if (length > MAX_FRAME_BYTES || pos + FRAME_HEADER_BYTES + length > size) break;
      out.push({ type: h[8], offset: pos, length, crc: h.readUInt32LE(4) });
      pos += FRAME_HEADER_BYTES + length;
    }
    return out;
  } finally {
    fs.closeSync(fd);
  }
}

/** Reads one frame's payload (own aligned buffer); null if its checksum fails. */
export function readFrame(fd: number, ref: FrameRef, length = ref.length): Uint8Array | null {
  const payload = new Uint8Array(length);
  fs.readSync(fd, payload, 0, length, ref.offset + FRAME_HEADER_BYTES);
  if (length === ref.length && (crc32(payload, crc32(Buffer.of(ref.type))) >>> 0) !== ref.crc) return null;
  return payload;
}
