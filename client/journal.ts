// The writer's crash journal (docs/journal.md): every row log() accepted, in a
// file this process maps into memory, until the daemon acknowledges the batch
// that carried it. log() writes the row with plain stores into the mapping
// (no syscall); the kernel keeps the pages when the process dies, however it
// dies, and the daemon ingests them. Needs logd's C addon for mmap; without
// it there is no journal and `problem` says what that costs.
import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { mapFile, unmap, reserve, mappingLost, addonUnavailable } from '../addon/index.js';
import { procStartTime } from '../src/proc.js';
import {
  JOURNAL_MAGIC, JOURNAL_VERSION, H, HEADER_BYTES, CHECK_SUM32, RecordType, SEAL_DROPPED, MAX_IDENTITY_BYTES,
  journalFileName, journalLayout, sum32Words, SUM32_SEED, pad8, type JournalIdentity,
} from '../src/journal.js';

/** Room kept free behind every record: a SEAL (and the PAD it may need) must always fit. */
const SEAL_RESERVE = 64;
/**
 * While the daemon keeps up, the ring wraps back to its start once the tail
 * passed this far (and the backlog is under a third of the lap): the pages
 * in use stay near this many, not the whole journal, and are rewritten hot
 * instead of faulted in fresh.
 */
const SOFT_WRAP_BYTES = 8 * 1024 * 1024;
/** Past SOFT_WRAP_BYTES, while the backlog is too large to wrap early, the early wrap is considered again this often. */
const RECHECK_BYTES = 1024 * 1024;

const encoder = new TextEncoder();

/**
 * The journals one process keeps open get LOGD_JOURNAL_MB each until together they reach this; the writers opened
 * past it get SMALL_JOURNAL_BYTES (or LOGD_JOURNAL_MB, when that is smaller). A process that runs many writers at
 * once (a pool, a sweep in one process, 500 runs in a burst) would otherwise reserve 64 MiB of disk per writer
 * (32 GB for 500) and pay V8 a garbage collection per mapping: V8 counts each mapping's bytes as young external
 * memory until a scavenge promotes it, and collects on the next allocations (a burst of 500 init() in one process
 * spent a third of its time there). A small journal still holds its ring's 8 MiB (about 50 000 rows of 10 metrics)
 * until the daemon acknowledges them; past that, rows wait in memory as with a full journal.
 */
const PROCESS_JOURNAL_BYTES = 128 * 1024 * 1024;
const SMALL_JOURNAL_BYTES = 10 * 1024 * 1024;
let openJournalBytes = 0;

/** This process's start time (it never changes; /proc/self/stat is slow to read in a process with many mappings). */
let startTimeOf: { pid: number; t: number } | null = null;
function ownStartTime(): number {
  if (startTimeOf?.pid !== process.pid) startTimeOf = { pid: process.pid, t: procStartTime(process.pid) ?? 0 };
  return startTimeOf.t;
}

export interface JournalOpen {
  journal: Journal | null;
  /** Why there is no journal (null when there is one, or when none was asked for). */
  problem: string | null;
}

export class Journal {
  private readonly u8: Uint8Array;
  private readonly u32: Uint32Array;
  private readonly f64: Float64Array;
  private readonly keysEnd: number; // absolute byte offset
  private keysTail: number; // absolute byte offset of the next KEY record
  private readonly ringOff: number;
  private readonly ringBytes: number;
  /** Logical ring positions (only grow): the next record, and the first one not freed. */
  private tail = 0;
  private head = 0;
  /** tail % ringBytes, kept so the hot path never divides. */
  private tailRel = 0;
  /** Records that end (with a terminator and a PAD's room) by this ring offset need no wrap decision (see place()). */
  private fastEnd: number;
  /** The end position of every SEAL not yet acknowledged, in seq order. */
  private seals: Array<{ seq: number; end: number }> = [];
  private ackedSeq = 0;
  /** A key could not be journaled: rows naming it could not be read back, so no row is journaled any more. */
  private degraded = false;
  /**
   * A ROW (with ids) was journaled since the last SEAL: a row with the same names may be written as a ROW_SAME,
   * which the reader reads with that ROW's ids. Every batch's first row is written in full, so a reader that
   * starts at the head (always just after a SEAL) has the ids of every row it reads.
   */
  private fullSinceSeal = false;
  notJournaled = 0;
  closed = false;

