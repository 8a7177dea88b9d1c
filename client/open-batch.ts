// The open batch of one writer: log()'s rows appended to columnar typed
// arrays, names interned into the writer's dictionary, and sealing, which
// encodes them once into a RecordBatch. No I/O and no timers: the stream, the
// acknowledgements and the spill are the writer's (client/writer.ts).
import { encode } from './transport/codec.js';
import { checkKey, duplicateKeyMessage, RowKeyCheck } from '../src/names.js';
import { toJson } from '../src/json.js';
import type { Journal } from './journal.js';
import { MAX_JOURNALED_MEDIA_BYTES, UPDATE_CONFIG, UPDATE_CONSOLE, UPDATE_MEDIA, UPDATE_SUMMARY } from '../src/journal.js';
import { MediaValue } from './media/index.js';
import { MEDIA_BATCH_BYTES } from '../src/media.js';
import type { MediaMsg } from '../src/wire.js';

const MAX_ROWS = 8192;
/** Marks a row's collected names as not flat (a key that is not a number); no key can be this (empty). */
const FLAT_NOT = '';
const MAX_PAIRS = 128 * 1024;

/** What a sealed batch took from the open one, to be put back when the batch is dropped. */
export interface Unsealed { keys: number; summary: string[]; config: string[]; console: string[] }

export class OpenBatch {
  // dictionary: key id = index in `keys`; `keysSealed` of them went out in sealed batches
  private ids = new Map<string, number>();
  /** Refuses a row that names one key twice (after flattening). */
  private readonly rowKeys = new RowKeyCheck();
  readonly keys: string[] = [];
  private keysSealed = 0;
  // the rows, columnar
  private steps = new Float64Array(256);
  private times = new Float64Array(256);
  private counts = new Uint32Array(256);
  private kid = new Uint32Array(4096);
  private vals = new Float64Array(4096);
  private rows = 0;
  private pairs = 0;
  private summaryUpdates: string[] = [];
  private configUpdates: string[] = [];
  /** Console output captured since the last seal (client/console-capture.ts), as RecordBatch.console_json entries. */
  private consoleEntries: string[] = [];
  /** Characters of console text in the open batch: the capture's bound per flush interval counts them. */
  consoleChars = 0;
  /** Histograms, images and text of the open batch (journaled by add(), up to MAX_JOURNALED_MEDIA_BYTES each), and their bytes. */
  private media: MediaMsg[] = [];
  private mediaBytes = 0;
  /** The media of the row being added: kept only when the whole row is good. */
  private rowMedia: Array<[string, MediaValue]> = [];
  /** The writer's crash journal: every accepted row and update also goes there (client/journal.ts). */
  journal: Journal | null = null;

  get rowCount(): number {
    return this.rows;
  }

  /** Large enough to seal now, without waiting for the flush timer. */
  get full(): boolean {
    return this.rows >= MAX_ROWS || this.pairs >= MAX_PAIRS || this.mediaBytes >= MEDIA_BATCH_BYTES;
  }

  /** Something to seal: rows, updates, or names no sealed batch carried yet. */
  get hasContent(): boolean {
    return this.rows > 0 || this.summaryUpdates.length > 0 || this.configUpdates.length > 0 || this.consoleEntries.length > 0 || this.media.length > 0 || this.keysSealed !== this.keys.length;
  }

  /** The dictionary as the daemon knows it from sealed batches (what OpenWriter sends). */
  sealedKeys(): string[] {
    return this.keys.slice(0, this.keysSealed);
  }

  /**
   * The names, in order, and ids of the last row that was flat and all numbers (a training loop logs the same
   * names step after step): a row that names them again, in the same order, takes their ids without a lookup,
   * and is known to name no key twice (see addSameNames).
   */
  private lastNames: string[] = [];
  private lastIds = new Uint32Array(64);

