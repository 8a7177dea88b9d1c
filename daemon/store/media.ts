// A run's images on disk: content-addressed files `<run dir>/media/<sha256>.<png|jpg>`,
// written (and fsynced, with their directory) before the MEDIA frame that
// names them is appended, so a durable frame never names a missing file. The
// same image logged twice is stored once. Histograms and text need no file:
// they live in the MEDIA frames of the record log (format.ts).
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';

const EXT = { png: 'png', jpeg: 'jpg' } as const;
const SHA256 = /^[0-9a-f]{64}$/;

export function mediaDir(runDir: string): string {
  return path.join(runDir, 'media');
}

/** Stores an image's bytes; returns their sha256 (the file's name). Throws what the disk said (ENOSPC, ...). */
export function writeImage(runDir: string, data: Uint8Array, format: 'png' | 'jpeg'): string {
  const sha = crypto.createHash('sha256').update(data).digest('hex');
  const dir = mediaDir(runDir);
  const file = path.join(dir, `${sha}.${EXT[format]}`);
  try {
    const st = fs.lstatSync(file);
    if (st.isFile() && st.size === data.byteLength) return sha;
  } catch {
    /* not there yet */
  }
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const tmp = path.join(dir, `.${sha}.${process.pid}.tmp`);
  const fd = fs.openSync(tmp, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_TRUNC | fs.constants.O_NOFOLLOW, 0o600);
  try {
    for (let off = 0; off < data.byteLength;) off += fs.writeSync(fd, data, off, data.byteLength - off);
    fs.fsyncSync(fd);
  } catch (e) {
    fs.closeSync(fd);
    fs.rmSync(tmp, { force: true });
    throw e;
  }
  fs.closeSync(fd);
  fs.renameSync(tmp, file);
  const dfd = fs.openSync(dir, 'r');
  try {
    fs.fsyncSync(dfd);
  } finally {
    fs.closeSync(dfd);
  }
  return sha;
}

/** An image's bytes by its sha256, or null when the run has no such image. Never follows a link. */
export function readImage(runDir: string, sha: string): { data: Buffer; format: 'png' | 'jpeg' } | null {
  if (!SHA256.test(sha)) return null;
  for (const format of ['png', 'jpeg'] as const) {
    const file = path.join(mediaDir(runDir), `${sha}.${EXT[format]}`);
    let fd: number;
    try {
      fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
    } catch {
      continue;
    }
    try {
      if (!fs.fstatSync(fd).isFile()) return null;
      return { data: fs.readFileSync(fd), format };
    } finally {
      fs.closeSync(fd);
    }
  }
  return null;
}
