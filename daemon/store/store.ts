// The durable local store (the embedded default): one directory per run under
// LOGD_DIR/runs holding its record log, plus the SQLite index of runs.
import fs from 'node:fs';
import path from 'node:path';
import { RecordLog } from './record-log.js';
import { IndexDb, type RunRow } from './index-db.js';
import { replayLog, type ReplayedRun } from './replay.js';
import { sealLog, SEAL_POLICY, type SealPolicy } from './seal.js';
import type { CheckpointRef } from './checkpoint.js';
import { isOwnMediaKey } from '../../src/media.js';
import { FrameType, decodeHistory, parseFrameJson, jsonFrame, type RunMeta, type Attempt, type HistoryBatch, type WriterMeta, type ConsoleFrame, type MediaFrame } from './format.js';
import { readImage } from './media.js';
import { scanFrames, readFrame, type FrameRef } from '../../src/frames.js';
import { StoreProblems } from './problems.js';
import { cappedSummary } from './summary.js';
import { writeStoredRun, type StoredRun } from './from-store.js';
import { forkLog, type ForkedLog } from './fork.js';
import { Timeline } from './timeline.js';
import { readLogHistory, viewOf, type HistoryChunkFn, type HistoryView } from './history-read.js';
export type { RowsMark, HistoryChunkFn, HistoryView } from './history-read.js';
import { toJson } from '../../src/json.js';

/** Index meta key prefix: where a run's log had its checkpoint when it was last opened for appends. */
const CHECKPOINT_HINT = 'checkpoint:';

export class RunExistsError extends Error {
  override name = 'RunExistsError';
}

export class Store {
  readonly runsDir: string;
  readonly index: IndexDb;
  readonly problems: StoreProblems;
  /** Valid frames of each run log read through verify(), while the file is unchanged. */
  private verified = new Map<string, { size: number; mtimeMs: number; refs: FrameRef[] }>();

  private constructor(readonly dataDir: string, private log: (line: string) => void) {
    this.runsDir = path.join(dataDir, 'runs');
    fs.mkdirSync(this.runsDir, { recursive: true, mode: 0o700 });
    fs.chmodSync(dataDir, 0o700);
    const dbFile = path.join(dataDir, 'index.db');
    const fresh = !fs.existsSync(dbFile);
    let index: IndexDb;
    try {
      index = new IndexDb(dbFile);
    } catch (e) {
      this.log(`store: index ${dbFile} is unreadable (${(e as Error).message}); moving it aside and rebuilding it from the run logs`);
      fs.renameSync(dbFile, `${dbFile}.broken-${Date.now()}`);
      index = new IndexDb(dbFile);
    }
    this.index = index;
    this.problems = new StoreProblems(index, this.log);
    if (fresh || index.count() === 0) this.rebuildIndex();
  }

  static open(dataDir: string, log: (line: string) => void = () => {}): Store {
    fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    return new Store(dataDir, log);
  }

  logPath(id: string): string {
    return path.join(this.runsDir, id, 'records.log');
  }

  /** Creates a run's directory and log and appends its RUN frame (not yet synced). */
  createRun(meta: RunMeta): RecordLog {
    this.makeRunDir(meta.id);
    const { log } = RecordLog.open(this.logPath(meta.id));
    log.append(FrameType.RUN, jsonFrame(meta));
    return log;
  }

  /**
   * A new run forked from `meta.forkedFrom` (store/fork.ts): the source's step
   * is checked first (ForkRefused), then the run's directory and log are
   * created with the copy appended (not yet synced).
   */
  forkRun(meta: RunMeta & { forkedFrom: { runId: string; step: number } }): ForkedLog {
    return forkLog(this.logPath(meta.forkedFrom.runId), meta, () => {
      this.makeRunDir(meta.id);
      return RecordLog.open(this.logPath(meta.id)).log;
    });
  }

  /**
   * A run continued here from the shared store: its first frames written and
   * synced (store/from-store.ts); returns the log's length. RunExistsError
   * when this node has the run already.
   */
  async writeStoredRun(run: StoredRun): Promise<number> {
    return writeStoredRun(run, () => {
      this.makeRunDir(run.meta.id);
      return RecordLog.open(this.logPath(run.meta.id)).log;
    });
  }

