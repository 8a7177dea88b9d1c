// gRPC over node:http2 for the client: unary calls and streams to one daemon
// address, framed as gRPC frames them (a 5-byte header per message, the
// status in the trailers). The client needs only this much of gRPC, and
// loading it costs a fresh process a few milliseconds where grpc-js costs
// tens. The daemon still serves with grpc-js; any gRPC client can talk to it.
import http2 from 'node:http2';
import net from 'node:net';
import { EventEmitter } from 'node:events';
import { encode, decode } from './codec.js';
import { METHODS } from './schema.js';
import { LOGD_VERSION, PROTOCOL_VERSION } from '../../src/config.js';

/** gRPC status codes used here (the numbers are the wire's). */
export const Status = { OK: 0, CANCELLED: 1, UNKNOWN: 2, DEADLINE_EXCEEDED: 4, NOT_FOUND: 5, PERMISSION_DENIED: 7, RESOURCE_EXHAUSTED: 8, INTERNAL: 13, UNAVAILABLE: 14, UNAUTHENTICATED: 16 } as const;

/** What a failed call reports: grpc-js's ServiceError shape, so callers read `code` and `details` as before. */
export interface CallStatusError extends Error { code: number; details: string }

export function statusError(code: number, details: string): CallStatusError {
  return Object.assign(new Error(`${code} ${details}`), { code, details });
}

/** The largest message either side accepts (LOGD_MAX_MESSAGE_MB's default on the daemon). */
const MAX_MESSAGE = 64 * 1024 * 1024;
/** The receive window: history chunks of several MB stream without waiting on window updates. */
const WINDOW = 8 * 1024 * 1024;

const { NGHTTP2_CANCEL, NGHTTP2_REFUSED_STREAM, NGHTTP2_ENHANCE_YOUR_CALM } = http2.constants;

/** `unix:/path`, `unix:///path`, `host:port` or `[v6]:port` → how to open a socket to it. */
function socketTo(target: string): () => net.Socket {
  if (target.startsWith('unix:')) {
    const p = target.slice(5).replace(/^\/\/(?=\/)/, '');
    return () => net.connect(p);
  }
  const m = /^(?:dns:(?:\/\/\/)?)?\[?([^\]]+?)\]?:(\d+)$/.exec(target);
  if (!m) throw new Error(`channel: cannot read the daemon address ${JSON.stringify(target)}; expected unix:/path or host:port`);
  return () => net.connect(Number(m[2]), m[1]);
}

/** A call in flight: one HTTP/2 stream, its frames and its status. */
export class Call extends EventEmitter {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private status: { code: number; details: string } | null = null;
  private done = false;
  private streamError: string | null = null;

  constructor(
    private readonly stream: http2.ClientHttp2Stream,
    private readonly responseType: string,
    private readonly requestType: string,
    private readonly onClose: () => void,
    /** Why the connection failed, when it did (ECONNREFUSED, ENOENT, ...). */
    private readonly connectionError: () => string | null,
  ) {
    super();
    stream.on('response', (h) => this.onHeaders(h));
    stream.on('trailers', (h) => this.onHeaders(h));
    stream.on('data', (d: Buffer) => this.onData(d));
    // The outcome is decided at 'close'; the error (a failed connect: ENOENT, ECONNREFUSED) says why.
    stream.on('error', (e: NodeJS.ErrnoException) => (this.streamError ??= e.code && e.code.startsWith('E') && !e.code.startsWith('ERR_') ? `${e.code}: ${e.message}` : e.message));
    stream.on('close', () => this.onStreamClose());
  }

  private onHeaders(h: http2.IncomingHttpHeaders): void {
    const s = h['grpc-status'];
    if (s !== undefined && !this.status) {
      const raw = h['grpc-message'];
      let details = typeof raw === 'string' ? raw : '';
      try {
        details = decodeURIComponent(details);
      } catch {
        /* shown as sent */
      }
      this.status = { code: Number(s), details };
    } else if (h[':status'] !== undefined && Number(h[':status']) !== 200 && !this.status) {
      this.status = { code: Status.UNKNOWN, details: `the daemon answered HTTP ${h[':status']}, not gRPC` };
    }
  }

  private onData(d: Buffer): void {
    this.pending.push(d);
    this.pendingBytes += d.byteLength;
    while (this.pendingBytes >= 5) {
      const head = this.pending.length === 1 ? this.pending[0] : (this.pending = [Buffer.concat(this.pending)])[0];
      const len = head.readUInt32BE(1);
      if (len > MAX_MESSAGE) return this.fail(Status.RESOURCE_EXHAUSTED, `a response of ${len} bytes is over the ${MAX_MESSAGE}-byte limit`);
      if (head.byteLength < 5 + len) return;
      const msg = head.subarray(5, 5 + len);
      this.pending = head.byteLength > 5 + len ? [head.subarray(5 + len)] : [];
      this.pendingBytes -= 5 + len;
      let m: unknown;
      try {
        m = decode(this.responseType, msg);
      } catch (e) {
        return this.fail(Status.INTERNAL, `could not decode the daemon's answer (${(e as Error).message})`);
      }
      if (!this.done) this.emit('data', m);
    }
  }

  private fail(code: number, details: string): void {
    if (this.done) return;
    this.status = { code, details };
    this.stream.close(NGHTTP2_CANCEL);
  }

