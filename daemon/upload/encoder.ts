// Runs encodeSlice on a worker thread, so that reading and encoding a 32 MiB
// slice never holds up the daemon's main thread, which serves the trainers.
// Where a worker cannot be had (or dies), slices are encoded in-thread: slower
// for ingest, never wrong.
import { Worker } from 'node:worker_threads';
import { encodeSlice, encodeSystem, type EncodeRequest, type EncodedSlice, type SystemRequest } from './encode.js';

export class SliceEncoder {
  private worker: Worker | null = null;
  private failed = false;
  private nextId = 1;
  private waiting = new Map<number, { resolve: (s: EncodedSlice) => void; reject: (e: Error) => void }>();

  constructor(private useThread: boolean, private log: (line: string) => void = () => {}) {}

  private start(): Worker | null {
    if (!this.useThread || this.failed) return null;
    if (this.worker) return this.worker;
    try {
      const w = new Worker(new URL('./encode-worker.js', import.meta.url));
      w.unref();
      w.on('message', (m: { id: number; slice?: EncodedSlice; error?: string }) => {
        const p = this.waiting.get(m.id);
        if (!p) return;
        this.waiting.delete(m.id);
        if (m.error !== undefined) p.reject(new Error(m.error));
        else p.resolve(m.slice!);
      });
      const lost = (why: string) => {
        if (this.worker !== w) return;
        this.worker = null;
        this.failed = true;
        this.log(`upload: the encoder thread stopped (${why}); encoding on the main thread from now on`);
        for (const p of this.waiting.values()) p.reject(new Error(`the encoder thread stopped (${why})`));
        this.waiting.clear();
      };
      w.on('error', (e) => lost(e.message));
      w.on('exit', (code) => lost(`exit code ${code}`));
      this.worker = w;
      return w;
    } catch (e) {
      this.failed = true;
      this.log(`upload: no encoder thread (${(e as Error).message}); encoding on the main thread`);
      return null;
    }
  }

  encode(req: EncodeRequest): Promise<EncodedSlice> {
    return this.run({ req }, () => encodeSlice(req));
  }

  /** A run's system metrics (a scan of the node's whole system log: worth keeping off the main thread too). */
  encodeSystem(system: SystemRequest): Promise<EncodedSlice> {
    return this.run({ system }, () => encodeSystem(system));
  }

  private run(msg: { req?: EncodeRequest; system?: SystemRequest }, inThread: () => EncodedSlice): Promise<EncodedSlice> {
    const w = this.start();
    if (!w) return Promise.resolve().then(inThread);
    return new Promise((resolve, reject) => {
      const id = this.nextId++;
      this.waiting.set(id, { resolve, reject });
      w.postMessage({ id, ...msg });
    });
  }

  async close(): Promise<void> {
    const w = this.worker;
    this.worker = null;
    if (w) await w.terminate().catch(() => {});
  }
}