  /**
   * Appends one frame to the log of a run no daemon stage holds open (final, its log closed): opened, appended,
   * made durable, closed. After a close in progress (a checkpoint being written) is done.
   */
  async appendToClosed(id: string, type: number, parts: readonly Uint8Array[]): Promise<void> {
    await this.sealed(id);
    const { log } = RecordLog.open(this.logPath(id));
    try {
      log.append(type, parts);
      await log.sync();
    } finally {
      log.close();
    }
  }

  /** Removes a run: its directory, its index row and its checkpoint hint (`logd rm`; a claim that did not commit). */
  removeRun(id: string): void {
    this.removeUnanswered(id);
  }

  /** Removes a run that was never answered to anyone (a claim in the shared store that did not commit). */
  removeUnanswered(id: string): void {
    fs.rmSync(path.join(this.runsDir, id), { recursive: true, force: true });
    this.index.remove(id);
    this.index.metaDelete(CHECKPOINT_HINT + id);
  }

  /** Where the index says the run's log had a checkpoint (Store.replay), or null. */
  private checkpointHint(key: string): CheckpointRef | null {
    try {
      const v = this.index.metaGet(key);
      const h = v ? (JSON.parse(v) as Partial<CheckpointRef>) : null;
      return h && Number.isSafeInteger(h.offset) && Number.isSafeInteger(h.length) ? { offset: h.offset!, length: h.length! } : null;
    } catch {
      return null;
    }
  }