  private onStreamClose(): void {
    this.onClose();
    if (this.done) return;
    this.done = true;
    let st = this.status;
    if (!st) {
      const rst = this.stream.rstCode;
      if (rst === NGHTTP2_REFUSED_STREAM) st = { code: Status.UNAVAILABLE, details: 'the daemon refused the stream' };
      else if (rst === NGHTTP2_ENHANCE_YOUR_CALM) st = { code: Status.RESOURCE_EXHAUSTED, details: 'the daemon asked to slow down (ENHANCE_YOUR_CALM)' };
      else {
        const why = this.connectionError() ?? this.streamError;
        st = { code: Status.UNAVAILABLE, details: why ? `no connection to the daemon (${why})` : 'the connection to the daemon closed before the call ended' };
      }
    }
    if (st.code === Status.OK) this.emit('end');
    else this.emit('error', statusError(st.code, st.details));
    this.emit('status', st);
  }

  /** Sends one message: an object of the request type, or bytes already encoded as one. */
  write(m: unknown): boolean {
    if (this.done || this.stream.closed || this.stream.writableEnded) return false;
    if (m instanceof Uint8Array) {
      // Encoded already (a sealed batch, up to megabytes): the header goes in
      // front through one writev, without copying the message.
      const head = Buffer.allocUnsafe(5);
      head[0] = 0;
      head.writeUInt32BE(m.byteLength, 1);
      this.stream.cork();
      this.stream.write(head);
      const ok = this.stream.write(m);
      this.stream.uncork();
      return ok;
    }
    const frame = encode(this.requestType, m as Record<string, unknown>, 5);
    frame[0] = 0;
    frame.writeUInt32BE(frame.byteLength - 5, 1);
    return this.stream.write(frame);
  }

  /** Half-closes: no more messages from this side; answers still arrive. */
  end(): void {
    if (!this.stream.writableEnded) this.stream.end();
  }

  /** Ends the call at once, from this side. */
  cancel(details = 'cancelled by the client'): void {
    this.fail(Status.CANCELLED, details);
  }

  /** Gives up at a deadline. */
  expire(ms: number): void {
    this.fail(Status.DEADLINE_EXCEEDED, `Deadline exceeded after ${ms} ms`);
  }
}

/** One HTTP/2 connection to a daemon, opened on first use and again after it closes. */
export class Channel {
  private session: http2.ClientHttp2Session | null = null;
  private active = 0;
  private closed = false;
  private lastError: string | null = null;

  private connections = 0;

  /**
   * `verifyPeer` runs before every connection but the first (which the
   * caller checked as it made the channel) and throws to send nothing.
   */
  constructor(readonly target: string, private readonly token: string, private readonly verifyPeer?: () => void) {}

  private ensureSession(): http2.ClientHttp2Session {
    if (this.session && !this.session.closed && !this.session.destroyed) return this.session;
    if (this.connections++ > 0) this.verifyPeer?.();
    this.lastError = null;
    const s = http2.connect('http://localhost', {
      createConnection: socketTo(this.target),
      settings: { initialWindowSize: WINDOW, enablePush: false },
      // No session-wide refusal (in MB; Node's default is 10, this was 64): a writer that has its whole backlog
      // (LOGD_MAX_BUFFER_MB, 64 by default) queued on its stream while the daemon catches up would otherwise make
      // Node refuse every new call of the process with ENHANCE_YOUR_CALM, and the process's next runs went deferred
      // (measured: a 1 M-row run, then 20 runs: all 20 deferred, the big run's own finish refused too). What a
      // writer holds is bounded by its own backlog.
      maxSessionMemory: Number.MAX_SAFE_INTEGER,
    });
    s.on('error', (e: NodeJS.ErrnoException) => {
      this.lastError = e.code ?? e.message; // every stream on it fails, with this as the reason
    });
    s.on('connect', () => {
      this.lastError = null;
      try {
        s.setLocalWindowSize(WINDOW);
      } catch {
        /* the session closed meanwhile */
      }
    });
    s.on('close', () => {
      if (this.session === s) this.session = null;
    });
    s.on('goaway', () => {
      if (this.session === s) this.session = null; // new calls go to a new connection
    });
    // Like grpc-js: the connection keeps the process alive only while a call is in flight.
    if (this.active === 0) s.unref();
    this.session = s;
    return s;
  }

  /** Opens the connection ahead of the first call. */
  connect(): void {
    if (!this.closed) this.ensureSession();
  }

  /** Starts a call of `method`; `timeoutMs` (unary calls) ends it with DEADLINE_EXCEEDED. */
  start(method: string, timeoutMs?: number): Call {
    const m = METHODS[method];
    if (!m) throw new Error(`channel: no method ${method} in logd.v1.Logd`);
    if (this.closed) throw statusError(Status.UNAVAILABLE, 'the channel was closed');
    const s = this.ensureSession();
    const headers: http2.OutgoingHttpHeaders = {
      ':method': 'POST', ':path': m[0], 'content-type': 'application/grpc', te: 'trailers', 'x-logd-token': this.token,
      // The daemon refuses a client of another wire protocol, naming both versions (daemon/grpc/server.ts).
      'x-logd-protocol': String(PROTOCOL_VERSION), 'x-logd-version': LOGD_VERSION,
    };
    if (timeoutMs !== undefined) headers['grpc-timeout'] = `${Math.max(1, Math.ceil(timeoutMs))}m`;
    if (this.active++ === 0) s.ref();
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      if (--this.active === 0 && !s.destroyed) s.unref();
    };
    let stream: http2.ClientHttp2Stream;
    try {
      stream = s.request(headers, { endStream: false });
    } catch (e) {
      release();
      this.session = null;
      throw statusError(Status.UNAVAILABLE, `could not open a stream to ${this.target} (${(e as Error).message})`);
    }
    return new Call(stream, m[2], m[1], release, () => this.lastError);
  }

  close(): void {
    this.closed = true;
    this.session?.close();
    this.session = null;
  }
}