  private constructor(private readonly buffer: ArrayBuffer, readonly file: string, private readonly size: number) {
    this.u8 = new Uint8Array(buffer);
    this.u32 = new Uint32Array(buffer);
    this.f64 = new Float64Array(buffer);
    const l = journalLayout(size);
    this.keysTail = l.keysOffset;
    this.keysEnd = l.keysOffset + l.keysBytes;
    this.ringOff = l.ringOffset;
    this.ringBytes = l.ringBytes;
    this.fastEnd = Math.min(SOFT_WRAP_BYTES, l.ringBytes);
  }

  /**
   * Creates and maps the journal of one writer in `spoolDir` (the owning
   * daemon's spool). Never throws: `problem` says why there is none.
   */
  static open(spoolDir: string, id: Omit<JournalIdentity, 'pid' | 'host' | 'startTime' | 'client'>, megabytes: number): JournalOpen {
    if (megabytes <= 0) return { journal: null, problem: null };
    if (megabytes > 1024) return { journal: null, problem: `no crash journal: LOGD_JOURNAL_MB=${megabytes} is more than 1024, the most the daemon reads back; set at most 1024` };
    const missing = addonUnavailable();
    if (missing) return { journal: null, problem: `no crash journal: ${missing}; rows logged in the last flush interval are lost if this process is killed` };
    let size = Math.max(64 * 1024, Math.floor((megabytes * 1024 * 1024) / 8) * 8);
    if (openJournalBytes + size > PROCESS_JOURNAL_BYTES) size = Math.min(size, SMALL_JOURNAL_BYTES);
    const file = path.join(spoolDir, journalFileName(id.runId, id.writerId));
    let fd = -1;
    try {
      fd = fs.openSync(file, fs.constants.O_RDWR | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW, 0o600);
      // Blocks first: a store into a mapped hole of a full filesystem is a SIGBUS, which would kill the trainer.
      reserve(fd, size);
      Journal.writeHeader(fd, { ...id, pid: process.pid, host: os.hostname(), startTime: ownStartTime(), client: 'ts' }, size);
      const buffer = mapFile(fd, size)!;
      openJournalBytes += size;
      return { journal: new Journal(buffer, file, size), problem: null };
    } catch (e) {
      const why = (e as NodeJS.ErrnoException).code ?? (e as Error).message;
      if (fd >= 0) {
        try {
          fs.rmSync(file, { force: true }); // only ours: O_EXCL made it
        } catch {
          /* the directory went away */
        }
      }
      return { journal: null, problem: `no crash journal in ${spoolDir} (${why}); rows logged in the last flush interval are lost if this process is killed` };
    } finally {
      if (fd >= 0) fs.closeSync(fd); // the mapping keeps the pages
    }
  }

