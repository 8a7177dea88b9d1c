// Validation of names and ids that reach the disk or the index. The same
// rules run in the client (to fail early, synchronously) and in the daemon
// (for clients in other languages).

/** Run ids become directory names: a conservative alphabet, no dots. */
export const RUN_ID_RE = /^[A-Za-z0-9_-]{1,64}$/;
export const MAX_KEY_BYTES = 256;
export const MAX_LABEL_BYTES = 256;
/**
 * Names export uses for its own columns. A metric by one of these names would
 * give a row two `_step` keys (and a CSV two `_step` columns), so it is refused.
 */
export const RESERVED_KEYS: readonly string[] = ['_step', '_time', '_writer'];

export function checkRunId(id: string): string | null {
  return RUN_ID_RE.test(id) ? null : `run id ${JSON.stringify(id.slice(0, 80))} must be 1-64 characters of A-Z a-z 0-9 _ -`;
}

/** Metric names: 1..256 bytes of UTF-8 without control characters. */
export function checkKey(key: string): string | null {
  if (key.length === 0) return 'metric name is empty';
  if (Buffer.byteLength(key) > MAX_KEY_BYTES) return `metric name ${JSON.stringify(key.slice(0, 40) + '…')} is longer than ${MAX_KEY_BYTES} bytes`;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(key)) return `metric name ${JSON.stringify(key.slice(0, 40))} contains a control character`;
  if ((key as { isWellFormed?: () => boolean }).isWellFormed?.() === false) return `metric name ${JSON.stringify(key.slice(0, 40))} is not valid UTF-16/UTF-8`;
  if (RESERVED_KEYS.includes(key)) return `metric name ${JSON.stringify(key)} is reserved: exports use _step, _time and _writer for the row's own step, time and writer; log it under another name (for example ${JSON.stringify(key.slice(1))}), or pass the step as log(data, { step })`;
  return null;
}

/**
 * A row's metric names after flattening (`{a: {b: 1}}` is `a/b`) must differ:
 * `{'a/b': 1, a: {b: 2}}` names `a/b` twice, and one value would shadow the
 * other. Returns the message for a name seen twice in one row.
 */
export function duplicateKeyMessage(key: string): string {
  return `metric name ${JSON.stringify(key.slice(0, 80))} appears twice in one row (a name with "/" and a nested object flatten to the same name); rename one of them`;
}

/**
 * Finds a key id named twice in one row, without allocating per row: each id
 * remembers the stamp of the last row it was seen in, and stamps only grow.
 */
export class RowKeyCheck {
  private stamps = new Uint32Array(256);
  private stamp = 0;

  /** The first id in `ids[from..to)` that occurs twice, or -1. */
  duplicate(ids: Uint32Array, from: number, to: number, dictionarySize: number): number {
    if (dictionarySize > this.stamps.length) this.stamps = new Uint32Array(Math.max(dictionarySize, this.stamps.length * 2));
    if (++this.stamp === 0xffffffff) (this.stamps.fill(0), (this.stamp = 1));
    for (let p = from; p < to; p++) {
      if (this.stamps[ids[p]] === this.stamp) return ids[p];
      this.stamps[ids[p]] = this.stamp;
    }
    return -1;
  }
}

/** Project, group, name, job type, tags: free text, bounded, no control characters. */
export function checkLabel(what: string, value: string): string | null {
  if (Buffer.byteLength(value) > MAX_LABEL_BYTES) return `${what} is longer than ${MAX_LABEL_BYTES} bytes`;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(value)) return `${what} ${JSON.stringify(value.slice(0, 40))} contains a control character`;
  if ((value as { isWellFormed?: () => boolean }).isWellFormed?.() === false) return `${what} ${JSON.stringify(value.slice(0, 40))} is not valid UTF-8 (a lone surrogate)`;
  return null;
}
