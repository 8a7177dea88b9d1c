// One writer's stream to the daemon (the Write call): OpenWriter, with a
// deadline on its answer; the backlog's batches sent in seq order; the stream
// closed when idle; and after a break, the daemon looked for again (it may
// have restarted, with a new token, or been replaced by a sidecar) before a
// new stream opens, with backoff. What the daemon answers goes to the writer
// (client/writer.ts), which keeps the batches and decides what each answer
// means; this file keeps the connection and its timers.
import type { WriteResponseMsg, ServiceAddress, ClientInfo } from '../src/wire.js';
import { connectionFor, dropConnection, type Connection, type Call, type CallStatusError } from './connection.js';
import type { Sealed } from './backlog.js';
import { findDaemon } from './discovery.js';

/** A stream with nothing to send closes after this long, so it never keeps the process alive. */
const STREAM_IDLE_MS = 1000;
/**
 * A daemon answers OpenWriter at once (daemon/grpc/server.ts); a stream with no
 * answer after this long is stuck (a connection nobody serves), and is given
 * up and opened again after looking for the daemon anew.
 */
const OPEN_ANSWER_MS = 10_000;
/** How many stream events `history` keeps (they go into finish's message when it times out). */
const HISTORY = 12;
/** LOGD_TRACE_WRITER=1 prints every stream event to stderr as it happens. */
const TRACE = process.env.LOGD_TRACE_WRITER === '1';

/** What the stream needs of its writer. */
export interface StreamHost {
  /** OpenWriter's request as of now (a deferred run gets its token and writer id later). */
  openRequest(): { runId: string; runToken: string; writerId: string; client: ClientInfo; keys: string[] };
  /** The batches not yet acknowledged, in memory, oldest first (client/backlog.ts). */
  batches(): readonly Sealed[];
  /** Nothing sealed waits anywhere and no row is open: an idle stream may close. */
  idle(): boolean;
  /** No batch in memory and no row open: a broken stream need not reopen before the next flush. */
  nothingToSend(): boolean;
  /** The stream has no more to do: the run is final, or the writer closed with nothing left. */
  done(): boolean;
  /** The run is final (nothing will be accepted any more). */
  final(): boolean;
  /** The daemon answered OpenWriter: it has every batch up to `lastSeq`. */
  opened(lastSeq: number): void;
  /** An ack or a control message. */
  answer(m: WriteResponseMsg): void;
  /** The daemon refused the stream for good (retrying cannot help). */
  refused(why: string): void;
  /** What went wrong last (run.problem); the stream sets it while it reconnects. */
  problem(): string | null;
  setProblem(p: string): void;
  warn(msg: string): void;
  /** The run and writer, for messages. */
  who(): { runId: string; writerId: string };
}

export class WriterStream {
  private conn: Connection | null;
  private call: Call | null = null;
  private opened = false;
  /** host.batches[0..sentIdx) went out on the current stream. */
  private sentIdx = 0;
  /** The highest seq any stream carried. */
  private maxSentSeq = 0;
  private openTimer: NodeJS.Timeout | null = null;
  private idleTimer: NodeJS.Timeout | null = null;
  private reconnectTimer: NodeJS.Timeout | null = null;
  private backoffMs = 50;
  /** The last stream broke: look for the daemon again before reopening (it may have restarted). */
  private needsRediscovery = false;
  private connecting = false;
  private authRetries = 0;
  /** The last stream events (opened, broken and why, where the daemon was looked for), oldest first. */
  private readonly events: string[] = [];
  private readonly bornAt = Date.now();

  /** `address` null: a deferred run, no daemon yet (use() names it). */
  constructor(private readonly host: StreamHost, address: ServiceAddress | null) {
    this.conn = address ? connectionFor(address) : null;
  }

  /** From now on the daemon at `address` (a deferred run was created there). */
  use(address: ServiceAddress): void {
    this.conn = connectionFor(address);
  }

