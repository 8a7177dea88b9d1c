// A PNG from raw pixels (8-bit gray, gray+alpha, RGB or RGBA), with zlib from
// Node itself: what Image.fromPixels logs. No filter (type 0): pixels logged
// from training are small and a filter search costs more than it saves.
import zlib from 'node:zlib';

const COLOR_TYPE: Record<number, number> = { 1: 0, 2: 4, 3: 2, 4: 6 };

function chunk(type: string, data: Uint8Array): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(zlib.crc32(data, zlib.crc32(head.subarray(4))) >>> 0, 0); // the type, then the data
  return Buffer.concat([head, data, crc]);
}

/** PNG bytes of `pixels` (height rows of width x channels bytes, channels 1..4). */
export function encodePng(pixels: Uint8Array, width: number, height: number, channels: number): Buffer {
  const color = COLOR_TYPE[channels];
  if (color === undefined) throw new TypeError(`logd: an image has 1, 2, 3 or 4 channels, not ${channels}`);
  const row = width * channels;
  const raw = Buffer.alloc((row + 1) * height);
  for (let y = 0; y < height; y++) raw.set(pixels.subarray(y * row, (y + 1) * row), y * (row + 1) + 1);
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = color;
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', zlib.deflateSync(raw, { level: 6 })),
    chunk('IEND', new Uint8Array(0)),
  ]);
}
