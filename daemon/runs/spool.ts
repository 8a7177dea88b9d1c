// Ingests client spill files (LOGD_DIR/spool/<run>--<writer>.spill): records a
// process could not deliver before it ended. Duplicates are dropped by seq, so
// ingesting a file twice, or a file whose batches also arrived on the stream,
// stores each record once.
import { signalName } from '../../src/story/end.js';
import fs from 'node:fs';
import path from 'node:path';
import { scanFrames } from '../../src/frames.js';
import { SPILL_BATCH, SPILL_HEADER, spillFileName, type SpillHeader } from '../../src/spill.js';
import type { RecordBatchMsg } from '../../src/wire.js';
import { deferredFallbackDir } from '../../src/deferred.js';
import { sameSecret } from '../../src/token.js';
import { messageType } from '../../src/proto.js';
import type { Registry } from './registry.js';
import type { LiveRun } from './run.js';

/** Ends a run whose owner's spill file says it exited (the finaliser's finalise, passed in). */
export type FinaliseRun = (run: LiveRun, state: 'finished' | 'crashed', reason: string, exitCode: number, exception?: SpillHeader['exception']) => void;

const WriteRequest = messageType('WriteRequest');
/** Files read and waiting for their rows to be durable before they are removed: not read twice meanwhile. */
const ingesting = new Set<string>();

export function ingestSpool(reg: Registry, finalise: FinaliseRun, runId: string, writerId: string): { batches: number; finished: boolean } {
  const file = path.join(reg.store.dataDir, 'spool', spillFileName(runId, writerId));
  if (!fs.existsSync(file)) return { batches: 0, finished: false };
  return ingestFile(reg, finalise, file);
}

/**
 * Ingests every spill file of one run, whichever writer left it (the owner's
 * finish, before the final state: a writer may have spilled without the
 * daemon ever hearing of it).
 */
export function ingestRunSpool(reg: Registry, finalise: FinaliseRun, runId: string): number {
  const dir = path.join(reg.store.dataDir, 'spool');
  let names: string[] = [];
  try {
    names = fs.readdirSync(dir).filter((n) => n.startsWith(`${runId}--`) && n.endsWith('.spill'));
  } catch {
    return 0;
  }
  let batches = 0;
  for (const n of names) batches += ingestFile(reg, finalise, path.join(dir, n)).batches;
  return batches;
}

/**
 * Ingests every spill file (at daemon start), and the deferred runs that
 * waited in the user's fallback dir because this data dir took no files.
 */
export function ingestAllSpool(reg: Registry, finalise: FinaliseRun): void {
  for (const dir of [path.join(reg.store.dataDir, 'spool'), deferredFallbackDir(reg.store.dataDir)]) {
    for (const n of spillNames(dir, '.spill')) ingestFile(reg, finalise, path.join(dir, n));
  }
}

/** Deferred runs' spill files that arrived while the daemon runs (`logd sync --ingest`, the fallback): checked every few seconds. */
export function ingestDeferredSpool(reg: Registry, finalise: FinaliseRun): void {
  // The fallback holds those whose data dir took no files or had no room when their trainer ended.
  for (const dir of [path.join(reg.store.dataDir, 'spool'), deferredFallbackDir(reg.store.dataDir)]) {
    for (const n of spillNames(dir, '.deferred.spill')) ingestFile(reg, finalise, path.join(dir, n));
  }
}

/**
 * The deferred spill files of one run (its client gave up on the CreateRun and kept the rows), at once: a new
 * attempt that continues the run (init(resume_from=...) of a restarted job) may come before the 2 s scan has
 * made the run from them. Returns how many files were read.
 */
export function ingestDeferredOf(reg: Registry, finalise: FinaliseRun, runId: string): number {
  let n = 0;
  for (const dir of [path.join(reg.store.dataDir, 'spool'), deferredFallbackDir(reg.store.dataDir)]) {
    for (const name of spillNames(dir, '.deferred.spill')) {
      if (!name.startsWith(`${runId}--`)) continue;
      ingestFile(reg, finalise, path.join(dir, name));
      n++;
    }
  }
  return n;
}

function spillNames(dir: string, suffix: string): string[] {
  try {
    return fs.readdirSync(dir).filter((n) => n.endsWith(suffix));
  } catch {
    return [];
  }
}

/** A deferred run (its client found no daemon at init()) is created from its spill file, with the token and owner the client chose. */
function createDeferred(reg: Registry, h: SpillHeader, file: string): LiveRun | null {
  const c = h.create!;
  try {
    const run = reg.createRun({
      id: h.runId, project: c.project, name: c.name, group: c.group, jobType: c.jobType, configJson: c.configJson, tags: c.tags, notes: c.notes,
      mode: c.mode, client: (c.client ?? { pid: h.pid, host: h.host, clientVersion: '' }) as never, createKey: c.createKey, sampleIntervalMs: 0,
    }, { runToken: h.runToken, ownerWriterId: h.writerId });
    reg.log(`spool: run ${run.id} created from ${path.basename(file)}: its client deferred it (${c.reason})`);
    return run;
  } catch (e) {
    reg.log(`spool: ${path.basename(file)}: the deferred run ${h.runId} cannot be created: ${(e as Error).message}`);
    return null;
  }
}

