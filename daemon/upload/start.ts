// The daemon's uploader: made from the upload tunables, reading the daemon's
// own runs. A malformed URL turns uploading off, with a log line and a status
// that say what to fix (the trainers must not fail for it); everything after
// that (an unreachable store, a refused login) is retried in the background.
import type { UploadTunables } from '../../src/config.js';
import { DaemonRuns } from './local-runs.js';
import { Uploader } from './uploader.js';
import { parseStoreUrl, redactUrl } from './url.js';
import { writeStatus } from './status.js';

/** `runs` is the daemon's own runs (open ones through the registry, the rest through the index). */
export function startUploader(runs: DaemonRuns, t: UploadTunables, log: (line: string) => void): Uploader | null {
  let url;
  try {
    url = parseStoreUrl(t.url!);
  } catch (e) {
    const message = `${(e as Error).message}; fix LOGD_UPLOAD_URL or --upload and restart the daemon (runs stay in the local store until then)`;
    log(`upload: not uploading: ${message}`);
    const now = new Date().toISOString();
    writeStatus(runs.dataDir, {
      pid: process.pid, node: t.node, target: redactUrl(t.url!), state: 'off', backlog: { runs: 0, rows: 0, bytes: 0 }, lagMs: 0,
      lastError: message, lastErrorAt: now, retryAt: null, uploadedRows: 0, uploadedPoints: 0, updatedAt: now,
    });
    return null;
  }
  const up = new Uploader({
    url, node: t.node, runs, log, pollMs: t.pollMs, backoffMaxMs: t.backoffMaxMs, sliceBytes: t.sliceBytes,
    statusDir: runs.dataDir, encoderThread: true, duty: t.dutyPercent / 100,
    claim: { deadlineMs: t.resumeStoreTimeoutMs, takeoverAfterMs: t.takeoverAfterMs },
  });
  up.start();
  return up;
}