  /**
   * The header goes in with pwrite, before the file is mapped: on ext4 the first store into a mapping of a
   * freshly fallocated file costs about 4 ms (the file's first page_mkwrite), a pwrite of the same page 0.3 ms,
   * after which stores into the mapping fault cheaply. The first pages of the key region and the ring are
   * written (zeros) the same way, so that log()'s first key and row do not pay it either. The magic goes last,
   * in its own write: a header without it is not a journal yet.
   */
  private static writeHeader(fd: number, id: JournalIdentity, size: number): void {
    const l = journalLayout(size);
    const identity = Buffer.from(JSON.stringify(id));
    if (identity.byteLength > MAX_IDENTITY_BYTES) throw new Error('journal identity too long');
    const u8 = new Uint8Array(HEADER_BYTES);
    const u32 = new Uint32Array(u8.buffer);
    const f64 = new Float64Array(u8.buffer);
    u8.set(identity, H.identity);
    u32[H.version >> 2] = JOURNAL_VERSION;
    u32[H.checkKind >> 2] = CHECK_SUM32;
    f64[H.head >> 3] = 0;
    f64[H.ackedSeq >> 3] = 0;
    u32[H.keysOffset >> 2] = l.keysOffset;
    u32[H.keysBytes >> 2] = l.keysBytes;
    u32[H.ringOffset >> 2] = l.ringOffset;
    u32[H.ringBytes >> 2] = l.ringBytes;
    u32[H.identityLength >> 2] = identity.byteLength;
    u32[H.identityCrc >> 2] = crc32(identity);
    writeAll(fd, u8, 0);
    writeAll(fd, ZERO_PAGE, l.keysOffset);
    writeAll(fd, ZERO_PAGE, l.ringOffset);
    writeAll(fd, Buffer.from(JOURNAL_MAGIC, 'latin1'), H.magic);
  }

  /** Defines key `id` (the writer's dictionary id). False when the key region is full. */
  key(id: number, name: string): boolean {
    if (this.closed || this.degraded) return false;
    const max = name.length * 3;
    const len = 24 + pad8(max);
    if (this.keysTail + len + 8 > this.keysEnd) return this.degrade();
    const w = this.keysTail >> 2;
    const written = encoder.encodeInto(name, this.u8.subarray(this.keysTail + 24, this.keysTail + 24 + max)).written;
    const real = 24 + pad8(written);
    this.u8.fill(0, this.keysTail + 24 + written, this.keysTail + real);
    this.u32[w + 2] = RecordType.KEY;
    this.u32[w + 3] = id;
    this.u32[w + 4] = written;
    this.u32[w + 5] = 0;
    this.commit(w, real, this.keysTail + real < this.keysEnd);
    this.keysTail += real;
    return true;
  }

  private degrade(): false {
    this.degraded = true;
    this.fastEnd = 0;
    return false;
  }

  /**
   * Journals one row: the pairs `kid/vals[from, to)`. Counted in notJournaled when it does not fit. `same`: the
   * row names the keys of the last row journaled in full, in the same order (the open batch's same-names path);
   * it is then written without its ids (ROW_SAME), unless a SEAL came between.
   */
  row(step: number, time: number, kid: Uint32Array, vals: Float64Array, from: number, to: number, same = false): void {
    const n = to - from;
    const compact = same && this.fullSinceSeal;
    const idWords = compact ? 0 : (n + 1) & ~1;
    const len = 32 + idWords * 4 + n * 8;
    const at = this.place(len, SEAL_RESERVE);
    if (at < 0) {
      if (!compact) this.fullSinceSeal = false; // the last full row in the ring no longer names this row's keys
      this.notJournaled++;
      if (!this.closed && this.f64.length) this.f64[H.notJournaled >> 3] = this.notJournaled;
      return;
    }
    const w = at >> 2;
    const u32 = this.u32;
    const f64 = this.f64;
    const type = compact ? RecordType.ROW_SAME : RecordType.ROW;
    // The checksum (sum32Words) is summed while the words are written: one pass.
    u32[w + 2] = type;
    u32[w + 3] = n;
    f64[(w >> 1) + 2] = step;
    f64[(w >> 1) + 3] = time;
    let sum = (type + n + u32[w + 4] + u32[w + 5] + u32[w + 6] + u32[w + 7]) | 0;
    if (!compact) {
      for (let i = 0; i < n; i++) {
        const k = kid[from + i];
        u32[w + 8 + i] = k;
        sum = (sum + k) | 0;
      }
      if (n & 1) u32[w + 8 + n] = 0;
      this.fullSinceSeal = true;
    }
    // The values go as 32-bit word pairs, summed as they are copied: integer work only, one pass.
    if (vals !== this.srcF64) this.viewValues(vals);
    const src = this.srcU32;
    const v = w + 8 + idWords;
    for (let i = 0, j = from << 1, m = n << 1; i < m; i++, j++) {
      const x = src[j];
      u32[v + i] = x;
      sum = (sum + x) | 0;
    }
    const words = len >> 2;
    u32[w + 1] = (sum ^ SUM32_SEED) >>> 0;
    if (this.tailRel + len < this.ringBytes) u32[w + words] = 0;
    u32[w] = len; // last: the record exists from this store on
    this.tail += len;
    this.tailRel += len;
  }

