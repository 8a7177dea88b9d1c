// Spill files: what a client could not hand to the daemon before its process
// ended (or while the daemon was away) goes to LOGD_DIR/spool as frames; the
// daemon ingests them and drops duplicates by sequence number.
//   frame SPILL_HEADER  JSON SpillHeader
//   frame SPILL_BATCH   an encoded logd.v1.WriteRequest holding a batch (the bytes the stream would carry)
export const SPILL_HEADER = 1;
export const SPILL_BATCH = 2;

export interface SpillHeader {
  runId: string;
  runToken: string;
  writerId: string;
  pid: number;
  host: string;
  /** The writer's whole dictionary (ids = index); batches' new_keys agree with it. */
  keys: string[];
  /** Set when the process was exiting: the run's owner finishes with this code. */
  exitCode: number | null;
  /**
   * A deferred run (init() found no usable daemon): the daemon that ingests
   * this file creates the run with this request, this id, `runToken` and
   * `writerId` as its owner. Absent for runs a daemon created.
   */
  create?: DeferredCreate | null;
  /** The process's uncaught exception, when it died of one (docs/story.md): type, message, when (seconds since the epoch). */
  exception?: { type: string; message: string; at: number } | null;
}

/** What CreateRun would have carried, for a run created later from its spill file. */
export interface DeferredCreate {
  project: string; name: string; group: string; jobType: string; configJson: string; tags: string[]; notes: string; mode: string;
  client: { pid: number; host: string; rank?: unknown; clientVersion: string } | null;
  createKey: string;
  /** Why init() could not reach a daemon. */
  reason: string;
}

export function spillFileName(runId: string, writerId: string): string {
  return `${runId}--${writerId}.spill`;
}

/** A deferred run's spill file: also picked up by a running daemon's periodic scan (`logd sync --ingest` puts files there). */
export function deferredSpillFileName(runId: string, writerId: string): string {
  return `${runId}--${writerId}.deferred.spill`;
}
