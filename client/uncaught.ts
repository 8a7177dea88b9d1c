// The process's first uncaught exception (or unhandled rejection), kept for
// the spill that ends its runs at exit: the daemon's end record names it
// (docs/story.md), as the Python client's exit hook does.
let first: { type: string; message: string; at: number } | null = null;
let watching = false;

export function watchUncaught(): void {
  if (watching) return;
  watching = true;
  // A monitor: it sees the error without handling it, so the process still dies as it would have.
  process.on('uncaughtExceptionMonitor', (err: unknown) => {
    if (first) return;
    const e = err instanceof Error ? err : new Error(String(err));
    first = { type: (e.constructor?.name && e.constructor.name !== 'Object' ? e.constructor.name : e.name) || 'Error', message: String(e.message ?? '').slice(0, 2000), at: Date.now() / 1000 };
  });
}

export function uncaughtException(): { type: string; message: string; at: number } | null {
  return first;
}
