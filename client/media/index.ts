// Histogram, Image and Text: the values log() takes beside numbers
// (`run.log({ loss, 'grad/w1': new Histogram(g) }, { step })`). Each checks
// itself when made, so a bad one throws in the caller's line, and becomes one
// proto Media entry of the writer's next batch (client/open-batch.ts).
import { checkHistogram, sniffImage, MAX_CAPTION_BYTES, MAX_TEXT_BYTES, MAX_HISTOGRAM_BINS, MAX_IMAGE_SIDE } from '../../src/media.js';
import type { MediaMsg } from '../../src/wire.js';
import { encodePng } from './png.js';

/** What every logged non-number is: one proto Media entry once its key, step and time are known. */
export abstract class MediaValue {
  /** Bytes this value adds to a batch (roughly): the client seals a batch once media reach MEDIA_BATCH_BYTES. */
  abstract get size(): number;
  abstract toMsg(key: string, step: number, time: number): MediaMsg;
}

function bytesOf(a: Float64Array): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

export interface HistogramOptions {
  /** Bins, evenly spaced between the smallest and largest finite value (default 64, at most 4096). */
  bins?: number;
  /** [low, high]: bin this range instead; values outside it are counted in the first or last bin. */
  range?: [number, number];
}

/**
 * A distribution: counts in bins between edges. From values
 * (`new Histogram(values, { bins })`: NaN and infinities are left out of the
 * bins and counted as `nonfinite`) or from bins computed elsewhere
 * (`Histogram.fromBins(counts, edges)`).
 */
export class Histogram extends MediaValue {
  readonly counts: Float64Array;
  readonly edges: Float64Array;
  readonly nonfinite: number;

  constructor(values: ArrayLike<number>, opts: HistogramOptions = {}) {
    super();
    const bins = opts.bins ?? 64;
    if (!Number.isInteger(bins) || bins < 1 || bins > MAX_HISTOGRAM_BINS) throw new TypeError(`logd: Histogram bins must be an integer 1..${MAX_HISTOGRAM_BINS}, not ${bins}`);
    if (values === null || typeof values !== 'object' || typeof (values as ArrayLike<number>).length !== 'number') throw new TypeError(`logd: Histogram takes an array of numbers (or a typed array), not ${values === null ? 'null' : typeof values}`);
    // Typed arrays take loops of their own: one loop over every kind of array (a type check per value) took
    // 17 ms per million float64 values on the training thread (167 ms for 10^7); these about 11 ms (docs/api.md).
    const typed = values instanceof Float64Array || values instanceof Float32Array ? values : null;
    let [lo, hi, nonfinite] = typed ? rangeTyped(typed) : rangeAny(values);
    if (opts.range) {
      [lo, hi] = opts.range;
      if (!Number.isFinite(lo) || !Number.isFinite(hi) || !(hi > lo)) throw new TypeError(`logd: Histogram range must be two finite numbers, low < high, not [${opts.range.join(', ')}]`);
    } else if (lo === Infinity) {
      lo = 0; hi = 1; // no finite value: empty bins, every value counted as nonfinite
    } else if (lo === hi) {
      lo -= 0.5; hi += 0.5;
    }
    const edges = new Float64Array(bins + 1);
    for (let i = 0; i <= bins; i++) edges[i] = lo + ((hi - lo) * i) / bins;
    edges[bins] = hi;
    const tally = new Float64Array(bins);
    const scale = bins / (hi - lo);
    if (typed) binTyped(typed, tally, lo, scale);
    else binAny(values, tally, lo, scale);
    const counts = tally;
    this.counts = counts;
    this.edges = edges;
    this.nonfinite = nonfinite;
  }

  /** Bins computed elsewhere: `counts` (n, each >= 0) and `edges` (n + 1, finite, increasing). */
  static fromBins(counts: ArrayLike<number>, edges: ArrayLike<number>, nonfinite = 0): Histogram {
    const bad = checkHistogram(counts, edges);
    if (bad) throw new TypeError(`logd: Histogram.fromBins: ${bad}`);
    const h = Object.create(Histogram.prototype) as { counts: Float64Array; edges: Float64Array; nonfinite: number };
    h.counts = Float64Array.from(counts);
    h.edges = Float64Array.from(edges);
    h.nonfinite = nonfinite;
    return h as unknown as Histogram;
  }

  get size(): number {
    return this.counts.byteLength + this.edges.byteLength + 64;
  }

  toMsg(key: string, step: number, time: number): MediaMsg {
    return { key, step, time, kind: 'histogram', counts: bytesOf(this.counts), edges: bytesOf(this.edges), nonfinite: this.nonfinite };
  }
}

function captionOf(caption: unknown): string {
  if (caption === undefined || caption === null) return '';
  if (typeof caption !== 'string') throw new TypeError(`logd: an image caption is a string, not ${typeof caption}`);
  if (Buffer.byteLength(caption) > MAX_CAPTION_BYTES) throw new TypeError(`logd: an image caption is at most ${MAX_CAPTION_BYTES} bytes, not ${Buffer.byteLength(caption)}`);
  return caption;
}

export interface PixelsOptions { width: number; height: number; channels?: 1 | 2 | 3 | 4; caption?: string }

