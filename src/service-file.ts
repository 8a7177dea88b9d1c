// The daemon's service file: how a client that has no LOGD_SERVICE finds the
// daemon of its data dir. Written to a temp name and renamed into place, so a
// reader never sees half a file; private to the user (0600).
import fs from 'node:fs';

export interface ServiceFile {
  pid: number;
  version: string;
  socket: string;      // "unix:/path/logd.sock"
  tcp: string | null;  // "127.0.0.1:PORT" when asked for
  token: string;
  dataDir: string;
  sidecar: boolean;
  startedAt: number;
}

export function writeServiceFile(file: string, s: ServiceFile): void {
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify(s, null, 2) + '\n', { mode: 0o600 });
  fs.renameSync(tmp, file);
}

export function readServiceFile(file: string): ServiceFile | null {
  try {
    const s = JSON.parse(fs.readFileSync(file, 'utf8')) as ServiceFile;
    return typeof s.pid === 'number' && typeof s.token === 'string' && typeof s.socket === 'string' ? s : null;
  } catch {
    return null;
  }
}

/** Removes the file only if it still names this daemon. */
export function removeServiceFile(file: string, pid: number): void {
  const s = readServiceFile(file);
  if (s && s.pid === pid) fs.rmSync(file, { force: true });
}

export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}
