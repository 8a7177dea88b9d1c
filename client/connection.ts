// One channel per daemon address, with the token on every call and a
// deadline on every unary call. The calls go over client/transport (gRPC on
// node:http2), which a fresh process loads in a few milliseconds.
import { Channel, Status, type Call, type CallStatusError } from './transport/channel.js';
import type { ServiceAddress } from '../src/wire.js';

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

  constructor(readonly address: ServiceAddress) {
    this.channel = new Channel(address.target, address.token);
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
        failed(e as CallStatusError);
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
    const call = this.channel.start('readHistory');
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
