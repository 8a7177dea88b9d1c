// `logd sync --ingest FILE…`: hands spill files to the daemon of this data
// dir: a deferred run's (its client found no usable daemon at init(), and the
// file says how to create the run), or any other spill file left behind. The
// daemon stores each exactly once (duplicates are dropped by sequence number)
// and removes the file when its rows are durable.
import fs from 'node:fs';
import path from 'node:path';
import { scanFrames } from '../../src/frames.js';
import { SPILL_HEADER, deferredSpillFileName, type SpillHeader } from '../../src/spill.js';

function header(file: string): SpillHeader {
  let h: SpillHeader | null = null;
  scanFrames(file, (type, p) => {
    if (type === SPILL_HEADER && !h) h = JSON.parse(Buffer.from(p).toString('utf8')) as SpillHeader;
  });
  if (!h) throw new Error(`${file} is not a logd spill file (no header frame); nothing was ingested`);
  return h;
}

/** Copies each file into `spoolDir` and waits (up to `timeoutMs` in all) until the daemon has taken it. */
export async function ingestSpillFiles(files: string[], spoolDir: string, timeoutMs: number, say: (line: string) => void): Promise<number> {
  const placed: Array<{ from: string; to: string; h: SpillHeader }> = [];
  for (const f of files) {
    const h = header(f);
    const to = path.join(spoolDir, deferredSpillFileName(h.runId, h.writerId));
    fs.mkdirSync(spoolDir, { recursive: true, mode: 0o700 });
    const tmp = `${to}.${process.pid}.tmp`;
    fs.copyFileSync(f, tmp);
    fs.chmodSync(tmp, 0o600);
    fs.renameSync(tmp, to);
    placed.push({ from: f, to, h });
    say(`ingest: ${f}: run ${h.runId}${h.create ? ' (deferred: created from the file)' : ''}, handed to the daemon`);
  }
  const deadline = Date.now() + timeoutMs;
  let failed = 0;
  for (const p of placed) {
    while (fs.existsSync(p.to) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    if (fs.existsSync(p.to) || fs.existsSync(`${p.to}.orphan`) || fs.existsSync(`${p.to}.bad`)) {
      failed++;
      say(`ingest: ${p.from}: not stored within ${timeoutMs} ms; see \`logd status\` and the daemon's log (it may be moved aside as .orphan or .bad)`);
    } else say(`ingest: ${p.from}: stored in run ${p.h.runId}`);
  }
  return failed;
}
