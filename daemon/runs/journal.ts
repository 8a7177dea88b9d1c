// Recovery of writers' crash journals (docs/journal.md): the rows a writer's
// log() accepted and the daemon had not acknowledged when the writer died,
// read back from the file it had mapped. Read only once the writer can no
// longer write to it (its process is gone, or the run's owner finished), and
// fed through the same path as a stream's batches, so a batch the daemon
// already had is dropped by seq and every row is stored once.
//
// A journal is untrusted input: another local process of the same user, a
// damaged disk or a truncated copy may have written it. It is never followed
// through a symlink, never read past 1 GiB, checked record by record, and
// ingested only into the run whose token it carries.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import {
  JOURNAL_MAGIC, JOURNAL_VERSION, H, HEADER_BYTES, RECORD_HEADER_BYTES, RecordType, CHECK_SUM32, CHECK_CRC32, SEAL_DROPPED,
  UPDATE_SUMMARY, UPDATE_CONFIG, UPDATE_CONSOLE, UPDATE_MEDIA, MAX_JOURNAL_BYTES, MAX_IDENTITY_BYTES, sum32Words, pad8, type JournalIdentity,
} from '../../src/journal.js';
import { bytesOf, type RecordBatchMsg } from '../../src/wire.js';
import { sameSecret } from '../../src/token.js';
import { isAlive } from './liveness.js';
import { checkConsole, checkMedia, MAX_MEDIA_PER_BATCH } from './validate.js';
import { messageType } from '../../src/proto.js';
import type { MediaMsg } from '../../src/wire.js';
import type { Registry } from './registry.js';

export interface JournalContents {
  identity: JournalIdentity;
  keys: string[];
  batches: RecordBatchMsg[];
  /** Valid records read (keys, rows, updates, seals). */
  records: number;
  /** Rows the writer could not journal (its ring was full). */
  notJournaled: number;
  /** What stopped the read before the end, with its position; null when it ended cleanly. */
  damaged: string | null;
}

const CHUNK = 1024 * 1024;
/** Journals read and waiting for their rows to be durable before they are removed. */
const ingested = new Set<string>();

/** Reads [offset, offset+len) of a file through a sequential 1 MiB window. */
class Window {
  private buf = Buffer.alloc(0);
  private start = 0;
  constructor(private fd: number, private size: number) {}

  at(offset: number, len: number, chunk = CHUNK): Buffer | null {
    if (offset < 0 || offset + len > this.size) return null;
    if (offset < this.start || offset + len > this.start + this.buf.byteLength) {
      const want = Math.min(Math.max(len, chunk), this.size - offset);
      const b = Buffer.allocUnsafeSlow(pad8(want)); // own ArrayBuffer at offset 0: aligned views
      const got = fs.readSync(this.fd, b, 0, want, offset);
      if (got < len) return null;
      this.buf = b.subarray(0, got);
      this.start = offset;
    }
    return this.buf.subarray(offset - this.start, offset - this.start + len);
  }
}

class OpenBatch {
  steps: number[] = [];
  times: number[] = [];
  counts: number[] = [];
  ids: number[] = [];
  vals: number[] = [];
  summary: string[] = [];
  config: string[] = [];
  console: string[] = [];
  media: MediaMsg[] = [];
  private lastConsole: { t: number; s: string; l: string } | null = null;
  /**
   * A journaled console write: writes are journaled as printed (print("a", b) is several), so a write that does
   * not end its line is joined with the next one of its stream, as the client's own batches would have had it.
   */
  addConsole(e: { t: number; s: string; l: string }): void {
    const last = this.lastConsole;
    if (last && last.s === e.s && !last.l.endsWith('\n') && last.l.length + e.l.length <= 16 * 1024) {
      last.l += e.l;
      this.console[this.console.length - 1] = JSON.stringify(last);
      return;
    }
    this.lastConsole = { ...e };
    this.console.push(JSON.stringify(e));
  }
  get empty(): boolean {
    return this.steps.length === 0 && this.summary.length === 0 && this.config.length === 0 && this.console.length === 0 && this.media.length === 0;
  }
  toMsg(seq: number): RecordBatchMsg {
    return {
      seq, newKeys: [], newKeysFirst: 0, rows: this.steps.length,
      steps: bytesOf(new Float64Array(this.steps)), times: bytesOf(new Float64Array(this.times)), counts: bytesOf(new Uint32Array(this.counts)),
      keyIds: bytesOf(new Uint32Array(this.ids)), values: bytesOf(new Float64Array(this.vals)),
      summaryJson: this.summary, configJson: this.config, consoleJson: this.console, media: this.media,
    };
  }
}

