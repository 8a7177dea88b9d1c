// Validation of a record batch from the wire, before anything is stored. A bad
// batch is refused as a whole with a message that says what is wrong; nothing
// of it reaches the log.
import { f64, u32, type RecordBatchMsg, type MediaMsg } from '../../src/wire.js';
import { checkHistogram, sniffImage, MAX_CAPTION_BYTES, MAX_TEXT_BYTES, MEDIA_KINDS } from '../../src/media.js';
import type { MediaEntry } from '../store/format.js';
import { checkKey, duplicateKeyMessage } from '../../src/names.js';

export interface CheckedBatch {
  rows: number;
  steps: Float64Array;
  times: Float64Array;
  counts: Uint32Array;
  keyIds: Uint32Array; // writer-local ids
  values: Float64Array;
}

export const MAX_ROWS_PER_BATCH = 1_000_000;
export const MAX_STEP = Number.MAX_SAFE_INTEGER;

/**
 * Per key id, the stamp of the row it was last seen in. Shared by every batch
 * (stamps only grow), so a check costs no allocation however big a dictionary is.
 */
let stampIds = new Uint32Array(1024);
let nextStamp = 1;
function rowStamps(dict: number, rows: number): { ids: Uint32Array; first: number } {
  if (dict > stampIds.length) stampIds = new Uint32Array(Math.max(dict, stampIds.length * 2));
  if (nextStamp + rows >= 0xffffffff) (stampIds.fill(0), (nextStamp = 1));
  const first = nextStamp;
  nextStamp += rows;
  return { ids: stampIds, first };
}

export function checkBatch(b: RecordBatchMsg, dictionarySize: number, known: (id: number) => string = (id) => `#${id}`): CheckedBatch | string {
  const nameOf = (id: number): string => (id >= b.newKeysFirst && id < b.newKeysFirst + b.newKeys.length ? b.newKeys[id - b.newKeysFirst] : known(id));
  if (!Number.isSafeInteger(b.seq) || b.seq < 1) return `seq ${b.seq} must be a positive integer`;
  if (b.newKeys.length > 0 && b.newKeysFirst > dictionarySize) return `new_keys_first ${b.newKeysFirst} leaves a gap after the writer's ${dictionarySize} names`;
  for (const k of b.newKeys) {
    const bad = checkKey(k);
    if (bad) return bad;
  }
  // proto3 leaves an empty bytes field off the wire, and the decoder then
  // gives its default (an empty plain array, not bytes): an absent column is
  // an empty one (a batch that only carries config or summary updates).
  const bytes = (c: Uint8Array | undefined) => (c instanceof Uint8Array ? c : new Uint8Array(0));
  b.steps = bytes(b.steps);
  b.times = bytes(b.times);
  b.counts = bytes(b.counts);
  b.keyIds = bytes(b.keyIds);
  b.values = bytes(b.values);
  const rows = b.rows;
  if (rows > MAX_ROWS_PER_BATCH) return `batch of ${rows} rows is larger than ${MAX_ROWS_PER_BATCH}; send smaller batches`;
  if (b.steps.byteLength !== rows * 8) return `steps column has ${b.steps.byteLength} bytes, expected ${rows} x 8`;
  if (b.times.byteLength !== rows * 8) return `times column has ${b.times.byteLength} bytes, expected ${rows} x 8`;
  if (b.counts.byteLength !== rows * 4) return `counts column has ${b.counts.byteLength} bytes, expected ${rows} x 4`;
  if (b.keyIds.byteLength % 4 !== 0 || b.values.byteLength % 8 !== 0) return 'key_ids/values columns are not whole uint32/float64 arrays';
  const pairs = b.keyIds.byteLength / 4;
  if (b.values.byteLength !== pairs * 8) return `values column has ${b.values.byteLength / 8} entries for ${pairs} key ids`;
  const steps = f64(b.steps);
  const times = f64(b.times);
  const counts = u32(b.counts);
  const keyIds = u32(b.keyIds);
  const values = f64(b.values);
  let total = 0;
  for (let r = 0; r < rows; r++) {
    const s = steps[r];
    if (!(s >= 0 && s <= MAX_STEP && Math.floor(s) === s)) return `row ${r}: step ${s} must be an integer from 0 to 2^53-1`;
    if (!Number.isFinite(times[r])) return `row ${r}: time ${times[r]} is not a finite number`;
    total += counts[r];
  }
  if (total !== pairs) return `counts add up to ${total} but the batch has ${pairs} values`;
  const dict = Math.max(dictionarySize, b.newKeysFirst + b.newKeys.length);
  for (let i = 0; i < pairs; i++) {
    if (keyIds[i] >= dict) return `key id ${keyIds[i]} is not in the writer's dictionary of ${dict} names`;
  }
  // One row names each key once; a second value would shadow the first.
  const seen = rowStamps(dict, rows);
  for (let r = 0, p = 0; r < rows; r++) {
    const stamp = seen.first + r;
    for (const end = p + counts[r]; p < end; p++) {
      if (seen.ids[keyIds[p]] === stamp) return `row ${r}: ${duplicateKeyMessage(nameOf(keyIds[p]))}`;
      seen.ids[keyIds[p]] = stamp;
    }
  }
  return { rows, steps, times, counts, keyIds, values };
}

