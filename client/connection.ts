// One channel per daemon address, with the token on every call and a
// deadline on every unary call. The calls go over client/transport (gRPC on
// node:http2), which a fresh process loads in a few milliseconds.
import { Channel, Status, type Call, type CallStatusError } from './transport/channel.js';
import type { ServiceAddress } from '../src/wire.js';
import { verifyDaemonPeer } from './peer-credentials.js';

export { Status };
export type { Call, CallStatusError };

export class CallError extends Error {
  override name = 'LogdCallError';
  constructor(readonly code: number, readonly method: string, message: string) {
    super(message);
  }
}

export class Connection {
  private readonly channel: Channel;
  private closed = false;

  /** Throws UntrustedDaemonError, before any byte is sent, when the daemon does not run as this user. */
  constructor(readonly address: ServiceAddress) {
    verifyDaemonPeer(address.target);
    // Checked again before every later connection: a loopback port can change hands once its daemon exits.
    this.channel = new Channel(address.target, address.token, () => verifyDaemonPeer(address.target));
  }

  /** Opens the connection now (calls made later find it up); a failure shows in the first call. */
  connect(): void {
    if (!this.closed) this.channel.connect();
  }

  unary<Req, Res>(method: string, req: Req, timeoutMs: number): Promise<Res> {
    return new Promise((resolve, reject) => {
      const failed = (err: CallStatusError) => {
        const hint = err.code === Status.DEADLINE_EXCEEDED ? ` (no answer within ${timeoutMs} ms; is the daemon at ${this.address.target} overloaded or stopped?)` : '';
        reject(new CallError(err.code, method, `${method}: ${err.details || err.message}${hint}`));
      };
      let call: Call;
      try {
        call = this.channel.start(method, timeoutMs);
      } catch (e) {
        // UntrustedDaemonError (a new connection to a daemon that is not this user's) goes out as it is.
        if (typeof (e as CallStatusError).code === 'number') failed(e as CallStatusError);
        else reject(e);
        return;
      }
      let answer: Res | null = null;
      const timer = setTimeout(() => call.expire(timeoutMs), timeoutMs);
      call.on('data', (m: Res) => (answer ??= m));
      call.on('error', (e: CallStatusError) => {
        clearTimeout(timer);
        failed(e);
      });
      call.on('end', () => {
        clearTimeout(timer);
        if (answer === null) failed(Object.assign(new Error('no answer'), { code: Status.INTERNAL, details: 'the daemon ended the call without an answer' }));
        else resolve(answer);
      });
      call.write(req);
      call.end();
    });
  }

  /** The Write stream: the writer sends OpenWriter then batches (encoded or not); opened, acks and controls come back. */
  write(): Call {
    return this.channel.start('write');
  }

  readHistory(req: unknown): Call {
    return this.serverStream('readHistory', req);
  }

  /** ReadSummary: the parts of a run's whole summary and stats (SummaryChunk). */
  readSummary(req: { runId: string }): Call {
    return this.serverStream('readSummary', req);
  }

  private serverStream(method: string, req: unknown): Call {
    const call = this.channel.start(method);
    call.write(req);
    call.end();
    return call;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.channel.close();
  }
}

const pool = new Map<string, Connection>();

export function connectionFor(address: ServiceAddress): Connection {
  const key = `${address.target}#${address.token}`;
  let c = pool.get(key);
  if (!c) {
    c = new Connection(address);
    pool.set(key, c);
  }
  return c;
}

/** Forgets a connection to a daemon that is gone. Not closed: other writers may still hold it until they move on. */
export function dropConnection(c: Connection): void {
  pool.delete(`${c.address.target}#${c.address.token}`);
}