  /** The open batch's values array as 32-bit words (a new view only when the batch grew its array). */
  private srcF64: Float64Array | null = null;
  private srcU32: Uint32Array = new Uint32Array(0);

  private viewValues(vals: Float64Array): void {
    this.srcF64 = vals;
    this.srcU32 = new Uint32Array(vals.buffer, vals.byteOffset, vals.length * 2);
  }

  /** A summary (1), config (2) or console (3) update as JSON, or a media value (4) as an encoded Media message. */
  update(kind: number, payload: string | Uint8Array): void {
    const bytes = typeof payload === 'string' ? Buffer.from(payload) : payload;
    const len = 24 + pad8(bytes.byteLength);
    const at = this.place(len, SEAL_RESERVE);
    if (at < 0) return; // kept in memory as before; only rows are counted
    const w = at >> 2;
    this.u32[w + 2] = RecordType.UPDATE;
    this.u32[w + 3] = kind;
    this.u32[w + 4] = bytes.byteLength;
    this.u32[w + 5] = 0;
    this.u8.set(bytes, at + 24);
    this.u8.fill(0, at + 24 + bytes.byteLength, at + len);
    this.commitRing(w, len);
  }

  /** Closes the records since the last SEAL as batch `seq` (`dropped`: the client dropped that batch). */
  seal(seq: number, dropped = false): void {
    if (this.closed) return;
    const at = this.place(16, 0);
    if (at < 0) {
      this.degrade(); // cannot happen while rows keep SEAL_RESERVE free; never mislabel rows if it does
      return;
    }
    const w = at >> 2;
    this.u32[w + 2] = RecordType.SEAL | ((dropped ? SEAL_DROPPED : 0) << 16);
    this.u32[w + 3] = seq;
    this.commitRing(w, 16);
    this.seals.push({ seq, end: this.tail });
    this.fullSinceSeal = false;
  }

  /** The daemon acknowledged every batch up to `seq`: their records are free. */
  acked(seq: number): void {
    if (this.closed || seq <= this.ackedSeq) return;
    let end = -1;
    let n = 0;
    while (n < this.seals.length && this.seals[n].seq <= seq) end = this.seals[n++].end;
    this.ackedSeq = seq;
    this.f64[H.ackedSeq >> 3] = seq; // first: a reader that sees it with the old head re-reads, never mislabels
    if (n > 0) {
      this.seals.splice(0, n);
      this.head = end;
      this.f64[H.head >> 3] = end;
    }
  }

  /**
   * Where a record of `len` bytes goes (absolute offset), wrapping with a PAD
   * when it does not fit before the ring's end; -1 when the ring is full.
   * The common case is one compare against `fastEnd` and one for room: the
   * wrap decisions (the ring's end, the early wrap, a closed journal) are
   * placeWrapping's, taken again only when a record would pass `fastEnd`.
   */
  private place(len: number, reserve: number): number {
    const rel = this.tailRel;
    if (rel + len + 16 <= this.fastEnd) {
      return this.tail + len + 16 + reserve - this.head <= this.ringBytes ? this.ringOff + rel : -1;
    }
    return this.placeWrapping(len, reserve);
  }