  /** The connection in use now (it changes when the daemon was restarted); null while deferred. */
  get connection(): Connection | null {
    return this.conn;
  }

  /** Sends what no stream carried yet, opening a stream (or looking for the daemon first) when there is none. */
  pump(): void {
    if (!this.call) {
      if (this.host.batches().length === 0 || this.reconnectTimer || this.connecting) return;
      if (this.needsRediscovery) {
        void this.reconnect();
        return;
      }
      this.open();
    }
    // Batches no stream has carried yet go out right behind OpenWriter, without
    // waiting for its answer (a round trip, most of a small run's finish); the
    // daemon handles a stream's messages in order. Batches an earlier stream
    // carried wait for `opened`, which says which of them are durable already.
    const batches = this.host.batches();
    if (!this.opened && this.sentIdx < batches.length && batches[this.sentIdx].seq <= this.maxSentSeq) return;
    while (this.sentIdx < batches.length) {
      const s = batches[this.sentIdx++];
      if (s.seq > this.maxSentSeq) this.maxSentSeq = s.seq;
      this.call!.write(s.bytes);
    }
    this.armIdle();
  }

  /** A waiter needs progress: a stream is opened (or the daemon looked for) unless one is open or on its way. */
  ensure(): void {
    if (this.call || this.reconnectTimer || this.connecting) return;
    if (this.needsRediscovery) void this.reconnect();
    else this.open();
  }

  /** `n` batches left the front of the backlog (acknowledged). */
  shifted(n: number): void {
    this.sentIdx = Math.max(0, this.sentIdx - n);
  }

  /** The batch at index `i` of the backlog was removed (the daemon rejected it). */
  removedAt(i: number): void {
    if (i >= 0 && i < this.sentIdx) this.sentIdx--;
  }

  /** An ack came: the stream is in use. */
  touched(): void {
    this.armIdle();
  }

  private open(): void {
    let call: Call;
    try {
      call = this.conn!.write();
    } catch (e) {
      // No stream could start: a closed channel, or a new connection whose
      // daemon is not this user's (UntrustedDaemonError; nothing was sent).
      // Look for the daemon again later; the rows stay buffered or spilled.
      const why = (e as Error).message;
      if (this.host.problem() !== `reconnect: ${why}`) this.host.warn(`logd: run ${this.host.who().runId}: ${why}`);
      this.note(`no stream could start: ${why}`);
      this.needsRediscovery = true;
      this.scheduleReconnect(why);
      return;
    }
    this.call = call;
    this.opened = false;
    this.sentIdx = 0;
    this.note(`stream to ${this.conn!.address.target}: OpenWriter sent`);
    this.armOpenDeadline(call);
    call.on('data', (m: WriteResponseMsg) => this.onMessage(call, m));
    call.on('error', (e: CallStatusError) => this.onBroken(call, e));
    call.on('end', () => this.onBroken(call, null));
    call.write({ open: this.host.openRequest() });
  }

  private onMessage(call: Call, m: WriteResponseMsg): void {
    if (call !== this.call) return;
    if (m.opened) {
      this.opened = true;
      this.clearOpenDeadline();
      this.note(`opened: the daemon has up to batch ${m.opened.lastSeq}; ${this.host.batches().length} batch(es) wait for it`);
      this.backoffMs = 50;
      this.authRetries = 0;
      this.host.opened(m.opened.lastSeq);
      if (!this.host.final()) this.pump();
    } else this.host.answer(m);
  }