/** A file handed over twice (`logd sync --ingest` again): the finished run already has every batch of it, with the same token. */
function storedAlready(reg: Registry, h: SpillHeader, batches: RecordBatchMsg[]): boolean {
  if (!reg.store.exists(h.runId)) return false;
  try {
    const { run: r } = reg.store.replay(h.runId, false);
    if (!sameSecret(h.runToken, r.meta.runToken)) return false;
    const w = r.writers.find((x) => x && x.writerId === h.writerId);
    const last = batches.reduce((m, b) => Math.max(m, b.seq), 0);
    return !!w && (r.maxSeq[w.idx] ?? 0) >= last;
  } catch {
    return false;
  }
}

function ingestFile(reg: Registry, finalise: FinaliseRun, file: string): { batches: number; finished: boolean } {
  if (ingesting.has(file)) return { batches: 0, finished: false };
  let header: SpillHeader | null = null;
  const batches: RecordBatchMsg[] = [];
  try {
    const scan = scanFrames(file, (type, p) => {
      if (type === SPILL_HEADER) header = JSON.parse(Buffer.from(p).toString('utf8')) as SpillHeader;
      else if (type === SPILL_BATCH) {
        const batch = (WriteRequest.decode(p) as unknown as { batch?: RecordBatchMsg | null }).batch;
        if (batch) batches.push(batch);
      }
    });
    for (const d of scan.damaged) reg.log(`spool: ${file}: ${d.bytes} bytes at offset ${d.offset} fail their checksum; the batches after them are still ingested`);
  } catch (e) {
    reg.log(`spool: cannot read ${file}: ${(e as Error).message}; left in place`);
    return { batches: 0, finished: false };
  }
  const h = header as SpillHeader | null;
  if (!h) {
    reg.log(`spool: ${file} has no header; moved aside`);
    fs.renameSync(file, `${file}.bad`);
    return { batches: 0, finished: false };
  }
  let run = reg.runs.get(h.runId);
  if (!run) {
    try {
      run = reg.authorizedRun(h.runId, h.runToken, h.writerId); // resumes a run a daemon stop killed
    } catch {
      /* not open here: created below when deferred, else moved aside */
    }
  }
  if (!run && h.create && !reg.store.exists(h.runId)) run = createDeferred(reg, h, file) ?? undefined;
  if ((!run || run.final) && storedAlready(reg, h, batches)) {
    reg.log(`spool: ${path.basename(file)}: run ${h.runId} already holds every batch in it; removed`);
    fs.rmSync(file, { force: true });
    return { batches: 0, finished: false };
  }
  if (!run || run.final) {
    reg.log(`spool: ${path.basename(file)} belongs to run ${h.runId}, which is not open here; moved aside`);
    fs.renameSync(file, `${file}.orphan`);
    return { batches: 0, finished: false };
  }
  // A deferred run whose CreateRun the daemon completed after its client had given up on it (issue 32 item 4):
  // the same create key, so the same run. The spill's writer is the owner that created it: its rows are the
  // run's, and its exit ends the run as the trainer ended it.
  const lateCreate = !!(h.create?.createKey && run.meta.createKey && sameSecret(h.create.createKey, run.meta.createKey));
  if (lateCreate && h.writerId !== run.meta.ownerWriterId) reg.log(`spool: run ${run.id}: ${path.basename(file)} is its deferred owner's (a CreateRun completed after the client gave up on it); its rows are the run's`);
  let w = run.writers.get(h.writerId);
  if (!w) w = run.addWriter(h.writerId, h.pid, h.host, null);
  w.keyMap = run.intern(h.keys);
  let stored = 0;
  for (const b of batches) {
    const before = w.appendedSeq;
    const err = reg.onBatch(run, w, b);
    if (err) reg.log(`spool: run ${run.id}: batch ${b.seq} refused: ${err}`);
    else if (w.appendedSeq > before) stored++;
  }
  // The file goes only once what it held is durable in the run's log; till then it is not read again (a full
  // disk holds the rows in memory: read again, they would find the run final without them and be set aside).
  ingesting.add(file);
  const settle = () => void reg.flushAll(reg.tunables.shutdownTimeoutMs).then((durable) => {
    if (!durable) return void setTimeout(settle, 1000).unref();
    fs.rmSync(file, { force: true });
    ingesting.delete(file);
  });
  settle();
  reg.log(`spool: run ${run.id}: ingested ${stored} batch(es) from writer ${h.writerId}`);
  let finished = false;
  if (h.exitCode !== null && (h.writerId === run.meta.ownerWriterId || lateCreate) && run.state === 'running') {
    finished = true;
    const code = h.exitCode;
    const ex = h.exception && typeof h.exception.type === 'string' ? { type: h.exception.type.slice(0, 200), message: String(h.exception.message ?? '').slice(0, 2000), at: Number(h.exception.at) || 0 } : null;
    const how = ex ? `raised ${ex.type}: ${ex.message.split('\n')[0].slice(0, 200)} (exit code ${code})` : code === 0 ? 'exited with code 0' : code > 128 && code < 160 ? `was stopped by ${signalName(code - 128)} (exit code ${code})` : `exited with code ${code}`;
    finalise(run, code === 0 ? 'finished' : 'crashed', `its process ${how} without calling finish()${code === 0 ? '; finished for it' : ''}`, code, ex);
  } else if (h.exitCode !== null) {
    w.detached = true;
  }
  return { batches: stored, finished };
}
