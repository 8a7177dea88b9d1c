// The uploader's state as `logd status` shows it, kept in LOGD_DIR/upload-status.json
// (written to a temp name and renamed, so a reader never sees half of it). It
// names the target with its password redacted and nothing else secret.
import fs from 'node:fs';
import path from 'node:path';

export interface UploadStatus {
  pid: number;
  node: string;
  /** The store URL, password redacted. */
  target: string;
  state: 'connecting' | 'uploading' | 'idle' | 'retrying' | 'stopped' | 'off';
  backlog: { runs: number; rows: number; bytes: number };
  /** How long the oldest record that is durable locally but not in the store has waited (ms). */
  lagMs: number;
  lastError: string | null;
  lastErrorAt: string | null;
  /** When the uploader tries again (state 'retrying'). */
  retryAt: string | null;
  uploadedRows: number;
  uploadedPoints: number;
  updatedAt: string;
  /** Runs the shared store refused from this node (another node's id, a node name two daemons share): they stay local. */
  leftLocal?: Array<{ run: string; why: string }>;
}

export function statusFile(dataDir: string): string {
  return path.join(dataDir, 'upload-status.json');
}

export function writeStatus(dataDir: string, s: UploadStatus): void {
  const file = statusFile(dataDir);
  const tmp = `${file}.${process.pid}.tmp`;
  try {
    fs.writeFileSync(tmp, JSON.stringify(s, null, 2) + '\n', { mode: 0o600 });
    fs.renameSync(tmp, file);
  } catch {
    /* a full disk: the status is advisory, the next write tries again */
  }
}

export function readStatus(dataDir: string): UploadStatus | null {
  try {
    return JSON.parse(fs.readFileSync(statusFile(dataDir), 'utf8')) as UploadStatus;
  } catch {
    return null;
  }
}