  private armIdle(): void {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => {
      this.idleTimer = null;
      if (this.call && this.host.idle()) this.end();
    }, STREAM_IDLE_MS);
    this.idleTimer.unref();
  }

  /** Ends the stream in use, if any (the writer is idle or closing). */
  end(): void {
    const call = this.call;
    this.call = null;
    this.opened = false;
    this.clearOpenDeadline();
    if (call) {
      call.removeAllListeners('data');
      call.on('error', () => {});
      call.end();
    }
  }

  /** Ends the stream and every timer: the writer is closed. */
  close(): void {
    for (const t of [this.idleTimer, this.reconnectTimer, this.openTimer]) if (t) clearTimeout(t);
    this.idleTimer = this.reconnectTimer = this.openTimer = null;
    this.end();
  }

  private onBroken(call: Call, e: CallStatusError | null): void {
    if (call !== this.call) return;
    this.call = null;
    this.opened = false;
    this.clearOpenDeadline();
    this.note(`stream ended: ${e ? `${e.code} ${e.details || e.message}` : 'closed by the daemon'}`);
    if (this.host.done()) return;
    if (e) this.needsRediscovery = true;
    // UNAUTHENTICATED right after a daemon restart means a new token: look again, a few times.
    const authFailed = e?.code === 16 && this.authRetries++ >= 3;
    if (e && (e.code === 7 || authFailed || e.code === 5 || e.code === 9)) {
      // PERMISSION_DENIED, UNAUTHENTICATED again, NOT_FOUND, FAILED_PRECONDITION: retrying cannot help.
      this.host.refused(`the daemon refused the stream: ${e.details}`);
      return;
    }
    if (this.host.nothingToSend()) return; // reopened on the next flush
    this.scheduleReconnect(e ? e.details || e.message : 'stream closed');
  }

  private scheduleReconnect(why: string): void {
    if (this.reconnectTimer) return;
    const delay = this.backoffMs;
    this.backoffMs = Math.min(this.backoffMs * 2, 1000);
    this.host.setProblem(`reconnect: ${why}`);
    this.note(`reconnect in ${delay} ms`);
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = null;
      void this.reconnect();
    }, delay);
    this.reconnectTimer.unref();
  }

  private async reconnect(): Promise<void> {
    if (this.connecting) return;
    this.connecting = true;
    try {
      if (await this.rediscover()) this.needsRediscovery = false;
    } finally {
      this.connecting = false;
    }
    if (!this.call && !this.host.final()) this.open();
  }

  /**
   * Looks for the daemon again, which may have been restarted (a new token)
   * or replaced by a sidecar, and uses it from now on. False when none was
   * found: the old address is kept and the caller tries again later.
   */
  async rediscover(): Promise<boolean> {
    if (!this.conn) return false; // deferred: retryCreate() brings the daemon
    try {
      const addr = await findDaemon({ ignoreEnv: true });
      if (addr.target !== this.conn.address.target || addr.token !== this.conn.address.token) {
        dropConnection(this.conn);
        this.conn = connectionFor(addr);
        this.note(`found a new daemon at ${addr.target}`);
      } else this.note(`the daemon at ${addr.target} is the one in use`);
      return true;
    } catch (e) {
      this.note(`no daemon found: ${(e as Error).message.split('\n')[0]}`);
      return false;
    }
  }

  /** No answer to OpenWriter in OPEN_ANSWER_MS: the stream is given up (onBroken looks for the daemon again). */
  private armOpenDeadline(call: Call): void {
    this.clearOpenDeadline();
    this.openTimer = setTimeout(() => {
      this.openTimer = null;
      if (call === this.call && !this.opened) call.expire(OPEN_ANSWER_MS);
    }, OPEN_ANSWER_MS);
    this.openTimer.unref();
  }

  private clearOpenDeadline(): void {
    if (this.openTimer) clearTimeout(this.openTimer);
    this.openTimer = null;
  }

  private note(event: string): void {
    const line = `+${((Date.now() - this.bornAt) / 1000).toFixed(3)}s ${event}`;
    if (this.events.length === HISTORY) this.events.shift();
    this.events.push(line);
    if (TRACE) {
      const { runId, writerId } = this.host.who();
      process.stderr.write(`logd-trace ${process.pid} ${runId}/${writerId} ${line}\n`);
    }
  }

  /** The last stream events, oldest first, for a message that says why rows did not reach the daemon. */
  get history(): string {
    return this.events.join('; ');
  }
}