/**
 * An image: PNG or JPEG bytes as they are (`new Image(bytes, { caption })`),
 * or raw 8-bit pixels, row by row, encoded here as PNG
 * (`Image.fromPixels(pixels, { width, height, channels })`). At most 16 MiB
 * encoded and 32768 pixels a side; bytes that are not a whole PNG or JPEG
 * throw a TypeError.
 */
export class Image extends MediaValue {
  readonly data: Uint8Array;
  readonly format: 'png' | 'jpeg';
  readonly width: number;
  readonly height: number;
  readonly caption: string;

  constructor(data: Uint8Array, opts: { caption?: string } = {}) {
    super();
    if (!(data instanceof Uint8Array)) throw new TypeError(`logd: Image takes PNG or JPEG bytes (a Buffer or Uint8Array), not ${data === null ? 'null' : typeof data}; raw pixels go through Image.fromPixels`);
    const h = sniffImage(data);
    if (typeof h === 'string') throw new TypeError(`logd: Image: ${h}`);
    this.data = data;
    this.format = h.format;
    this.width = h.width;
    this.height = h.height;
    this.caption = captionOf(opts.caption);
  }

  static fromPixels(pixels: Uint8Array | Uint8ClampedArray, opts: PixelsOptions): Image {
    const { width, height } = opts;
    const channels = opts.channels ?? 3;
    if (!Number.isInteger(width) || !Number.isInteger(height) || width < 1 || height < 1 || width > MAX_IMAGE_SIDE || height > MAX_IMAGE_SIDE) throw new TypeError(`logd: Image.fromPixels: width and height must be integers 1..${MAX_IMAGE_SIDE}, not ${width}x${height}`);
    if (!(pixels instanceof Uint8Array || pixels instanceof Uint8ClampedArray)) throw new TypeError('logd: Image.fromPixels takes 8-bit pixels (a Uint8Array)');
    if (pixels.length !== width * height * channels) throw new TypeError(`logd: Image.fromPixels: ${width}x${height}x${channels} needs ${width * height * channels} bytes, not ${pixels.length}`);
    const u8 = pixels instanceof Uint8Array ? pixels : new Uint8Array(pixels.buffer, pixels.byteOffset, pixels.byteLength);
    return new Image(encodePng(u8, width, height, channels), { caption: opts.caption });
  }

  get size(): number {
    return this.data.byteLength + this.caption.length + 64;
  }

  toMsg(key: string, step: number, time: number): MediaMsg {
    return { key, step, time, kind: 'image', data: this.data, format: this.format, width: this.width, height: this.height, caption: this.caption };
  }
}

/** Text (UTF-8, at most 1 MiB): a generation, a prompt, a note. Shown as text, never as HTML. */
export class Text extends MediaValue {
  readonly text: string;

  constructor(text: string) {
    super();
    if (typeof text !== 'string') throw new TypeError(`logd: Text takes a string, not ${text === null ? 'null' : typeof text}`);
    const n = Buffer.byteLength(text);
    if (n > MAX_TEXT_BYTES) throw new TypeError(`logd: a Text is at most ${MAX_TEXT_BYTES} bytes (1 MiB) of UTF-8, not ${n}`);
    this.text = text;
  }

  get size(): number {
    return this.text.length * 3 + 64;
  }

  toMsg(key: string, step: number, time: number): MediaMsg {
    return { key, step, time, kind: 'text', text: this.text };
  }
}

// Histogram's loops: typed arrays (no per-value type check), and anything else. A value's bin: floor((v - lo) * scale),
// clamped to the first and last bin (so anything below 1 is bin 0, anything from `last` on the last one); NaN and +-Infinity are left out (v - v is 0 only for a finite v).
function rangeTyped(v: Float64Array | Float32Array): [number, number, number] {
  let lo = Infinity, hi = -Infinity, bad = 0;
  for (let i = 0; i < v.length; i++) {
    const x = v[i];
    if (x - x !== 0) bad++;
    else {
      if (x < lo) lo = x;
      if (x > hi) hi = x;
    }
  }
  return [lo, hi, bad];
}

function rangeAny(values: ArrayLike<number>): [number, number, number] {
  let lo = Infinity, hi = -Infinity, bad = 0;
  for (let i = 0; i < values.length; i++) {
    const x = values[i];
    if (typeof x !== 'number') throw new TypeError(`logd: Histogram values must be numbers; value ${i} is a ${typeof x}`);
    if (x - x !== 0) bad++;
    else {
      if (x < lo) lo = x;
      if (x > hi) hi = x;
    }
  }
  return [lo, hi, bad];
}

function binTyped(v: Float64Array | Float32Array, counts: Float64Array, lo: number, scale: number): void {
  const last = counts.length - 1;
  for (let i = 0; i < v.length; i++) {
    const x = v[i];
    if (x - x !== 0) continue;
    const y = (x - lo) * scale;
    counts[y < 1 ? 0 : y >= last ? last : y | 0]++; // y | 0 is floor(y) for 1 <= y < 2^31
  }
}

function binAny(v: ArrayLike<number>, counts: Float64Array, lo: number, scale: number): void {
  const last = counts.length - 1;
  for (let i = 0; i < v.length; i++) {
    const x = v[i];
    if (x - x !== 0) continue;
    const y = (x - lo) * scale;
    counts[y < 1 ? 0 : y >= last ? last : y | 0]++; // y | 0 is floor(y) for 1 <= y < 2^31
  }
}
