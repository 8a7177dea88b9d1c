// Ingests client spill files (LOGD_DIR/spool/<run>--<writer>.spill): records a
// process could not deliver before it ended. Duplicates are dropped by seq, so
// ingesting a file twice, or a file whose batches also arrived on the stream,
// stores each record once.
import fs from 'node:fs';
import path from 'node:path';
import { scanFrames } from '../../src/frames.js';
import { SPILL_BATCH, SPILL_HEADER, spillFileName, type SpillHeader } from '../../src/spill.js';
import type { RecordBatchMsg } from '../../src/wire.js';
import { messageType } from '../../src/proto.js';
import type { Registry } from './registry.js';
import type { LiveRun } from './run.js';

/** Ends a run whose owner's spill file says it exited (the finaliser's finalise, passed in). */
export type FinaliseRun = (run: LiveRun, state: 'finished' | 'crashed', reason: string, exitCode: number) => void;

const WriteRequest = messageType('WriteRequest');

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

/** Ingests every spill file (at daemon start). */
export function ingestAllSpool(reg: Registry, finalise: FinaliseRun): void {
  const dir = path.join(reg.store.dataDir, 'spool');
  let names: string[] = [];
  try {
    names = fs.readdirSync(dir).filter((n) => n.endsWith('.spill'));
  } catch {
    return;
  }
  for (const n of names) ingestFile(reg, finalise, path.join(dir, n));
}

function ingestFile(reg: Registry, finalise: FinaliseRun, file: string): { batches: number; finished: boolean } {
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
      /* not open here: moved aside below */
    }
  }
  if (!run || run.final) {
    reg.log(`spool: ${path.basename(file)} belongs to run ${h.runId}, which is not open here; moved aside`);
    fs.renameSync(file, `${file}.orphan`);
    return { batches: 0, finished: false };
  }
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
  // The file goes only once what it held is durable in the run's log.
  void reg.flushAll(reg.tunables.shutdownTimeoutMs).then((durable) => {
    if (durable) fs.rmSync(file, { force: true });
  });
  reg.log(`spool: run ${run.id}: ingested ${stored} batch(es) from writer ${h.writerId}`);
  let finished = false;
  if (h.exitCode !== null && h.writerId === run.meta.ownerWriterId && run.state === 'running') {
    finished = true;
    const code = h.exitCode;
    finalise(run, code === 0 ? 'finished' : 'crashed', code === 0 ? 'process exited without finish; finished for it' : `process exited with code ${code} without finish`, code);
  } else if (h.exitCode !== null) {
    w.detached = true;
  }
  return { batches: stored, finished };
}
