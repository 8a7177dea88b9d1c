// One gRPC channel per daemon address, with the token on every call and a
// deadline on every unary call.
import * as grpc from '@grpc/grpc-js';
import { serviceDefinition, TOKEN_METADATA_KEY, type ServiceAddress } from '../src/wire.js';
import { verifyDaemonPeer } from './peer-credentials.js';

const LogdClient = grpc.makeGenericClientConstructor(serviceDefinition, 'Logd');

/** Channel options in one place. */
const CHANNEL_OPTIONS: grpc.ChannelOptions = {
  'grpc.max_send_message_length': 64 * 1024 * 1024,
  'grpc.max_receive_message_length': 64 * 1024 * 1024,
  // Reconnects are driven by the writer's own backoff, not grpc's.
  'grpc.initial_reconnect_backoff_ms': 50,
  'grpc.max_reconnect_backoff_ms': 1000,
  'grpc.enable_retries': 0,
};

export class CallError extends Error {
  override name = 'LogdCallError';
  constructor(readonly code: grpc.status, readonly method: string, message: string) {
    super(message);
  }
}

export class Connection {
  readonly client: grpc.Client;
  private closed = false;

  /** Throws UntrustedDaemonError, before any byte is sent, when the daemon does not run as this user. */
  constructor(readonly address: ServiceAddress) {
    verifyDaemonPeer(address.target);
    this.client = new LogdClient(address.target, grpc.credentials.createInsecure(), CHANNEL_OPTIONS);
  }

  metadata(): grpc.Metadata {
    const md = new grpc.Metadata();
    md.set(TOKEN_METADATA_KEY, this.address.token);
    return md;
  }

  unary<Req, Res>(method: string, req: Req, timeoutMs: number): Promise<Res> {
    const fn = (this.client as unknown as Record<string, Function>)[method];
    return new Promise((resolve, reject) => {
      fn.call(this.client, req, this.metadata(), { deadline: Date.now() + timeoutMs }, (err: grpc.ServiceError | null, res: Res) => {
        if (err) {
          const hint = err.code === grpc.status.DEADLINE_EXCEEDED ? ` (no answer within ${timeoutMs} ms; is the daemon at ${this.address.target} overloaded or stopped?)` : '';
          reject(new CallError(err.code, method, `${method}: ${err.details || err.message}${hint}`));
        } else resolve(res);
      });
    });
  }

  write(): grpc.ClientDuplexStream<unknown, unknown> {
    return (this.client as unknown as { write: (md: grpc.Metadata) => grpc.ClientDuplexStream<unknown, unknown> }).write(this.metadata());
  }

  readHistory(req: unknown): grpc.ClientReadableStream<unknown> {
    return (this.client as unknown as { readHistory: (r: unknown, md: grpc.Metadata) => grpc.ClientReadableStream<unknown> }).readHistory(req, this.metadata());
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.client.close();
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