/** A journaled Media message, decoded and checked; null when it is not one the daemon would store. */
function mediaOf(bytes: Uint8Array): MediaMsg | null {
  let m: MediaMsg;
  try {
    // A copy: the decoded bytes fields point into their input, and the journal's read window is reused.
    m = messageType('Media').decode(Buffer.from(bytes)) as unknown as MediaMsg;
  } catch {
    return null;
  }
  return typeof checkMedia([m]) === 'string' ? null : m;
}

function identityOf(json: unknown): JournalIdentity | null {
  const o = json as Partial<JournalIdentity> | null;
  if (!o || typeof o !== 'object') return null;
  if (typeof o.runId !== 'string' || typeof o.runToken !== 'string' || typeof o.writerId !== 'string') return null;
  if (!Number.isSafeInteger(o.pid) || typeof o.host !== 'string') return null;
  return { runId: o.runId, runToken: o.runToken, writerId: o.writerId, pid: o.pid!, host: o.host, startTime: Number(o.startTime) || 0, client: String(o.client ?? '') };
}

/**
 * Reads a journal; a string says why the file is refused as a whole. `stopIf`, given the identity, can stop the
 * read there (the contents then hold the identity alone): a live writer's journal is not read past its header.
 */
export function readJournal(file: string, stopIf?: (id: JournalIdentity) => boolean): JournalContents | string {
  let fd: number;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return code === 'ELOOP' ? 'it is a symbolic link (never followed)' : `cannot open it (${code ?? (e as Error).message})`;
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) return 'it is not a regular file';
    if (typeof process.getuid === 'function' && st.uid !== process.getuid()) return `it belongs to uid ${st.uid}, not to this daemon's user`;
    if (st.size > MAX_JOURNAL_BYTES) return `it is ${st.size} bytes long, more than any journal (${MAX_JOURNAL_BYTES})`;
    if (st.size < HEADER_BYTES + 64) return `it is ${st.size} bytes long, shorter than a journal's header`;
    const win = new Window(fd, st.size);
    const head = Buffer.from(win.at(0, HEADER_BYTES, HEADER_BYTES)!);
    if (head.toString('latin1', 0, 8) !== JOURNAL_MAGIC) return 'it has no journal header (wrong magic)';
    const version = head.readUInt32LE(H.version);
    if (version !== JOURNAL_VERSION) return `it is journal format ${version}; this logd reads format ${JOURNAL_VERSION}`;
    const kind = head.readUInt32LE(H.checkKind);
    if (kind !== CHECK_SUM32 && kind !== CHECK_CRC32) return `unknown checksum kind ${kind}`;
    const keysOffset = head.readUInt32LE(H.keysOffset);
    const keysBytes = head.readUInt32LE(H.keysBytes);
    const ringOffset = head.readUInt32LE(H.ringOffset);
    const ringBytes = head.readUInt32LE(H.ringBytes);
    if (keysOffset !== HEADER_BYTES || keysBytes % 8 || ringOffset !== keysOffset + keysBytes || ringBytes % 8 || ringBytes < 64 || ringOffset + ringBytes > st.size) {
      return `its regions do not fit the file (keys ${keysOffset}+${keysBytes}, ring ${ringOffset}+${ringBytes}, size ${st.size})`;
    }
    const idLen = head.readUInt32LE(H.identityLength);
    if (idLen === 0 || idLen > MAX_IDENTITY_BYTES) return 'its identity is missing';
    const idBytes = head.subarray(H.identity, H.identity + idLen);
    if (zlib.crc32(idBytes) >>> 0 !== head.readUInt32LE(H.identityCrc)) return 'its identity fails its checksum';
    let identity: JournalIdentity | null = null;
    try {
      identity = identityOf(JSON.parse(idBytes.toString('utf8')));
    } catch {
      identity = null;
    }
    if (!identity) return 'its identity is not valid JSON naming a run, a token and a writer';
    const out: JournalContents = { identity, keys: [], batches: [], records: 0, notJournaled: head.readDoubleLE(H.notJournaled) || 0, damaged: null };
    if (stopIf?.(identity)) return out;

    const valid = (b: Buffer, len: number): boolean => {
      const stored = b.readUInt32LE(4);
      if (kind === CHECK_CRC32) return zlib.crc32(b.subarray(8, len)) >>> 0 === stored;
      const u32 = new Uint32Array(b.buffer, b.byteOffset, len >> 2);
      return sum32Words(u32, 2, len >> 2) === stored;
    };

    // The key region: KEY records with ids 0, 1, 2, … up to the terminator.
    for (let pos = keysOffset; pos + RECORD_HEADER_BYTES <= keysOffset + keysBytes;) {
      const h = win.at(pos, RECORD_HEADER_BYTES)!;
      const len = h.readUInt32LE(0);
      if (len === 0) break;
      const b = len % 8 === 0 && len >= 24 && pos + len <= keysOffset + keysBytes ? win.at(pos, len) : null;
      if (!b || !valid(b, len) || (b.readUInt16LE(8) !== RecordType.KEY) || b.readUInt32LE(12) !== out.keys.length || 24 + b.readUInt32LE(16) > len) {
        out.damaged = `key record ${out.keys.length} at byte ${pos} is damaged; later keys and the rows naming them are not read`;
        break;
      }
      out.keys.push(b.toString('utf8', 24, 24 + b.readUInt32LE(16)));
      out.records++;
      pos += len;
    }

    // The ring, from the head.
    const headPos = head.readDoubleLE(H.head);
    const ackedSeq = head.readDoubleLE(H.ackedSeq);
    if (!Number.isSafeInteger(headPos) || headPos < 0 || !Number.isSafeInteger(ackedSeq) || ackedSeq < 0) {
      out.damaged ??= `its head (${headPos}) or acknowledged seq (${ackedSeq}) is not a position`;
      return out;
    }
    let open = new OpenBatch();
    /** The ids of the batch's last full ROW, which a ROW_SAME names (none after a SEAL: a batch starts with a full row). */
    let lastIds: number[] | null = null;
    let lastSeal = 0;
    let consumed = 0;
    for (let pos = headPos; consumed < ringBytes;) {
      const rel = pos % ringBytes;
      const where = `ring record at byte ${ringOffset + rel} (position ${pos})`;
      if (rel + RECORD_HEADER_BYTES > ringBytes) {
        out.damaged ??= `${where} would run past the ring`;
        break;
      }
      const h = win.at(ringOffset + rel, RECORD_HEADER_BYTES)!;
      const len = h.readUInt32LE(0);
      if (len === 0) break;
      const type = h.readUInt16LE(8);
      if (len % 8 || len < RECORD_HEADER_BYTES || rel + len > ringBytes || (type === RecordType.PAD && rel + len !== ringBytes)) {
        out.damaged ??= `${where} has an impossible length ${len}`;
        break;
      }
      if (type === RecordType.PAD) {
        pos += len;
        consumed += len;
        continue;
      }
      const b = win.at(ringOffset + rel, len)!;
      if (!valid(b, len)) {
        out.damaged ??= `${where} fails its checksum; what follows it is not trusted`;
        break;
      }
      const n = b.readUInt32LE(12);
      if (type === RecordType.ROW || type === RecordType.ROW_SAME) {
        const same = type === RecordType.ROW_SAME;
        const idBytes = same ? 0 : pad8(n * 4);
        if (len !== 32 + idBytes + n * 8) {
          out.damaged ??= `${where}: a row of ${n} values cannot be ${len} bytes`;
          break;
        }
        if (same && (lastIds === null || lastIds.length !== n)) {
          out.damaged ??= `${where}: a row of the last row's ${n} names with ${lastIds === null ? 'no full row before it in its batch' : `a last row of ${lastIds.length}`}`;
          break;
        }
        open.steps.push(b.readDoubleLE(16));
        open.times.push(b.readDoubleLE(24));
        open.counts.push(n);
        if (same) for (let i = 0; i < n; i++) open.ids.push(lastIds![i]);
        else {
          lastIds = new Array<number>(n);
          for (let i = 0; i < n; i++) open.ids.push((lastIds[i] = b.readUInt32LE(32 + i * 4)));
        }
        for (let i = 0; i < n; i++) open.vals.push(b.readDoubleLE(32 + idBytes + i * 8));
      } else if (type === RecordType.UPDATE) {
        const bytes = b.readUInt32LE(16);
        if (24 + bytes > len || (n !== UPDATE_SUMMARY && n !== UPDATE_CONFIG && n !== UPDATE_CONSOLE && n !== UPDATE_MEDIA)) {
          out.damaged ??= `${where}: a malformed update`;
          break;
        }
        if (n === UPDATE_MEDIA) {
          // Checked as the daemon checks a batch's media, one by one: a bad one is left out, never its batch's rows.
          const m = mediaOf(b.subarray(24, 24 + bytes));
          if (m !== null && open.media.length < MAX_MEDIA_PER_BATCH) open.media.push(m);
          out.records++;
          pos += len;
          consumed += len;
          continue;
        }
        const text = b.toString('utf8', 24, 24 + bytes);
        if (n === UPDATE_CONSOLE) {
          // A console entry the daemon would refuse is left out here, so that it never costs its batch's rows.
          const e = checkConsole([text]);
          if (typeof e !== 'string') open.addConsole(e[0]);
        } else (n === UPDATE_SUMMARY ? open.summary : open.config).push(text);
      } else if (type === RecordType.SEAL) {
        if (n < 1) {
          out.damaged ??= `${where}: a seal of seq ${n}`;
          break;
        }
        if ((b.readUInt16LE(10) & SEAL_DROPPED) === 0 && !open.empty) out.batches.push(open.toMsg(n));
        lastSeal = n;
        lastIds = null;
        open = new OpenBatch();
      } else {
        out.damaged ??= `${where} is of unknown type ${type}`;
        break;
      }
      out.records++;
      pos += len;
      consumed += len;
    }
    if (!open.empty) out.batches.push(open.toMsg(Math.max(lastSeal, ackedSeq) + 1));
    return out;
  } finally {
    fs.closeSync(fd);
  }
}

