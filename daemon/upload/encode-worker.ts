// The encoder's thread: encodes slices on request and hands the COPY data
// and the images' bytes back without copying them again (the buffers are transferred).
import { parentPort } from 'node:worker_threads';
import { encodeSlice, encodeSystem, type EncodeRequest, type SystemRequest } from './encode.js';

/** Its own ArrayBuffer (a Buffer may be a view of a larger one), so it can be transferred. */
function own(b: Uint8Array | null): Uint8Array | null {
  if (!b) return null;
  return b.byteOffset === 0 && b.byteLength === b.buffer.byteLength ? b : new Uint8Array(b);
}

parentPort!.on('message', (msg: { id: number; req?: EncodeRequest; system?: SystemRequest }) => {
  try {
    const e = msg.system ? encodeSystem(msg.system) : encodeSlice(msg.req!);
    const images = e.images.map((i) => ({ ...i, data: own(i.data)! }));
    const out = { ...e, keys: own(e.keys), chunkRows: own(e.chunkRows), values: own(e.values), console: own(e.console), media: own(e.media), images };
    const transfer = [out.keys, out.chunkRows, out.values, out.console, out.media, ...images.map((i) => i.data)]
      .filter((b): b is Uint8Array => b !== null).map((b) => b.buffer as ArrayBuffer);
    parentPort!.postMessage({ id: msg.id, slice: out }, transfer);
  } catch (e) {
    parentPort!.postMessage({ id: msg.id, error: (e as Error).message });
  }
});