  /** Appends one row; a bad row throws a TypeError and leaves nothing behind. */
  add(data: Record<string, unknown>, step: number, time: number): void {
    const start = this.pairs;
    if (this.lastNames.length > 0 && this.addSameNames(data, start)) {
      this.endRow(start, step, time, true);
      return;
    }
    const names: string[] = [];
    try {
      this.putObject('', data, names);
      const twice = this.pairs - start > 1 ? this.rowKeys.duplicate(this.kid, start, this.pairs, this.keys.length) : -1;
      if (twice >= 0) throw new TypeError(`logd: ${duplicateKeyMessage(this.keys[twice])}`);
      if (this.rowMedia.length > 1) {
        const seen = new Set<string>();
        for (const [k] of this.rowMedia) {
          if (seen.has(k)) throw new TypeError(`logd: ${duplicateKeyMessage(k)}`);
          seen.add(k);
        }
      }
    } catch (e) {
      this.pairs = start;
      this.rowMedia.length = 0;
      throw e;
    }
    if (this.rowMedia.length > 0) {
      for (const [k, v] of this.rowMedia) {
        const msg = v.toMsg(k, step, time);
        this.media.push(msg);
        this.mediaBytes += v.size;
        // Journaled as the wire carries it, so a value logged just before a kill survives it (large images excepted).
        if (this.journal !== null && v.size <= MAX_JOURNALED_MEDIA_BYTES) this.journal.update(UPDATE_MEDIA, encode('Media', msg as unknown as Record<string, unknown>));
      }
      this.rowMedia.length = 0;
      if (this.pairs === start) return; // media only: no row of numbers
    } else {
      this.rememberNames(names[0] === FLAT_NOT ? null : names, start);
    }
    this.endRow(start, step, time);
  }

  /**
   * The fast path of add(): `data` names exactly the last flat row's keys, in the same order, each a number.
   * False (and nothing written) at the first difference; the general path then takes the row.
   */
  private addSameNames(data: Record<string, unknown>, start: number): boolean {
    const names = this.lastNames;
    const n = names.length;
    if (start + n > this.kid.length) return false;
    let i = 0;
    for (const k in data) {
      const v = data[k];
      if (i === n || k !== names[i] || typeof v !== 'number') return false;
      this.kid[start + i] = this.lastIds[i];
      this.vals[start + i] = v;
      i++;
    }
    if (i !== n) return false;
    this.pairs = start + n;
    return true;
  }

  /** After the general path took a row: remember its names (collected by putObject) when it was flat and all numbers. */
  private rememberNames(names: string[] | null, start: number): void {
    const n = this.pairs - start;
    if (names === null || names.length !== n || n === 0) {
      this.lastNames = [];
      return;
    }
    if (this.lastIds.length < n) this.lastIds = new Uint32Array(n);
    this.lastIds.set(this.kid.subarray(start, start + n));
    this.lastNames = names;
  }

  /** `same`: the row took the same-names path (the journal may then write it without its ids). */
  private endRow(start: number, step: number, time: number, same = false): void {
    if (this.rows === this.steps.length) this.growRows();
    this.steps[this.rows] = step;
    this.times[this.rows] = time;
    this.counts[this.rows++] = this.pairs - start;
    if (this.journal !== null) this.journal.row(step, time, this.kid, this.vals, start, this.pairs, same);
  }

  summary(obj: Record<string, unknown>): void {
    const json = toJson(obj);
    this.summaryUpdates.push(json);
    this.journal?.update(UPDATE_SUMMARY, json);
  }

  config(obj: Record<string, unknown>): void {
    const json = toJson(obj);
    this.configUpdates.push(json);
    this.journal?.update(UPDATE_CONFIG, json);
  }

  /** One console entry ({t, s, l} as JSON), journaled too: a line printed just before a kill is recovered with the rows. */
  console(entryJson: string, chars: number): void {
    this.consoleEntries.push(entryJson);
    this.journal?.update(UPDATE_CONSOLE, entryJson);
    this.consoleChars += chars;
  }

  /** The writer's code gave a step explicitly (sticky): sent on every batch, rank health judges its steps. */
  stepsGiven = false;

