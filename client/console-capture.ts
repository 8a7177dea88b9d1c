// Console capture: the owner process's stdout and stderr pass through
// unchanged, and a copy goes into its run (RecordBatch.console_json) with the
// next batch. One capture per process at a time (the first run's), undone at
// that run's finish. The copy is bounded per flush interval; beyond the bound
// the bytes still reach the terminal, are counted, said once on stderr, and
// the cut is marked in the stored output. Writes made while the capture itself
// runs (its own warning) are never captured, so nothing can loop.

/** Console text one flush interval may carry, in characters (≈ 1 MiB of ASCII). */
export const CONSOLE_CHARS_PER_FLUSH = 1024 * 1024;
/** One entry's most characters: ≤ 48 KiB of UTF-8, under the daemon's 64 KiB per entry. */
const PIECE_CHARS = 16 * 1024;

export type ConsoleStream = 'out' | 'err';

/** Where captured output goes: the run's writer (client/writer.ts). */
export interface ConsoleSink {
  /** Characters already waiting in the open batch (reset when it is sealed). */
  readonly consoleChars: number;
  console(entryJson: string, chars: number): void;
}

let active: ConsoleCapture | null = null;

/** Starts capturing this process's console into `sink`; null when a capture is already on (another run has it). */
export function captureConsole(runId: string, sink: ConsoleSink, warn: (m: string) => void): ConsoleCapture | null {
  if (active) return null;
  active = new ConsoleCapture(runId, sink, warn);
  return active;
}

export class ConsoleCapture {
  private readonly pending: Record<ConsoleStream, string> = { out: '', err: '' };
  private readonly pendingAt: Record<ConsoleStream, number> = { out: 0, err: 0 };
  private readonly dropped: Record<ConsoleStream, number> = { out: 0, err: 0 };
  private warned = false;
  private busy = false;
  private stopped = false;
  private readonly unwrap: Array<() => void> = [];

  constructor(private readonly runId: string, private readonly sink: ConsoleSink, private readonly warn: (m: string) => void) {
    this.wrap(process.stdout, 'out');
    this.wrap(process.stderr, 'err');
  }

  /** Sends what is still held (a last line without its newline, a cut's mark) and gives the streams back. */
  stop(): void {
    if (this.stopped) return;
    this.busy = true;
    try {
      for (const s of ['out', 'err'] as const) {
        this.emit(s, this.pending[s], this.pendingAt[s]);
        this.pending[s] = '';
        this.markDrop(s);
      }
    } finally {
      this.busy = false;
      this.stopped = true;
      for (const u of this.unwrap) u();
      if (active === this) active = null;
    }
  }

  private wrap(stream: NodeJS.WriteStream, s: ConsoleStream): void {
    const original = stream.write;
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const capture = this;
    const wrapped = function (this: NodeJS.WriteStream, chunk: unknown, ...rest: unknown[]): boolean {
      if (!capture.stopped && !capture.busy) {
        capture.busy = true;
        try {
          capture.take(s, chunk, rest[0]);
        } catch {
          /* the copy never gets in the way of the write itself */
        } finally {
          capture.busy = false;
        }
      }
      return (original as (...a: unknown[]) => boolean).apply(this, [chunk, ...rest]);
    } as typeof stream.write;
    stream.write = wrapped;
    // Someone who wrapped the stream after us keeps their wrapper; ours then only passes through.
    this.unwrap.push(() => {
      if (stream.write === wrapped) stream.write = original;
    });
  }

  private take(s: ConsoleStream, chunk: unknown, encoding: unknown): void {
    const size = typeof chunk === 'string' ? chunk.length : chunk instanceof Uint8Array ? chunk.byteLength : 0;
    if (size === 0) return;
    if (this.sink.consoleChars + this.pending.out.length + this.pending.err.length + size > CONSOLE_CHARS_PER_FLUSH) {
      this.dropped[s] += typeof chunk === 'string' ? Buffer.byteLength(chunk) : size;
      if (!this.warned) {
        this.warned = true;
        this.warn(`logd: run ${this.runId}: console output beyond ${CONSOLE_CHARS_PER_FLUSH / 1048576} MiB per flush interval is not stored (it still reaches the terminal); each cut is marked in the stored output`);
      }
      return;
    }
    const text = typeof chunk === 'string'
      ? typeof encoding === 'string' && Buffer.isEncoding(encoding) && !/^utf-?8$/i.test(encoding) ? Buffer.from(chunk, encoding).toString('utf8') : chunk
      : Buffer.from((chunk as Uint8Array).buffer, (chunk as Uint8Array).byteOffset, size).toString('utf8');
    const now = Date.now() / 1000;
    if (this.dropped[s] > 0) {
      // What came before the cut goes out first, then the mark, then what follows.
      this.emit(s, this.pending[s], this.pendingAt[s]);
      this.pending[s] = '';
      this.markDrop(s);
    }
    if (this.pending[s] === '') this.pendingAt[s] = now;
    const all = this.pending[s] + text;
    const lastNewline = all.lastIndexOf('\n');
    // Whole lines go now; a line without its newline waits for it (or for the piece bound, or finish).
    let keep = lastNewline < 0 ? all : all.slice(lastNewline + 1);
    if (lastNewline >= 0) this.emit(s, all.slice(0, lastNewline + 1), this.pendingAt[s]);
    if (keep.length >= PIECE_CHARS) {
      const cut = keep.length - (keep.length % PIECE_CHARS);
      this.emit(s, keep.slice(0, cut), this.pendingAt[s]);
      keep = keep.slice(cut);
    }
    this.pending[s] = keep;
    if (lastNewline >= 0 || keep === '') this.pendingAt[s] = now;
  }

  /** Text as entries of at most PIECE_CHARS, cut after a newline where one is near. */
  private emit(s: ConsoleStream, text: string, t: number): void {
    for (let at = 0; at < text.length;) {
      let end = Math.min(text.length, at + PIECE_CHARS);
      if (end < text.length) {
        const nl = text.lastIndexOf('\n', end - 1);
        if (nl >= at + PIECE_CHARS / 2) end = nl + 1;
        else if (/[\uD800-\uDBFF]/.test(text[end - 1])) end--; // never split a surrogate pair
      }
      const l = text.slice(at, end);
      this.sink.console(`{"t":${t},"s":"${s}","l":${JSON.stringify(l)}}`, l.length); // t is finite, s a plain word
      at = end;
    }
  }

  private markDrop(s: ConsoleStream): void {
    const n = this.dropped[s];
    if (n === 0) return;
    this.dropped[s] = 0;
    const l = `[logd: ${n} bytes of std${s} not stored here: more than ${CONSOLE_CHARS_PER_FLUSH / 1048576} MiB of console output in one flush interval]\n`;
    this.sink.console(JSON.stringify({ t: Date.now() / 1000, s, l }), l.length);
  }
}