/** The most text one console entry may carry (UTF-8 bytes); clients cut longer output into pieces. */
export const MAX_CONSOLE_ENTRY_BYTES = 64 * 1024;

/**
 * A batch's console entries (RecordBatch.console_json), each a JSON object
 * {t, s, l}; a string says why the batch is refused.
 */
export function checkConsole(entries: readonly string[] | undefined): Array<{ t: number; s: 'out' | 'err'; l: string }> | string {
  const out: Array<{ t: number; s: 'out' | 'err'; l: string }> = [];
  for (let i = 0; i < (entries?.length ?? 0); i++) {
    let e: unknown;
    try {
      e = JSON.parse(entries![i]);
    } catch {
      return `console entry ${i} is not JSON`;
    }
    if (e === null || typeof e !== 'object' || Array.isArray(e)) return `console entry ${i} is not a JSON object`;
    const { t, s, l } = e as { t?: unknown; s?: unknown; l?: unknown };
    if (s !== 'out' && s !== 'err') return `console entry ${i}: "s" must be "out" or "err", not ${JSON.stringify(s)?.slice(0, 40)}`;
    if (typeof l !== 'string') return `console entry ${i}: "l" must be a string`;
    if (Buffer.byteLength(l) > MAX_CONSOLE_ENTRY_BYTES) return `console entry ${i}: "l" is ${Buffer.byteLength(l)} bytes, more than ${MAX_CONSOLE_ENTRY_BYTES}; cut it into pieces`;
    out.push({ t: typeof t === 'number' && Number.isFinite(t) ? t : 0, s, l });
  }
  return out;
}

/** The most media entries one batch may carry. */
export const MAX_MEDIA_PER_BATCH = 10_000;

/** A checked media entry; an image still holds its bytes (written to a file by the run). */
export type CheckedMedia = Omit<MediaEntry, 'sha256' | 'bytes' | 'lost'> & { data?: Uint8Array };

/**
 * A batch's media (RecordBatch.media), checked as the clients check them
 * (src/media.ts); a string says why the batch is refused. An image's format
 * and size are what its own bytes say, whatever the entry claims.
 */
export function checkMedia(media: readonly MediaMsg[] | undefined): CheckedMedia[] | string {
  const out: CheckedMedia[] = [];
  const n = media?.length ?? 0;
  if (n > MAX_MEDIA_PER_BATCH) return `${n} media entries in one batch; at most ${MAX_MEDIA_PER_BATCH}`;
  for (let i = 0; i < n; i++) {
    const m = media![i];
    const at = `media entry ${i} (${JSON.stringify(String(m.key).slice(0, 60))})`;
    const badKey = checkKey(m.key ?? '');
    if (badKey) return `media entry ${i}: ${badKey}`;
    const step = Number(m.step);
    if (!Number.isSafeInteger(step) || step < 0) return `${at}: step ${m.step} must be a non-negative integer`;
    const t = Number.isFinite(m.time) ? m.time : 0;
    switch (m.kind) {
      case 'histogram': {
        let counts: Float64Array;
        let edges: Float64Array;
        try {
          counts = f64(m.counts ?? new Uint8Array(0));
          edges = f64(m.edges ?? new Uint8Array(0));
        } catch (e) {
          return `${at}: ${(e as Error).message}`;
        }
        const bad = checkHistogram(counts, edges);
        if (bad) return `${at}: ${bad}`;
        const nonfinite = Number(m.nonfinite ?? 0);
        out.push({ key: m.key, step, t, kind: 'histogram', counts: Array.from(counts), edges: Array.from(edges), nonfinite: Number.isSafeInteger(nonfinite) && nonfinite >= 0 ? nonfinite : 0 });
        break;
      }
      case 'image': {
        const data = m.data ?? new Uint8Array(0);
        const h = sniffImage(data);
        if (typeof h === 'string') return `${at}: ${h}`;
        const caption = m.caption ?? '';
        if (Buffer.byteLength(caption) > MAX_CAPTION_BYTES) return `${at}: the caption is more than ${MAX_CAPTION_BYTES} bytes`;
        out.push({ key: m.key, step, t, kind: 'image', format: h.format, width: h.width, height: h.height, caption, data });
        break;
      }
      case 'text': {
        const text = m.text ?? '';
        if (Buffer.byteLength(text) > MAX_TEXT_BYTES) return `${at}: the text is more than ${MAX_TEXT_BYTES} bytes (1 MiB)`;
        out.push({ key: m.key, step, t, kind: 'text', text });
        break;
      }
      default:
        return `${at}: kind ${JSON.stringify(String(m.kind).slice(0, 40))} is none of ${MEDIA_KINDS.join(', ')}`;
    }
  }
  return out;
}
