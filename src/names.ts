// Validation of names and ids that reach the disk or the index. The same
// rules run in the client (to fail early, synchronously) and in the daemon
// (for clients in other languages).

/** Run ids become directory names: a conservative alphabet, no dots. */
export const RUN_ID_RE = /^[A-Za-z0-9_-]{1,64}$/;
export const MAX_KEY_BYTES = 256;
export const MAX_LABEL_BYTES = 256;

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
  return null;
}

/** Project, group, name, job type, tags: free text, bounded, no control characters. */
export function checkLabel(what: string, value: string): string | null {
  if (Buffer.byteLength(value) > MAX_LABEL_BYTES) return `${what} is longer than ${MAX_LABEL_BYTES} bytes`;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(value)) return `${what} ${JSON.stringify(value.slice(0, 40))} contains a control character`;
  if ((value as { isWellFormed?: () => boolean }).isWellFormed?.() === false) return `${what} ${JSON.stringify(value.slice(0, 40))} is not valid UTF-8 (a lone surrogate)`;
  return null;
}