export function journalFiles(spoolDir: string, runId?: string): string[] {
  try {
    return fs.readdirSync(spoolDir).filter((n) => n.endsWith('.journal') && (runId === undefined || n.startsWith(`${runId}--`))).map((n) => path.join(spoolDir, n));
  } catch {
    return [];
  }
}

/** Is the journal's writer possibly still writing to it? (this host, its pid alive with the same start time) */
function writerLives(id: JournalIdentity): boolean {
  return id.host === os.hostname() && isAlive(id.pid, id.startTime || null);
}

export interface IngestResult {
  rows: number;
  batches: number;
  /** Left in place: its writer still lives. */
  skipped: boolean;
}

/**
 * Ingests one journal whose writer is gone, then removes it once what it held
 * is durable. A refused or damaged journal is reported (daemon log, the run's
 * metadata when it names an open run, `logd status`) and moved aside.
 */
export function ingestJournal(reg: Registry, file: string): IngestResult {
  const none: IngestResult = { rows: 0, batches: 0, skipped: false };
  if (ingested.has(file)) return none; // read already; removed once its rows are durable
  const base = path.basename(file);
  // A live writer's journal (the usual case at a FinishRun: the writer removes it after) is read no further than
  // its header: a burst of 500 finishing runs read 32 GB of journals to learn that, 2 s of the daemon's time.
  let lives = false;
  const c = readJournal(file, (id) => (lives = writerLives(id)));
  if (typeof c === 'string') {
    reg.reportJournalProblem(`journal: ${base} refused: ${c}; moved aside to ${base}.bad`);
    moveAside(file, '.bad');
    return none;
  }
  const id = c.identity;
  if (lives) return { ...none, skipped: true };
  if (c.batches.length === 0 && !c.damaged && c.notJournaled === 0) {
    fs.rmSync(file, { force: true }); // everything in it was acknowledged: nothing to store, no run to touch
    return none;
  }
  let run = reg.runs.get(id.runId);
  if (run && !sameSecret(id.runToken, run.meta.runToken)) run = undefined;
  if (!run) {
    try {
      run = reg.authorizedRun(id.runId, id.runToken, id.writerId); // checks the token; resumes a run a daemon stop killed
    } catch {
      run = undefined;
    }
  }
  if (!run || run.final) {
    const why = !run ? `its run ${id.runId} is not open here or its token does not open it` : `its run ${id.runId} is already ${run.state}`;
    const lost = c.batches.reduce((n, b) => n + b.rows, 0);
    reg.reportJournalProblem(`journal: ${base}: ${why}; ${lost} row(s) in it not stored; moved aside to ${base}.orphan`);
    moveAside(file, '.orphan');
    return none;
  }
  let w = run.writers.get(id.writerId);
  if (!w) w = run.addWriter(id.writerId, id.pid, id.host, null);
  w.keyMap = run.intern(c.keys);
  let rows = 0;
  let batches = 0;
  for (const b of c.batches) {
    const before = w.appendedSeq;
    const err = reg.onBatch(run, w, b);
    if (err) reg.reportJournalProblem(`journal: run ${run.id}: batch ${b.seq} of writer ${id.writerId} refused: ${err}`, run);
    else if (w.appendedSeq > before) (rows += b.rows, batches++);
  }
  w.detached = true;
  run.journalRecoveredRows += rows;
  if (c.damaged) reg.reportJournalProblem(`journal: run ${run.id}, writer ${id.writerId}: ${c.damaged}`, run);
  if (c.notJournaled > 0) reg.reportJournalProblem(`journal: run ${run.id}, writer ${id.writerId}: ${c.notJournaled} row(s) did not fit the journal (LOGD_JOURNAL_MB); those the daemon had not received yet were lost with the process`, run);
  reg.log(`journal: run ${run.id}: recovered ${rows} row(s) in ${batches} batch(es) of writer ${id.writerId} (pid ${id.pid})${c.damaged ? '; the rest was damaged' : ''}`);
  // The file goes only once what it held is durable in the run's log.
  ingested.add(file);
  void reg.flushAll(reg.tunables.shutdownTimeoutMs).then((durable) => {
    if (durable) fs.rmSync(file, { force: true });
    ingested.delete(file); // not durable (a full disk): read again at the next trigger, duplicates dropped by seq
  });
  return { rows, batches, skipped: false };
}

