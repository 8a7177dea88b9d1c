// The data dir's format stamp: $LOGD_DIR/format.json, {"format": N,
// "createdBy": "logd X"}. A daemon reads it before it writes anything there
// (before the lock file, the index, a run), and refuses a data dir of a newer
// format than its own with a message naming both versions: an older logd
// (another venv, a downgrade) never rewrites what a newer one wrote. A data
// dir without the stamp is format 1 (every logd before the stamp wrote that),
// and gets the stamp once the daemon holds its lock.
//
// The format changes only when an older daemon could no longer read the data
// dir correctly (the record logs' frames, the index, the spool's files); a
// later logd that changes it raises DATA_FORMAT and migrates older dirs.
import fs from 'node:fs';
import path from 'node:path';
import { LOGD_VERSION } from '../../src/config.js';

export const DATA_FORMAT = 1;
export const FORMAT_FILE = 'format.json';

export interface FormatStamp { format: number; createdBy: string }

/** The stamp of dataDir; null when it has none (format 1, or a fresh dir). Throws on a stamp that cannot be read. */
export function readFormat(dataDir: string): FormatStamp | null {
  const file = path.join(dataDir, FORMAT_FILE);
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new Error(`serve: cannot read ${file} (${(e as Error).message}); it says which logd wrote this data dir`);
  }
  let s: Partial<FormatStamp>;
  try {
    s = JSON.parse(text) as Partial<FormatStamp>;
  } catch {
    s = {};
  }
  if (typeof s.format !== 'number' || !Number.isInteger(s.format) || s.format < 1) {
    throw new Error(`serve: ${file} is damaged (${JSON.stringify(text.slice(0, 80))}); it should read {"format": ${DATA_FORMAT}, ...}. Not touching this data dir`);
  }
  return { format: s.format, createdBy: typeof s.createdBy === 'string' ? s.createdBy : 'an unknown logd version' };
}

/** Throws, naming both versions, when dataDir was written in a newer format than this daemon's. Writes nothing. */
export function refuseNewerFormat(dataDir: string): void {
  const s = readFormat(dataDir);
  if (s && s.format > DATA_FORMAT) {
    throw new Error(
      `serve: the data dir ${dataDir} was written by ${s.createdBy} (data format ${s.format}); this daemon is logd ${LOGD_VERSION} ` +
        `(data format ${DATA_FORMAT}) and cannot read it. Nothing there was changed. Run a logd at least as new as ${s.createdBy} ` +
        `(pip install --upgrade logd / npm install logd@latest), or point LOGD_DIR at another directory`,
    );
  }
}

/**
 * Stamps a data dir that has no stamp yet (called with the lock held). A disk
 * that refuses the write (full, read-only) does not keep the daemon from
 * serving: a dir without a stamp reads as format 1, and the next start stamps it.
 */
export function stampFormat(dataDir: string): void {
  const file = path.join(dataDir, FORMAT_FILE);
  if (fs.existsSync(file)) return;
  const tmp = `${file}.${process.pid}.tmp`;
  try {
    fs.writeFileSync(tmp, JSON.stringify({ format: DATA_FORMAT, createdBy: `logd ${LOGD_VERSION}` }) + '\n', { mode: 0o600 });
    fs.renameSync(tmp, file);
  } catch (e) {
    fs.rmSync(tmp, { force: true });
    process.stderr.write(`${new Date().toISOString()} serve: could not write ${file} (${(e as Error).message}); the next start writes it\n`);
  }
}
