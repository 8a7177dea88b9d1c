// Which local store an upload comes from. Node names (LOGD_NODE) are the
// shared store's key for where a run lives, and people set them: two
// daemons given the same name, each with its own run of one id, would both
// take the run's cursor for their own. The store therefore also keeps, per
// run, the identity of the local store that uploads it: a random id stamped
// once in the data dir (`store-id`), which follows the data dir wherever it
// is moved and is never shared by two data dirs.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createHash, randomBytes } from 'node:crypto';

export function storeIdentity(dataDir: string): string {
  const file = path.join(dataDir, 'store-id');
  try {
    const id = fs.readFileSync(file, 'utf8').trim();
    if (/^[0-9a-f]{32}$/.test(id)) return id;
  } catch {
    /* none yet */
  }
  const id = randomBytes(16).toString('hex');
  try {
    const tmp = `${file}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, `${id}\n`, { mode: 0o600 });
    fs.linkSync(tmp, file); // first writer wins: a racing daemon or `logd sync` reads the winner's
    fs.rmSync(tmp, { force: true });
    return id;
  } catch {
    try {
      const won = fs.readFileSync(file, 'utf8').trim();
      if (/^[0-9a-f]{32}$/.test(won)) return won;
    } catch {
      /* a data dir that takes no files (read-only): an identity of host and path, the same each time */
    }
    return createHash('sha256').update(`${os.hostname()}\0${path.resolve(dataDir)}`).digest('hex').slice(0, 32);
  }
}