function moveAside(file: string, suffix: string): void {
  try {
    fs.renameSync(file, file + suffix); // renames a symlink itself, never its target
  } catch {
    try {
      fs.rmSync(file, { force: true });
    } catch {
      /* gone already */
    }
  }
}

/** The journal of one writer, if it left one. */
export function ingestWriterJournal(reg: Registry, runId: string, writerId: string): IngestResult | null {
  const file = path.join(reg.store.dataDir, 'spool', `${runId}--${writerId}.journal`);
  return fs.existsSync(file) || isLink(file) ? ingestJournal(reg, file) : null;
}

/** Every journal of one run whose writer is gone (the owner's finish). */
export function ingestRunJournals(reg: Registry, runId: string): number {
  let rows = 0;
  for (const f of journalFiles(path.join(reg.store.dataDir, 'spool'), runId)) rows += ingestJournal(reg, f).rows;
  return rows;
}

/** Every journal whose writer is gone (at daemon start, after the open runs came back). */
export function ingestAllJournals(reg: Registry): void {
  for (const f of journalFiles(path.join(reg.store.dataDir, 'spool'))) ingestJournal(reg, f);
}

function isLink(file: string): boolean {
  try {
    return fs.lstatSync(file).isSymbolicLink();
  } catch {
    return false;
  }
}
