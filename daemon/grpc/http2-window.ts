// grpc-js gives a server no option for its HTTP/2 receive window, and the
// fixed 64 KB window caps a batched record stream at about 0.55 of a core per
// side (measured; see shared PERF-NOTES and bench/RESULTS.md). This raises
// the window for the daemon's own server: http2 servers created after this
// call advertise a larger per-stream window and grow each session's window.
//
// The windows are also what a paused stream (daemon/runs/backpressure.ts) may still
// hold in the daemon: up to STREAM_WINDOW_BYTES per stream and
// SESSION_WINDOW_BYTES per client connection, whatever the client sends.
import http2 from 'node:http2';

const STREAM_WINDOW_BYTES = 1024 * 1024;
const SESSION_WINDOW_BYTES = 4 * 1024 * 1024;
let patched = false;

export function raiseHttp2ReceiveWindow(): void {
  if (patched) return;
  patched = true;
  const original = http2.createServer;
  const patchedCreate = ((options: http2.ServerOptions, ...rest: unknown[]) => {
    const opts: http2.ServerOptions = { ...options, settings: { ...(options?.settings ?? {}), initialWindowSize: STREAM_WINDOW_BYTES } };
    const server = (original as (...a: unknown[]) => http2.Http2Server)(opts, ...rest);
    server.on('session', (session: http2.ServerHttp2Session) => {
      session.once('connect', () => {
        try {
          session.setLocalWindowSize(SESSION_WINDOW_BYTES);
        } catch {
          /* a session that closed at once */
        }
      });
      if (!session.connecting) {
        try {
          session.setLocalWindowSize(SESSION_WINDOW_BYTES);
        } catch {
          /* idem */
        }
      }
    });
    return server;
  }) as typeof http2.createServer;
  (http2 as { createServer: typeof http2.createServer }).createServer = patchedCreate;
}
