// Values that are not numbers: histograms, images and text (proto: Media).
// Their bounds and the checks both sides make: the TypeScript client before
// log() returns (a bad value throws there and nothing else of the row is
// lost), the daemon again on every batch (a client may be anyone's).
// docs/api.md, "Beyond numbers", documents every bound here.

export const MEDIA_KINDS = ['histogram', 'image', 'text'] as const;

/**
 * Media keys of logd's own (a run's diff and package list: src/environment.ts): kept and uploaded like any text
 * item, but left out of the run's media index and of media listings unless their key is asked for.
 */
export const OWN_MEDIA_PREFIX = 'logd/';
export function isOwnMediaKey(key: string): boolean {
  return key.startsWith(OWN_MEDIA_PREFIX);
}
export type MediaKind = (typeof MEDIA_KINDS)[number];

/** An image's encoded bytes at most (PNG or JPEG as logged). */
export const MAX_IMAGE_BYTES = 16 * 1024 * 1024;
/** An image's width and height at most, each. */
export const MAX_IMAGE_SIDE = 32768;
/**
 * The most pixels the dashboard draws of one image (16 MP, 64 MiB decoded as RGBA). A PNG of 30000 x 30000
 * zeros is under 1 MB stored and 3.6 GB decoded: past this bound the page shows a placeholder and a download
 * link, and the image route answers it only as a download (never into an <img>).
 */
export const MAX_SHOWN_PIXELS = 16 * 1024 * 1024;
/** A histogram's bins at most. */
export const MAX_HISTOGRAM_BINS = 4096;
/** A text value's UTF-8 bytes at most; a caption's. */
export const MAX_TEXT_BYTES = 1024 * 1024;
export const MAX_CAPTION_BYTES = 4096;
/** A client seals its open batch once the media in it reach this many bytes. */
export const MEDIA_BATCH_BYTES = 8 * 1024 * 1024;

export interface ImageHeader { format: 'png' | 'jpeg'; width: number; height: number }

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

function u32be(b: Uint8Array, at: number): number {
  return ((b[at] << 24) >>> 0) + (b[at + 1] << 16) + (b[at + 2] << 8) + b[at + 3];
}

/**
 * What an image's own bytes say it is: PNG (signature, an IHDR chunk first,
 * the chunks laid end to end up to IEND) or JPEG (SOI, a frame header with
 * its size, EOI at the end). A string says why the bytes are not an image.
 * The pixels are not decoded: a browser does that, from bytes served as the
 * image type they were checked to be.
 */
export function sniffImage(b: Uint8Array): ImageHeader | string {
  if (b.byteLength > MAX_IMAGE_BYTES) return `the image is ${b.byteLength} bytes, more than the ${MAX_IMAGE_BYTES} (16 MiB) an image may be; scale it down or log it as a file artifact`;
  if (b.byteLength >= 8 && PNG_SIGNATURE.every((x, i) => b[i] === x)) return sniffPng(b);
  if (b.byteLength >= 4 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return sniffJpeg(b);
  return 'the bytes are neither PNG nor JPEG (their first bytes are no PNG signature and no JPEG start marker)';
}

function sides(format: 'png' | 'jpeg', width: number, height: number): ImageHeader | string {
  if (width < 1 || height < 1 || width > MAX_IMAGE_SIDE || height > MAX_IMAGE_SIDE) return `the ${format.toUpperCase()} says it is ${width}x${height}; each side must be 1..${MAX_IMAGE_SIDE}`;
  return { format, width, height };
}

function sniffPng(b: Uint8Array): ImageHeader | string {
  // Chunks: length (4), type (4), data, CRC (4); IHDR first, IEND last.
  let at = 8;
  let header: ImageHeader | string | null = null;
  for (let n = 0; ; n++) {
    if (at + 12 > b.byteLength) return 'the PNG is cut short (no IEND chunk at its end)';
    const len = u32be(b, at);
    const type = String.fromCharCode(b[at + 4], b[at + 5], b[at + 6], b[at + 7]);
    if (!/^[A-Za-z]{4}$/.test(type)) return `the PNG has a damaged chunk at byte ${at}`;
    if (n === 0) {
      if (type !== 'IHDR' || len !== 13) return 'the PNG does not start with its IHDR chunk';
      header = sides('png', u32be(b, at + 8), u32be(b, at + 12));
      if (typeof header === 'string') return header;
    }
    if (at + 12 + len > b.byteLength) return `the PNG is cut short (its ${type} chunk at byte ${at} runs past the end)`;
    at += 12 + len;
    if (type === 'IEND') return header!;
  }
}

function sniffJpeg(b: Uint8Array): ImageHeader | string {
  // Markers after SOI: FFxx with a 2-byte length, up to a start of frame
  // (SOF0..SOF15 but DHT C4, JPG C8, DAC CC) that holds the size.
  let at = 2;
  while (at + 4 <= b.byteLength) {
    if (b[at] !== 0xff) return `the JPEG has no marker where one belongs (byte ${at})`;
    const m = b[at + 1];
    if (m === 0xff) { at++; continue; } // fill byte
    const len = (b[at + 2] << 8) + b[at + 3];
    if (len < 2) return `the JPEG has a damaged segment at byte ${at}`;
    if (m >= 0xc0 && m <= 0xcf && m !== 0xc4 && m !== 0xc8 && m !== 0xcc) {
      if (at + 9 > b.byteLength) break;
      const found = sides('jpeg', (b[at + 7] << 8) + b[at + 8], (b[at + 5] << 8) + b[at + 6]);
      if (typeof found === 'string') return found;
      if (!(b[b.byteLength - 2] === 0xff && b[b.byteLength - 1] === 0xd9)) return 'the JPEG is cut short (no end-of-image marker at its end)';
      return found;
    }
    if (m === 0xd9 || m === 0xda) break; // end, or scan data before any frame header
    at += 2 + len;
  }
  return 'the JPEG has no frame header (its size) before its image data';
}

/**
 * A histogram's counts and edges as logged: 1..MAX_HISTOGRAM_BINS bins,
 * edges one more than the bins, finite and strictly increasing, counts
 * finite and >= 0. A string says what is wrong.
 */
export function checkHistogram(counts: ArrayLike<number>, edges: ArrayLike<number>): string | null {
  const bins = counts.length;
  if (bins < 1 || bins > MAX_HISTOGRAM_BINS) return `a histogram has 1..${MAX_HISTOGRAM_BINS} bins, not ${bins}`;
  if (edges.length !== bins + 1) return `${bins} bins need ${bins + 1} edges, not ${edges.length}`;
  for (let i = 0; i < edges.length; i++) {
    if (!Number.isFinite(edges[i])) return `edge ${i} is ${edges[i]}; edges must be finite`;
    if (i > 0 && !(edges[i] > edges[i - 1])) return `edges must increase: edge ${i} (${edges[i]}) is not above edge ${i - 1} (${edges[i - 1]})`;
  }
  for (let i = 0; i < bins; i++) {
    const c = counts[i];
    if (!Number.isFinite(c) || c < 0) return `count ${i} is ${c}; counts must be finite and >= 0`;
  }
  return null;
}
