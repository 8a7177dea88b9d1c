// Backpressure: bounded buffering per stream and for the whole daemon.
//
// A batch is held in memory from the moment it is read off a stream until the
// group commit has made it durable. Without a bound, clients that write faster
// than the disk syncs (or that ignore flow control altogether) grow the daemon
// without limit. Here, a stream whose writer has more than STREAM_PENDING_BYTES
// waiting for the disk, or any stream that sends while the whole daemon has
// more than DAEMON_PENDING_BYTES waiting, is paused: grpc-js then stops reading
// it, and HTTP/2 flow control stops the client once the stream's receive window
// (daemon/grpc/http2-window.ts) is full. The client keeps its batches (in memory,
// then in its overflow file); nothing is dropped. Paused streams resume after
// the commit round that makes their bytes durable.
import type { Writer, WriteCall } from './run.js';

export const STREAM_PENDING_BYTES = 256 * 1024;
export const DAEMON_PENDING_BYTES = 16 * 1024 * 1024;
/**
 * While the disk refuses writes (full, read-only), nothing becomes durable and
 * the bounds above would leave the rows in the trainers, which lose them if
 * they exit before space is back (their own spool is on the same disk). The
 * daemon then takes up to this much in all, per stream too, and keeps it
 * until it can be stored: memory is the buffer of last resort.
 */
export const DISK_PROBLEM_PENDING_BYTES = 128 * 1024 * 1024;

export class Backpressure {
  /** Bytes appended to record logs and not yet durable, over all writers. */
  pendingBytes = 0;
  private readonly paused = new Map<WriteCall, Writer>();
  /** Set while the disk refuses writes: the bounds widen (DISK_PROBLEM_PENDING_BYTES). */
  private diskProblem = false;

  private get streamBound(): number {
    return this.diskProblem ? DISK_PROBLEM_PENDING_BYTES : STREAM_PENDING_BYTES;
  }

  private get daemonBound(): number {
    return this.diskProblem ? DISK_PROBLEM_PENDING_BYTES : DAEMON_PENDING_BYTES;
  }

  /** The disk refuses writes (or works again); widening the bounds lets paused streams go on. */
  setDiskProblem(problem: boolean): void {
    if (this.diskProblem === problem) return;
    this.diskProblem = problem;
    if (problem) this.release();
  }

  /** `bytes` of `w`'s batch were appended; pauses its stream when a bound is passed. */
  appended(w: Writer, bytes: number): void {
    w.pendingBytes += bytes;
    this.pendingBytes += bytes;
    const s = w.stream;
    if (s && !this.paused.has(s) && (w.pendingBytes > this.streamBound || this.pendingBytes > this.daemonBound)) {
      s.pause();
      this.paused.set(s, w);
    }
  }

  /** `bytes` of `w`'s were made durable by a commit round. */
  durable(w: Writer, bytes: number): void {
    w.pendingBytes -= bytes;
    this.pendingBytes -= bytes;
  }

  /** After a commit round: resumes the paused streams that are within bounds again. */
  release(): void {
    if (this.pendingBytes > this.daemonBound) return;
    for (const [s, w] of this.paused) {
      if (w.pendingBytes > this.streamBound) continue;
      this.paused.delete(s);
      if (!s.destroyed) s.resume();
    }
  }

  /** A stream that ended is no longer held. */
  forget(s: WriteCall): void {
    this.paused.delete(s);
  }

  get pausedStreams(): number {
    return this.paused.size;
  }
}
