// What the uploader needs to know of this node's runs, from two places: the
// daemon (its registry knows how much of a live run's log is durable) and a
// bare data dir (`logd sync` without a daemon, where the logs are read as they
// lie on disk).
import fs from 'node:fs';
import path from 'node:path';
import type { RunRow } from '../store/index-db.js';
import Database from 'better-sqlite3';
import type { IndexDb } from '../store/index-db.js';

/** A file in a run's directory that asks for the run to be uploaded even though it is offline. */
export const SYNC_REQUEST = 'upload-requested';

export interface LocalRuns {
  /** The data dir these runs are in (its store identity: store-identity.ts). */
  readonly dataDir: string;
  ids(): string[];
  logFile(id: string): string;
  /** Bytes of the log that are durable (a frame boundary or past one: the reader stops at whole frames). */
  durableBytes(id: string): number;
  /** Cheap: the run's mode ('online', 'offline'), or null if it is not readable yet. */
  mode(id: string): string | null;
  /** How many history rows are durable locally (cheap). */
  historyRows(id: string): number;
  /** The run's listing row, as the local index has it. */
  row(id: string): RunRow | null;
  /** The node's system log, or null when there is none. */
  systemLog(): string | null;
  syncRequested(id: string): boolean;
  /** What goes on top of this run's log offsets in the store (RunMeta.fromStore; 0 for a run begun on this node). */
  offsetBase(id: string): number;
  /** Open on this daemon right now, or continued since the last ask (a run continued after it was uploaded whole); cheap. */
  isOpen?(id: string): boolean;
}

abstract class DirRuns implements LocalRuns {
  constructor(readonly runsDir: string, readonly dataDir: string) {}

  ids(): string[] {
    try {
      return fs.readdirSync(this.runsDir);
    } catch {
      return [];
    }
  }

  logFile(id: string): string {
    return path.join(this.runsDir, id, 'records.log');
  }

  durableBytes(id: string): number {
    try {
      return fs.statSync(this.logFile(id)).size;
    } catch {
      return 0;
    }
  }


  /** Fixed for a run's life (its RUN frame says it): looked up once. */
  private bases = new Map<string, number>();

  offsetBase(id: string): number {
    const known = this.bases.get(id);
    if (known !== undefined) return known;
    const row = this.row(id);
    if (!row) return 0;
    let base = 0;
    if (row.metadata_json.includes('"fromStore"')) {
      try {
        base = (JSON.parse(row.metadata_json) as { fromStore?: { offsetBase?: number } }).fromStore?.offsetBase ?? 0;
      } catch {
        base = 0;
      }
    }
    this.bases.set(id, base);
    return base;
  }

  systemLog(): string | null {
    const f = path.join(this.dataDir, 'system', 'records.log');
    return fs.existsSync(f) ? f : null;
  }

  syncRequested(id: string): boolean {
    return fs.existsSync(path.join(this.runsDir, id, SYNC_REQUEST));
  }

  historyRows(id: string): number {
    return this.row(id)?.history_rows ?? 0;
  }

  abstract mode(id: string): string | null;
  abstract row(id: string): RunRow | null;
}

/**
 * What the daemon tells the uploader of its open runs (the composition root
 * wires it to the run registry; this stage never reaches into it). Each
 * answers null for a run that is not open.
 */
export interface OpenRunsView {
  /** Bytes of the open run's log that are durable. */
  durableBytes(id: string): number | null;
  historyRows(id: string): number | null;
  mode(id: string): string | null;
  row(id: string): RunRow | null;
  /** Whether the run was continued (a new attempt) since the last ask; asking consumes it. */
  continued?(id: string): boolean;
}

/** Inside the daemon: open runs through the daemon's view of them, the rest through the index. */
export class DaemonRuns extends DirRuns {
  constructor(runsDir: string, dataDir: string, private index: IndexDb, private open: OpenRunsView) {
    super(runsDir, dataDir);
  }

  override durableBytes(id: string): number {
    return this.open.durableBytes(id) ?? super.durableBytes(id);
  }

  override historyRows(id: string): number {
    return this.open.historyRows(id) ?? super.historyRows(id);
  }

  /** A run's mode never changes: asked every pass for every run not uploaded yet (offline ones for good), it is looked up once. */
  private modes = new Map<string, string>();

  mode(id: string): string | null {
    const known = this.modes.get(id);
    if (known) return known;
    const mode = this.open.mode(id) ?? this.index.get(id)?.mode ?? null;
    if (mode) this.modes.set(id, mode);
    return mode;
  }

  row(id: string): RunRow | null {
    return this.open.row(id) ?? this.index.get(id) ?? null;
  }

  isOpen(id: string): boolean {
    return this.open.historyRows(id) !== null || (this.open.continued?.(id) ?? false);
  }
}

/**
 * A data dir read without its daemon (`logd sync`): rows from the SQLite
 * index opened read-only. Nothing here writes to the store: a daemon may be
 * appending to these logs right now.
 */
export class DataDirRuns extends DirRuns {
  private db: Database.Database | null = null;

  constructor(dataDir: string) {
    super(path.join(dataDir, 'runs'), dataDir);
  }

  private index(): Database.Database | null {
    if (this.db) return this.db;
    const file = path.join(this.dataDir, 'index.db');
    if (!fs.existsSync(file)) return null;
    this.db = new Database(file, { readonly: true, fileMustExist: true });
    return this.db;
  }

  mode(id: string): string | null {
    return this.row(id)?.mode ?? null;
  }

  row(id: string): RunRow | null {
    return (this.index()?.prepare('SELECT * FROM runs WHERE id = ?').get(id) as RunRow | undefined) ?? null;
  }

  close(): void {
    this.db?.close();
    this.db = null;
  }
}
