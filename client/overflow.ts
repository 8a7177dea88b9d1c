// Past the memory bound, sealed batches wait in a private file instead of
// RAM (LOGD_DIR/spool/<run>--<writer>.overflow): training never blocks and
// nothing is dropped while the daemon is stopped or slow. They are read back
// in order as acknowledgements free memory.
import fs from 'node:fs';
import path from 'node:path';

export interface Sealed { seq: number; bytes: Uint8Array }

export class Overflow {
  private fd: number | null = null;
  private end = 0;
  private queue: Array<{ seq: number; offset: number; length: number }> = [];
  bytes = 0;

  constructor(private file: string) {}

  get count(): number {
    return this.queue.length;
  }

  /**
   * Keeps a batch on disk. Returns the I/O error (ENOSPC, EACCES, ...) when
   * it cannot: never throws, since it runs inside log().
   */
  push(s: Sealed): Error | null {
    try {
      if (this.fd === null) {
        fs.mkdirSync(path.dirname(this.file), { recursive: true, mode: 0o700 });
        this.fd = fs.openSync(this.file, 'w+', 0o600);
        this.end = 0;
      }
      let done = 0;
      while (done < s.bytes.byteLength) done += fs.writeSync(this.fd, s.bytes, done, s.bytes.byteLength - done, this.end + done);
    } catch (e) {
      if (this.queue.length === 0) {
        // Nothing kept: no file left behind (it may exist without an open fd when open itself failed).
        this.clear();
        try {
          fs.rmSync(this.file, { force: true });
        } catch {
          /* not there */
        }
      }
      return e as Error;
    }
    this.queue.push({ seq: s.seq, offset: this.end, length: s.bytes.byteLength });
    this.end += s.bytes.byteLength;
    this.bytes += s.bytes.byteLength;
    return null;
  }

  /** Takes batches from the front, up to `maxBytes` (at least one). */
  take(maxBytes: number): Sealed[] {
    const out: Sealed[] = [];
    let taken = 0;
    while (this.queue.length > 0 && (out.length === 0 || taken + this.queue[0].length <= maxBytes)) {
      const q = this.queue.shift()!;
      const bytes = new Uint8Array(q.length);
      fs.readSync(this.fd!, bytes, 0, q.length, q.offset);
      out.push({ seq: q.seq, bytes });
      taken += q.length;
      this.bytes -= q.length;
    }
    if (this.queue.length === 0) this.clear();
    return out;
  }

  all(): Sealed[] {
    return this.queue.length ? this.take(Infinity) : [];
  }

  clear(): void {
    if (this.fd !== null) {
      fs.closeSync(this.fd);
      this.fd = null;
      try {
        fs.rmSync(this.file, { force: true });
      } catch {
        /* the file is gone with its directory, or was never made */
      }
    }
    this.queue = [];
    this.bytes = 0;
  }
}
