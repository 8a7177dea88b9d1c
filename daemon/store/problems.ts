// What is wrong with the stored data, as opposed to storing right now (a full
// disk is the registry's `storageProblem`): run logs with regions that fail
// their checksum, and run directories the daemon cannot read. Each problem is
// logged once when found and kept in the index's meta table, so `logd status`
// and `logd show` report it across restarts until the data is readable again.
import type { IndexDb } from './index-db.js';
import type { DamagedRegion } from '../../src/frames.js';

export interface RunDamage {
  /** Regions of the log that fail their checksum; reading skips each to the next valid frame. */
  regions: DamagedRegion[];
  bytes: number;
  /** Rows in the frames that pass their checksum (a damaged frame's rows cannot be read). */
  readableRows: number | null;
  foundAt: number;
}

const DAMAGE = 'damage:';
const UNREADABLE = 'unreadable:';
const JOURNAL = 'journal:';
/** Journal problems kept for `logd status` (the newest). */
const JOURNAL_KEPT = 50;

export class StoreProblems {
  constructor(private index: IndexDb, private log: (line: string) => void) {}

  /** Records what a read of run `id`'s log found; logs a change once. */
  noteDamage(id: string, regions: DamagedRegion[], readableRows: number | null, file: string): void {
    try {
      this.recordDamage(id, regions, readableRows, file);
    } catch (e) {
      this.log(`store: could not note the damage of run ${id} in the index (${(e as Error).message}); reads still skip it`);
    }
  }

  private recordDamage(id: string, regions: DamagedRegion[], readableRows: number | null, file: string): void {
    const key = DAMAGE + id;
    const before = this.index.metaGet(key);
    if (regions.length === 0) {
      if (before) this.index.metaDelete(key);
      return;
    }
    const bytes = regions.reduce((n, r) => n + r.bytes, 0);
    const old = before ? (JSON.parse(before) as RunDamage) : null;
    const same = old && JSON.stringify(old.regions) === JSON.stringify(regions);
    if (same && (readableRows === null || old.readableRows === readableRows)) return;
    const damage: RunDamage = { regions, bytes, readableRows: readableRows ?? old?.readableRows ?? null, foundAt: old?.foundAt ?? Date.now() / 1000 };
    this.index.metaSet(key, JSON.stringify(damage));
    if (!same) {
      const where = regions.map((r) => `${r.bytes} bytes at offset ${r.offset}`).join(', ');
      this.log(`store: run ${id}: ${file} has ${regions.length} region(s) that fail their checksum (${where}); reads skip to the next valid frame, the bytes stay in the file`);
    }
  }

  damageOf(id: string): RunDamage | null {
    const v = this.index.metaGet(DAMAGE + id);
    return v ? (JSON.parse(v) as RunDamage) : null;
  }

  /** A run directory that could not be read (at an index rebuild); `null` clears it. */
  noteUnreadable(id: string, why: string | null): void {
    try {
      if (why === null) return this.index.metaDelete(UNREADABLE + id);
      this.index.metaSet(UNREADABLE + id, why);
    } catch (e) {
      this.log(`store: could not note run ${id} as unreadable in the index (${(e as Error).message})`);
    }
  }

  /** A crash journal that was refused, damaged or could not be delivered (daemon/runs/journal.ts). */
  noteJournal(line: string): void {
    // Called where a writer died, often while the disk is full: the index may refuse the write. The line is in
    // the daemon's log and on the run (metadata.journal) already; a failure here must never end the daemon.
    try {
      const keys = this.index.metaWithPrefix(JOURNAL).map((e) => e.k).sort();
      for (const k of keys.slice(0, Math.max(0, keys.length - JOURNAL_KEPT + 1))) this.index.metaDelete(k);
      this.index.metaSet(`${JOURNAL}${Date.now().toString().padStart(15, '0')}-${Math.random().toString(36).slice(2, 8)}`, line);
    } catch (e) {
      this.log(`store: could not keep a journal problem for \`logd status\` (${(e as Error).message}); it is in this log and on the run`);
    }
  }

  /** One line per problem, for `logd status`. */
  lines(): string[] {
    const out: string[] = [];
    for (const { k, v } of this.index.metaWithPrefix(DAMAGE)) {
      const d = JSON.parse(v) as RunDamage;
      out.push(`run ${k.slice(DAMAGE.length)}: ${describeDamage(d)}`);
    }
    for (const { k, v } of this.index.metaWithPrefix(UNREADABLE)) out.push(`run ${k.slice(UNREADABLE.length)}: cannot be read, left out of \`logd runs\`: ${v}`);
    for (const e of this.index.metaWithPrefix(JOURNAL).sort((a, b) => (a.k < b.k ? -1 : 1))) out.push(e.v);
    return out;
  }
}

export function describeDamage(d: RunDamage): string {
  return `${d.regions.length} damaged region(s) of its log, ${d.bytes} bytes, fail their checksum` +
    (d.readableRows !== null ? `; ${d.readableRows} rows readable` : '') + '; the rest of the log is read past them';
}
