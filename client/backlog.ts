// A writer's backlog: the sealed batches the daemon has not acknowledged yet,
// in seq order. They are kept in memory up to LOGD_MAX_BUFFER_MB; past that,
// and until the ones in memory are acknowledged, in the overflow file
// (client/overflow.ts), from which acknowledgements bring them back. No
// stream and no policy here: what to say or drop when both are full is the
// writer's (client/writer.ts).
import { Overflow, type Sealed } from './overflow.js';

export type { Sealed };

export class Backlog {
  /** In memory, in seq order: what a stream sends. */
  private mem: Sealed[] = [];
  private memBytes = 0;
  private readonly overflow: Overflow;

  constructor(readonly overflowFile: string, private readonly maxBytes: number) {
    this.overflow = new Overflow(overflowFile);
  }

  /** The batches in memory, oldest first. */
  get batches(): readonly Sealed[] {
    return this.mem;
  }

  /** Bytes of the batches in memory. */
  get bytes(): number {
    return this.memBytes;
  }

  /** Batches waiting in the overflow file. */
  get onDisk(): number {
    return this.overflow.count;
  }

  /** Nothing in memory and nothing on disk: everything sealed was acknowledged. */
  get empty(): boolean {
    return this.mem.length === 0 && this.overflow.count === 0;
  }

  /** Would a batch of `bytes` go to disk (memory at its bound, or batches already wait there, which go first)? */
  wouldOverflow(bytes: number): boolean {
    return this.overflow.count > 0 || this.memBytes + bytes > this.maxBytes;
  }

  /** Keeps a batch in memory. */
  keep(s: Sealed): void {
    this.mem.push(s);
    this.memBytes += s.bytes.byteLength;
  }

  /** Keeps a batch in the overflow file; the I/O error when the disk cannot take it (never throws: runs inside log()). */
  keepOnDisk(s: Sealed): Error | null {
    return this.overflow.push(s);
  }

  /**
   * Frees every batch up to `seq`, and brings batches back from disk while memory is under half its bound.
   * Returns how many left memory from its front (a stream's sent index moves back by that many).
   */
  acked(seq: number): number {
    let n = 0;
    while (n < this.mem.length && this.mem[n].seq <= seq) {
      this.memBytes -= this.mem[n].bytes.byteLength;
      n++;
    }
    if (n > 0) {
      this.mem.splice(0, n);
      this.refill();
    }
    return n;
  }

  /** Removes the batch `seq` (the daemon refused it for good); its index in memory, or -1. */
  remove(seq: number): number {
    const i = this.mem.findIndex((s) => s.seq === seq);
    if (i >= 0) {
      this.memBytes -= this.mem[i].bytes.byteLength;
      this.mem.splice(i, 1);
    }
    return i;
  }

  /** Is every batch still kept numbered above `seq`? */
  allAfter(seq: number): boolean {
    return this.mem.every((s) => s.seq > seq);
  }

  /** Everything kept, memory then disk, in seq order; the disk's part leaves the overflow file (for a spill). */
  takeAll(): Sealed[] {
    return this.mem.concat(this.overflow.all());
  }

  /** Removes the overflow file and what it held (the spill or the daemon has it all). */
  clearDisk(): void {
    this.overflow.clear();
  }

  private refill(): void {
    const half = this.maxBytes / 2;
    if (this.overflow.count === 0 || this.memBytes > half) return;
    for (const s of this.overflow.take(half - this.memBytes)) this.keep(s);
  }
}
