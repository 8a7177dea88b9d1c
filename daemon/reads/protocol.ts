// What the daemon's main thread (history.ts) and a read worker (read-worker.ts)
// say to each other. Apart from both: importing the worker's module runs it.
import type { HistoryView } from '../store/history-read.js';
import type { HistoryAsk } from './chunks.js';

export interface ReadJob { file: string; view: HistoryView; ask: HistoryAsk; control: SharedArrayBuffer }
/** The control words: [0] credits (chunks the main thread will take), [1] 1 once the read is cancelled. */
export const CREDITS = 0, CANCELLED = 1;

/** What the worker posts: a chunk (a HistoryChunk message's bytes, encode-chunk.ts), the end, or why it stopped. */
export type ReadMessage =
  | { chunk: Uint8Array }
  | { done: true; rows: number; damaged: Array<{ offset: number; bytes: number }> }
  | { error: string; tooMany: boolean };

