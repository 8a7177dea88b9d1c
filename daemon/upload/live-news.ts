// What an open run whose log is all in still sends to the shared store: its row again when its rank health moved
// (daemon/health/: a new event at once, its progress every 15 s), and otherwise every heartbeat while it lives
// (a quarter of the takeover lease, at most 15 s), so that the store's `uploaded_at` of a live run never ages past
// the lease and no other node takes it over (continue.ts). A node that is gone sends nothing. The uploader
// (uploader.ts) asks once a pass, per run, and tells what it sent otherwise (a slice carries the row too).
import type { RunRow } from '../store/index-db.js';

/** The longest an open run's row goes unsent while it lives (a shorter lease sends it every quarter lease). */
export const HEARTBEAT_MAX_MS = 15_000;

export interface LiveNewsOptions {
  /** Sends the run's row alone. */
  uploadRow(row: RunRow): Promise<unknown>;
  /** Whether the run is open on this daemon (its owner lives, or may still come back). */
  isOpen(id: string): boolean;
  /** A failure that refuses the run (another node's): true when it was, and the run is left alone. */
  refused(id: string, e: unknown): boolean;
  /** The takeover lease of the store's runs. */
  takeoverAfterMs: number;
}

export class LiveNews {
  /** When each run was last sent (a slice, or its row). */
  private sentAt = new Map<string, number>();
  /** What of each open run's health was last sent: its events, and a 15 s clock for its progress. */
  private healthSent = new Map<string, string>();
  readonly heartbeatMs: number;

  constructor(private o: LiveNewsOptions) {
    this.heartbeatMs = Math.max(250, Math.min(HEARTBEAT_MAX_MS, o.takeoverAfterMs / 4));
  }

  /** The run's row went to the store just now (with a slice). */
  sent(id: string): void {
    this.sentAt.set(id, Date.now());
  }

  /** The run is done: nothing more to send for it. */
  forget(id: string): void {
    this.sentAt.delete(id);
    this.healthSent.delete(id);
  }

  /**
   * An open run with its log all in: its health news, else its heartbeat when one is due. True when health news
   * went (the pass did work); a heartbeat is upkeep, not work. Store errors other than a refusal are thrown.
   */
  async send(id: string, row: RunRow): Promise<boolean> {
    if (await this.sendHealth(id, row)) return true;
    await this.heartbeat(id, row);
    return false;
  }

  private async sendHealth(id: string, row: RunRow): Promise<boolean> {
    if (!row.metadata_json.includes('"health":')) return false;
    let sig = '';
    try {
      const h = (JSON.parse(row.metadata_json) as { health?: { events?: Array<{ at: number }> } }).health;
      const ev = h?.events ?? [];
      sig = `${ev.length}:${ev[ev.length - 1]?.at ?? 0}:${Math.floor(Date.now() / 15_000)}`;
    } catch {
      return false;
    }
    if (this.healthSent.get(id) === sig) return false;
    if (!(await this.upload(id, row))) return false;
    this.healthSent.set(id, sig);
    return true;
  }

  /** Not `logd sync`'s: it holds no run open, so it never sends one. */
  private async heartbeat(id: string, row: RunRow): Promise<void> {
    if (Date.now() - (this.sentAt.get(id) ?? 0) < this.heartbeatMs || !this.o.isOpen(id)) return;
    await this.upload(id, row);
  }

  private async upload(id: string, row: RunRow): Promise<boolean> {
    try {
      await this.o.uploadRow(row);
    } catch (e) {
      if (this.o.refused(id, e)) return false;
      throw e;
    }
    this.sent(id);
    return true;
  }
}