  private fits(pad: number, len: number, reserve: number): boolean {
    return this.tail + pad + len + 16 + reserve - this.head <= this.ringBytes;
  }

  private placeWrapping(len: number, reserve: number): number {
    if (this.closed || this.degraded) {
      this.fastEnd = 0;
      return -1;
    }
    const ring = this.ringBytes;
    const rel = this.tailRel;
    let padLen = 0;
    if (rel + len + 16 > ring) padLen = ring - rel;
    else if (rel >= SOFT_WRAP_BYTES && this.tail - this.head <= rel / 3 && this.fits(ring - rel, len, reserve)) {
      // Early wrap: the daemon keeps up, so the ring's start is long free again and the pages in use stay few.
      // Until the head follows into the new lap, the new lap can grow only up to where the head is (at least
      // 2/3 of this lap): twice the backlog, room for the batches in flight.
      padLen = ring - rel;
    }
    if (!this.fits(padLen, len, reserve)) return -1;
    if (padLen > 0) {
      const w = (this.ringOff + rel) >> 2;
      this.u32[w + 1] = 0;
      this.u32[w + 2] = RecordType.PAD;
      this.u32[w + 3] = 0;
      this.u32[this.ringOff >> 2] = 0; // terminator at the ring's start, before the PAD exists
      this.u32[w] = padLen;
      this.tail += padLen;
      this.tailRel = 0;
    }
    // The next decision: at the soft wrap point, or (past it, the daemon behind) after another RECHECK_BYTES, when
    // the head may have moved far enough for an early wrap; never past the ring's end.
    const t = this.tailRel;
    this.fastEnd = Math.min(ring, t < SOFT_WRAP_BYTES ? SOFT_WRAP_BYTES : t + len + RECHECK_BYTES);
    return this.ringOff + t;
  }

  /** Checksum, terminator, then the length: the record exists from that last store on. */
  private commitRing(w: number, len: number): void {
    this.commit(w, len, this.tailRel + len < this.ringBytes);
    this.tail += len;
    this.tailRel += len;
  }

  private commit(w: number, len: number, terminate: boolean): void {
    const words = len >> 2;
    this.u32[w + 1] = sum32Words(this.u32, w + 2, w + words);
    if (terminate) this.u32[w + words] = 0;
    this.u32[w] = len;
  }

  /**
   * The file was truncated under the mapping (another process: a cleanup script, a tool that rewrites files). The
   * addon kept the process alive (a store past the file's end is a SIGBUS); what is written now reaches no file.
   */
  lost(): boolean {
    return !this.closed && mappingLost(this.buffer);
  }

  /** Unmaps the journal; `remove` deletes the file (everything in it is acknowledged, or delivered otherwise). */
  close(remove: boolean): void {
    if (this.closed) return;
    this.closed = true;
    this.fastEnd = 0;
    openJournalBytes -= this.size;
    if (remove) {
      try {
        fs.rmSync(this.file, { force: true });
      } catch {
        /* the spool went away; nothing to keep */
      }
    }
    unmap(this.buffer);
  }
}

const ZERO_PAGE = new Uint8Array(4096);

function writeAll(fd: number, b: Uint8Array, at: number): void {
  for (let off = 0; off < b.byteLength;) off += fs.writeSync(fd, b, off, b.byteLength - off, at + off);
}

let crcTable: Int32Array | null = null;
/** CRC-32 (zlib's) of the identity, written once per journal: a table, not node:zlib, which the client loads lazily. */
function crc32(b: Uint8Array): number {
  if (!crcTable) {
    crcTable = new Int32Array(256);
    for (let i = 0; i < 256; i++) {
      let c = i;
      for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
      crcTable[i] = c;
    }
  }
  let c = -1;
  for (let i = 0; i < b.length; i++) c = crcTable[(c ^ b[i]) & 0xff] ^ (c >>> 8);
  return (c ^ -1) >>> 0;
}
