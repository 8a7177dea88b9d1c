// The one-daemon-per-data-dir lock. Two daemons must never write one store,
// whatever runtime dirs they were given, so the lock lives in the data dir:
// an exclusive SQLite lock on $LOGD_DIR/daemon.lock (a POSIX record lock
// underneath), held for the daemon's lifetime and released by the kernel when
// the process dies, so a killed daemon never leaves a stale lock behind.
//
// It replaces an abstract-namespace socket named after the uid and the data
// dir's hash: such names have no permissions, so another local user could
// bind the name first and keep the user's daemon from ever starting. The lock
// file is created 0600 in the user's data dir; another user can neither open
// it (not even to take a shared lock that would block ours) nor create it.
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';

export class DataDirLock {
  private constructor(private readonly db: Database.Database) {}

  /** Takes the lock, or returns null when another daemon holds it. Throws when the lock file is not the user's. */
  static acquire(dataDir: string): DataDirLock | null {
    const file = path.join(dataDir, 'daemon.lock');
    let fd: number;
    try {
      fd = fs.openSync(file, fs.constants.O_RDWR | fs.constants.O_CREAT | fs.constants.O_NOFOLLOW, 0o600);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ELOOP') throw new Error(`serve: the lock file ${file} is a symbolic link; remove it (logd never makes one there), and keep LOGD_DIR private (0700)`);
      throw e;
    }
    try {
      const st = fs.fstatSync(fd);
      const uid = typeof process.getuid === 'function' ? process.getuid() : 0;
      if (st.uid !== uid || (st.mode & 0o077) !== 0) {
        throw new Error(`serve: the lock file ${file} is owned by uid ${st.uid} with mode 0${(st.mode & 0o777).toString(8)}; it must be yours and 0600. Another local user may be interfering with your data dir: remove the file, and keep LOGD_DIR private (0700)`);
      }
    } finally {
      fs.closeSync(fd); // before SQLite opens it: closing any descriptor of a file drops the process's POSIX locks on it
    }
    const db = new Database(file, { timeout: 0 });
    try {
      db.pragma('locking_mode = EXCLUSIVE'); // keep the write lock after the first transaction, until close
      // The holder row is for people reading the file; no fsync for it (the lock is the kernel's record lock, not
      // the row): 5-6 ms less of every daemon start. A power loss mid-write can leave the file damaged; said below.
      db.pragma('synchronous = OFF');
      db.exec('BEGIN EXCLUSIVE; CREATE TABLE IF NOT EXISTS holder (pid INTEGER NOT NULL); DELETE FROM holder; INSERT INTO holder VALUES (' + process.pid + '); COMMIT');
      return new DataDirLock(db);
    } catch (e) {
      db.close();
      const code = (e as { code?: string }).code;
      if (code === 'SQLITE_BUSY') return null;
      if (code === 'SQLITE_CORRUPT' || code === 'SQLITE_NOTADB') {
        throw new Error(`serve: the lock file ${file} is damaged (${code}; a power loss while a daemon started can do that). It holds nothing else: when no logd daemon runs for this data dir (logd status), remove it and start again`);
      }
      throw e;
    }
  }

  release(): void {
    if (this.db.open) this.db.close();
  }
}