  /** Encodes the open batch as batch `seq` and starts an empty one. */
  seal(seq: number, droppedRows: number): { bytes: Uint8Array; rows: number; taken: Unsealed } {
    const u8 = (a: Float64Array | Uint32Array, n: number) => new Uint8Array(a.buffer, 0, n * a.BYTES_PER_ELEMENT);
    const rows = this.rows;
    const bytes = encode('WriteRequest', {
      batch: {
        seq, newKeys: this.keys.slice(this.keysSealed), newKeysFirst: this.keysSealed, rows,
        steps: u8(this.steps, rows), times: u8(this.times, rows), counts: u8(this.counts, rows),
        keyIds: u8(this.kid, this.pairs), values: u8(this.vals, this.pairs),
        summaryJson: this.summaryUpdates, configJson: this.configUpdates, droppedRows, stepsGiven: this.stepsGiven,
        consoleJson: this.consoleEntries, media: this.media,
      },
    });
    const taken: Unsealed = { keys: this.keysSealed, summary: this.summaryUpdates, config: this.configUpdates, console: this.consoleEntries }; // a dropped batch's media are dropped with its rows
    this.keysSealed = this.keys.length;
    this.rows = 0;
    this.pairs = 0;
    this.summaryUpdates = [];
    this.configUpdates = [];
    this.consoleEntries = [];
    this.consoleChars = 0;
    this.media = [];
    this.mediaBytes = 0;
    return { bytes, rows, taken };
  }

  /**
   * A sealed batch was dropped (memory and disk full): its dictionary entries
   * and updates go out again with the next batch; only its rows are gone.
   */
  unseal(taken: Unsealed): void {
    this.keysSealed = taken.keys;
    this.summaryUpdates = taken.summary.concat(this.summaryUpdates);
    this.configUpdates = taken.config.concat(this.configUpdates);
    this.consoleEntries = taken.console.concat(this.consoleEntries);
  }

  private intern(k: string): number {
    const bad = checkKey(k);
    if (bad) throw new TypeError(`logd: ${bad}`);
    const id = this.keys.length;
    this.keys.push(k);
    this.ids.set(k, id);
    this.journal?.key(id, k);
    return id;
  }

  private growRows(): void {
    const n = this.steps.length * 2;
    const g64 = (a: Float64Array) => { const b = new Float64Array(n); b.set(a); return b; };
    this.steps = g64(this.steps);
    this.times = g64(this.times);
    const c = new Uint32Array(n); c.set(this.counts); this.counts = c;
  }

  private growPairs(): void {
    const n = this.kid.length * 2;
    const k = new Uint32Array(n); k.set(this.kid); this.kid = k;
    const v = new Float64Array(n); v.set(this.vals); this.vals = v;
  }

  private put(key: string, v: number): void {
    const id = this.ids.get(key) ?? this.intern(key);
    if (this.pairs === this.kid.length) this.growPairs();
    this.kid[this.pairs] = id;
    this.vals[this.pairs++] = v;
  }

  /** `names` (the top level only): the keys of number values, in order; FLAT_NOT first when any value is not a number. */
  private putObject(prefix: string, obj: Record<string, unknown>, names?: string[]): void {
    for (const k in obj) {
      const v = obj[k];
      if (names !== undefined) {
        if (typeof v === 'number') names.push(k);
        else names[0] = FLAT_NOT;
      }
      if (typeof v === 'number') this.put(prefix + k, v);
      else if (typeof v === 'boolean') this.put(prefix + k, v ? 1 : 0);
      else if (typeof v === 'bigint') this.put(prefix + k, Number(v));
      else if (v instanceof MediaValue) this.rowMedia.push([checkedKey(prefix + k), v]);
      else if (v !== null && typeof v === 'object' && !Array.isArray(v) && !ArrayBuffer.isView(v)) this.putObject(`${prefix}${k}/`, v as Record<string, unknown>);
      else if (v === undefined || v === null) continue;
      else throw new TypeError(`logd: ${JSON.stringify(prefix + k)} is ${describe(v)}; log() takes numbers, booleans, nested objects of them, and logd.Histogram, logd.Image and logd.Text (wrap a string in new Text(s), an array of numbers in new Histogram(a))`);
    }
  }
}

function checkedKey(k: string): string {
  const bad = checkKey(k);
  if (bad) throw new TypeError(`logd: ${bad}`);
  return k;
}

function describe(v: unknown): string {
  if (Array.isArray(v)) return 'an array';
  if (ArrayBuffer.isView(v)) return `a ${v.constructor.name}`;
  return `a ${typeof v}`;
}
