// The daemon's uploader: made from the upload tunables, reading the daemon's
// own runs. A bad URL is a configuration error that stops the daemon with
// what to set; everything after that (an unreachable store, a refused login)
// is retried in the background.
import type { UploadTunables } from '../../src/config.js';
import type { Registry } from '../registry.js';
import { DaemonRuns } from './local-runs.js';
import { Uploader } from './uploader.js';
import { parseStoreUrl } from './url.js';

export function startUploader(reg: Registry, t: UploadTunables, log: (line: string) => void): Uploader {
  let url;
  try {
    url = parseStoreUrl(t.url!);
  } catch (e) {
    throw new Error(`upload: ${(e as Error).message}; fix LOGD_UPLOAD_URL or --upload, or unset it to keep runs local`);
  }
  const up = new Uploader({
    url, node: t.node, runs: new DaemonRuns(reg), log, pollMs: t.pollMs, backoffMaxMs: t.backoffMaxMs, sliceBytes: t.sliceBytes, statusDir: reg.store.dataDir, encoderThread: true,
    duty: t.dutyPercent / 100,
  });
  up.start();
  return up;
}