  private makeRunDir(id: string): void {
    try {
      fs.mkdirSync(path.join(this.runsDir, id), { mode: 0o700 });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'EEXIST') throw new RunExistsError(`run ${id} already exists; attach to it with its handle, or pick another id`);
      throw e;
    }
  }

  exists(id: string): boolean {
    return fs.existsSync(this.logPath(id));
  }

  /**
   * Replays a run's log (from its checkpoint when it has one that holds up:
   * checkpoint.ts); keeps it open for appends when `forWrite`. A log opened
   * for appends soon no longer ends with the pointer to its checkpoint, so
   * the index remembers where that is (`checkpoint:<id>`): a replay after a
   * daemon that died before it closed the log still starts there.
   */
  replay(id: string, forWrite: boolean): { run: ReplayedRun; log: RecordLog | null } {
    const hintKey = CHECKPOINT_HINT + id;
    const hint = this.checkpointHint(hintKey);
    const r = forWrite ? replayLog(this.logPath(id), true, { hint }) : replayLog(this.logPath(id), false, { hint });
    const { scan } = r.run;
    if (r.run.checkpointProblem) this.log(`store: run ${id}: its checkpoint is not used: ${r.run.checkpointProblem}; read the whole log instead`);
    try {
      const at = r.log?.checkpoint;
      if (at && (at.offset !== hint?.offset || at.length !== hint.length)) this.index.metaSet(hintKey, JSON.stringify({ offset: at.offset, length: at.length }));
      else if (hint && r.run.fromCheckpoint === null) this.index.metaDelete(hintKey);
    } catch {
      /* the index is derived data: without the hint a replay reads more, nothing else */
    }
    if (scan.tornBytes > 0 && forWrite) this.log(`store: run ${id}: cut a torn tail of ${scan.tornBytes} bytes after ${scan.validBytes} valid bytes; the cut bytes are kept in ${this.logPath(id)}.cut-${scan.validBytes}`);
    this.problems.noteDamage(id, scan.damaged, r.run.summary.rows, this.logPath(id));
    return r;
  }

  /**
   * Closes a run's log that its daemon is done with (the run final): first a
   * checkpoint of the run's state, or a pointer to the last one, appended and
   * made durable (seal.ts), so the next replay starts there. Never throws: a
   * log that cannot take them is closed as it is (replays read it whole).
   */
  closeLog(id: string, log: RecordLog, policy: Partial<SealPolicy> = {}): Promise<void> {
    const before = this.sealing.get(id) ?? Promise.resolve();
    const done = before.then(async () => {
      try {
        const sealed = await sealLog(this.logPath(id), log, { ...SEAL_POLICY, ...policy });
        if (sealed.wrote === 'checkpoint' && sealed.why) this.log(`store: run ${id}: checkpoint written; ${sealed.why}`);
      } catch (e) {
        this.log(`store: run ${id}: no checkpoint written (${(e as Error).message}); the next replay reads its whole log`);
      } finally {
        log.close();
      }
    });
    this.sealing.set(id, done);
    void done.then(() => {
      if (this.sealing.get(id) === done) this.sealing.delete(id);
    });
    return done;
  }

  /**
   * Logs being closed (closeLog: a checkpoint read, maybe on a thread, then
   * appended): whatever opens a run's log for appends again (a new attempt)
   * waits for its close first.
   */
  private readonly sealing = new Map<string, Promise<void>>();

  /** Resolves once run `id`'s log is closed (at once when it is not being closed). */
  sealed(id: string): Promise<void> {
    return this.sealing.get(id) ?? Promise.resolve();
  }

  /** Resolves once every log being closed is, or after `ms`; false when some were still open then. */
  async allSealed(ms: number): Promise<boolean> {
    if (this.sealing.size === 0) return true;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<false>((r) => (timer = setTimeout(() => r(false), ms)));
    const all = Promise.all([...this.sealing.values()]).then(() => true as const);
    try {
      return await Promise.race([all, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Makes every appended frame of these logs durable. */
  async commit(logs: Iterable<RecordLog>): Promise<void> {
    const work: Promise<void>[] = [];
    for (const l of logs) if (l.dirty) work.push(l.sync());
    await Promise.all(work);
  }

  /**
   * Reads a run's durable history in arrival order. `onChunk` gets each batch
   * (run-global key ids), the dictionary names added since the last call, and
   * the rows' attempt and whether a later rewind superseded them. `view`:
   * the run's attempts (attemptsOf; none: every row is current) and whether
   * superseded rows come too (else they are left out).
   */
  readHistory(id: string, onChunk: HistoryChunkFn, view: HistoryView = {}): { keys: string[] } {
    const got = readLogHistory(this.logPath(id), onChunk, view);
    this.problems.noteDamage(id, got.damaged, got.rows, this.logPath(id));
    return { keys: got.keys };
  }

  /** The attempts of a continued run (from its index row), for a HistoryView; null: it has one. */
  attemptsOf(id: string): Attempt[] | null {
    const row = this.index.get(id);
    if (!row || !row.metadata_json.includes('"attempts"')) return null;
    return (JSON.parse(row.metadata_json) as { attempts?: Attempt[] }).attempts ?? null;
  }

  /**
   * A page of a run's console output (CONSOLE frames) from file offset
   * `fromOffset` on: at most about `limit` entries and `maxBytes` of text,
   * whole frames only. Each entry carries its writer's index and RANK (from
   * the WRITER frames before it). `nextOffset` > 0: where the next page starts.
   */
  readConsole(id: string, fromOffset: number, limit: number, maxBytes: number): { entries: string[]; nextOffset: number } {
    return this.framePage(id, FrameType.CONSOLE, fromOffset, limit, maxBytes, (p, rankOf, out) => {
      const f = parseFrameJson<ConsoleFrame>(p);
      for (const e of f.entries) out.push(toJson({ w: f.writerIdx, rank: rankOf(f.writerIdx), t: e.t, s: e.s, l: e.l }));
    });
  }

  /**
   * A page of a run's histograms, images and text (MEDIA frames) from file
   * offset `fromOffset` on, like readConsole: whole frames, at most about
   * `limit` entries and `maxBytes` of JSON; `kind` and `key` filter (empty:
   * all). Each entry carries its writer's index and RANK.
   */
  readMedia(id: string, fromOffset: number, limit: number, maxBytes: number, kind = '', key = ''): { entries: string[]; nextOffset: number } {
    return this.framePage(id, FrameType.MEDIA, fromOffset, limit, maxBytes, (p, rankOf, out) => {
      const f = parseFrameJson<MediaFrame>(p);
      for (const e of f.entries) {
        if ((kind && e.kind !== kind) || (key ? e.key !== key : isOwnMediaKey(e.key))) continue; // logd's own items only when named
        out.push(toJson({ w: f.writerIdx, rank: rankOf(f.writerIdx), ...e }));
      }
    });
  }

  /** One page of the entries of one frame type (readConsole, readMedia): whole frames, writers' ranks known. */
  private framePage(id: string, type: number, fromOffset: number, limit: number, maxBytes: number,
    take: (p: Uint8Array, rankOf: (writerIdx: number) => number | null, out: string[]) => void): { entries: string[]; nextOffset: number } {
    const ranks: Array<number | null> = [];
    const rankOf = (i: number) => ranks[i] ?? null;
    const entries: string[] = [];
    let bytes = 0;
    let nextOffset = 0;
    const full = new Error('page full');
    try {
      scanFrames(this.logPath(id), (t, p, offset) => {
        if (t === FrameType.WRITER) {
          const w = parseFrameJson<WriterMeta>(p);
          ranks[w.idx] = w.rank && w.rank.rank >= 0 ? w.rank.rank : null;
        } else if (t === type && offset >= fromOffset) {
          if (entries.length > 0 && (entries.length >= limit || bytes + p.byteLength > maxBytes)) {
            nextOffset = offset;
            throw full;
          }
          const before = entries.length;
          take(p, rankOf, entries);
          for (let i = before; i < entries.length; i++) bytes += entries[i].length;
        }
      });
    } catch (e) {
      if (e !== full) throw e;
    }
    return { entries, nextOffset };
  }

  /** One of a run's images by its sha256 (a ReadMedia entry's), or null. */
  readImage(id: string, sha256: string): { data: Buffer; format: 'png' | 'jpeg' } | null {
    return readImage(path.dirname(this.logPath(id)), sha256);
  }

  /**
   * Checks every frame's checksum (the whole log is read once, then again
   * only when the file changed) and records damage. Returns the valid frames.
   */
  verify(id: string): FrameRef[] {
    const file = this.logPath(id);
    const st = fs.statSync(file);
    const known = this.verified.get(id);
    if (known && known.size === st.size && known.mtimeMs === st.mtimeMs) return known.refs;
    const refs: FrameRef[] = [];
    let rows = 0;
    const scan = scanFrames(file, (type, p, offset) => {
      refs.push({ type, offset, length: p.byteLength, crc: 0 });
      if (type === FrameType.HISTORY && p.byteLength >= 8) rows += new DataView(p.buffer, p.byteOffset).getUint32(4, true);
    });
    this.problems.noteDamage(id, scan.damaged, rows, file);
    if (this.verified.size >= 64) this.verified.delete(this.verified.keys().next().value!);
    this.verified.set(id, { size: st.size, mtimeMs: st.mtimeMs, refs });
    return refs;
  }

  /**
   * The last `tailRows` rows only: hops over frame headers, reads the key
   * frames and just the history frames at the end (fast on any size of run).
   * A rewound run (`view.attempts`) has its writer and attempt frames read
   * too, and its tail's frames whole, to count the rows the view keeps.
   */
  readHistoryTail(id: string, tailRows: number, onChunk: HistoryChunkFn, view: HistoryView = {}): void {
    const refs = this.verify(id);
    const fd = fs.openSync(this.logPath(id), 'r');
    try {
      const keys: string[] = [];
      const timeline = Timeline.of(view.attempts, !!view.allAttempts);
      const all = !!view.allAttempts;
      const picked: typeof refs = [];
      let rows = 0;
      for (const r of refs) {
        if (r.type !== FrameType.KEYS && !(timeline && (r.type === FrameType.RUN || r.type === FrameType.ATTEMPT || r.type === FrameType.WRITER))) continue;
        const p = readFrame(fd, r, r.length, false);
        if (!p) break;
        if (r.type !== FrameType.KEYS) {
          timeline!.onFrame(r.type, p);
          continue;
        }
        const k = parseFrameJson<{ first: number; names: string[] }>(p);
        for (let i = 0; i < k.names.length; i++) keys[k.first + i] = k.names[i];
      }
      for (let i = refs.length - 1; i >= 0 && rows < tailRows; i--) {
        if (refs[i].type !== FrameType.HISTORY) continue;
        if (timeline) {
          const p = readFrame(fd, refs[i], refs[i].length, false);
          if (!p) continue;
          for (const part of viewOf(decodeHistory(p), timeline, all)) rows += part.batch.rows;
        } else {
          const head = readFrame(fd, refs[i], 8, false);
          if (!head) continue;
          rows += new DataView(head.buffer).getUint32(4, true);
        }
        picked.unshift(refs[i]);
      }
      let skip = Math.max(0, rows - tailRows);
      let first = true;
      for (const r of picked) {
        const p = readFrame(fd, r, r.length, false); // verified above
        if (!p) break;
        for (const part of viewOf(decodeHistory(p), timeline, all)) {
          let b = part.batch;
          if (skip > 0) {
            const drop = Math.min(skip, b.rows);
            skip -= drop;
            b = dropRows(b, drop);
          }
          if (b.rows === 0 && !first) continue;
          onChunk(b, first ? keys : [], 0, part.mark);
          first = false;
        }
      }
    } finally {
      fs.closeSync(fd);
    }
  }

  /**
   * Rebuilds the index from every run log (the logs are the source of truth).
   * A run directory that cannot be read is logged and kept as a store problem
   * (`logd status`), never silently left out.
   */
  rebuildIndex(): number {
    let n = 0;
    for (const id of fs.readdirSync(this.runsDir)) {
      try {
        if (!fs.statSync(path.join(this.runsDir, id)).isDirectory()) continue;
        if (!fs.existsSync(this.logPath(id))) throw Object.assign(new Error('missing'), { code: 'ENOENT' });
        const { run } = this.replay(id, false);
        this.index.upsert(rowFromReplay(run));
        this.problems.noteUnreadable(id, null);
        n++;
      } catch (e) {
        const why = (e as NodeJS.ErrnoException).code === 'ENOENT' ? `${this.logPath(id)} is missing` : (e as Error).message;
        this.log(`store: run ${id} is left out of the index, its directory cannot be read: ${why}`);
        this.problems.noteUnreadable(id, why);
      }
    }
    if (n > 0) this.log(`store: rebuilt the index from ${n} run logs`);
    return n;
  }

  close(): void {
    this.index.close();
  }
}

export function rowFromReplay(r: ReplayedRun): RunRow {
  const m = r.meta;
  const s = cappedSummary(r.summary, r.keys, r.userSummary);
  return {
    id: m.id, project: m.project, name: m.name, grp: m.group, job_type: m.jobType, tags: JSON.stringify(m.tags),
    state: r.final?.state ?? 'running', state_reason: r.final?.reason ?? '', created_at: m.createdAt,
    finished_at: r.final?.finishedAt ?? 0, exit_code: r.final?.exitCode ?? 0,
    config_json: toJson(r.config), summary_json: toJson(s.summary),
    metadata_json: toJson({ host: m.host, pid: m.pid, rank: m.rank, writers: r.writers.filter(Boolean), stats: s.stats, ...(s.capped ? { summaryCapped: s.capped } : {}),
      lastStep: r.summary.lastStep, ...(r.attempts.length > 1 ? { attempts: r.attempts } : {}),
      ...(r.supersededRows > 0 ? { supersededRows: r.supersededRows } : {}), ...(m.forkedFrom ? { forkedFrom: m.forkedFrom } : {}), ...(m.fromStore ? { fromStore: m.fromStore } : {}),
      ...(Object.keys(r.media).length ? { media: r.media } : {}), ...(r.final?.end ? { end: r.final.end } : {}) }),
    history_rows: r.summary.rows, mode: m.mode, notes: m.notes,
  };
}

/** The batch without its first `n` rows. */
function dropRows(b: HistoryBatch, n: number): HistoryBatch {
  let pairs = 0;
  for (let r = 0; r < n; r++) pairs += b.counts[r];
  return {
    ...b, rows: b.rows - n, steps: b.steps.subarray(n), times: b.times.subarray(n), counts: b.counts.subarray(n),
    keyIds: b.keyIds.subarray(pairs), values: b.values.subarray(pairs),
  };
}
