// How one rank's process ended, as exactly as logd knows it: recorded by the
// daemon when it finalises a run (daemon/runs/finaliser.ts), stored with the
// run's final state and in its metadata (`metadata.end`), so the local store,
// the shared store, the CLI and the dashboard read the same record.
// docs/story.md is the contract.

/** A process's end, as the daemon saw it or the client said. */
export interface RunEnd {
  /** When the process ended (seconds since the epoch), as close as logd knows. */
  at: number;
  /** How late `at` may be: the daemon's exit watch interval when it found the process gone; 0 when the client said. */
  atWithinS: number;
  pid: number;
  host: string;
  rank: number | null;
  /** The exit code when the process exited (0..255), null when a signal ended it or it is not known. */
  exitCode: number | null;
  /** The signal that ended it, by name (`SIGKILL`), null when it exited or it is not known. */
  signal: string | null;
  /** The kernel wrote a core dump. */
  coreDumped?: boolean;
  /** Set when the OOM killer killed it: where that is seen (`the memory cgroup /x (oom_kill 0 -> 1)`, `the kernel's oom_kill count`). */
  oom?: string;
  /** The first uncaught exception, as the client's exit hook saw it (type and message, the message cut at 2 000 characters). */
  exception?: { type: string; message: string };
  /** The last step the run logged and when (seconds since the epoch); -1 / 0 before any. */
  lastStep: number;
  lastStepAt: number;
  /** The last console lines captured (stdout and stderr, oldest first, at most END_LINES, each cut at END_LINE_CHARS). */
  lastLines: string[];
  /**
   * Where the record comes from: `client` (finish() or the client's exit hook), `wait-status` (the exit status the
   * kernel kept for the exited process, read from /proc before its parent collected it), `signal-handler` (the
   * client's handler of SIGTERM/SIGHUP), `parent` (its parent, `logd launch`, said: ReportExit), `gone` (the process was gone and its exit status already collected),
   * `lost-contact`, `daemon`.
   */
  source: 'client' | 'wait-status' | 'parent' | 'signal-handler' | 'gone' | 'lost-contact' | 'daemon';
}

export const END_LINES = 20;
export const END_LINE_CHARS = 300;
export const END_EXCEPTION_CHARS = 2000;

/** Linux's signal numbers (x86-64 and arm64 agree on these). */
const SIGNAL_NAMES: Record<number, string> = {
  1: 'SIGHUP', 2: 'SIGINT', 3: 'SIGQUIT', 4: 'SIGILL', 5: 'SIGTRAP', 6: 'SIGABRT', 7: 'SIGBUS', 8: 'SIGFPE', 9: 'SIGKILL',
  10: 'SIGUSR1', 11: 'SIGSEGV', 12: 'SIGUSR2', 13: 'SIGPIPE', 14: 'SIGALRM', 15: 'SIGTERM', 16: 'SIGSTKFLT', 17: 'SIGCHLD',
  18: 'SIGCONT', 19: 'SIGSTOP', 20: 'SIGTSTP', 21: 'SIGTTIN', 22: 'SIGTTOU', 23: 'SIGURG', 24: 'SIGXCPU', 25: 'SIGXFSZ',
  26: 'SIGVTALRM', 27: 'SIGPROF', 28: 'SIGWINCH', 29: 'SIGIO', 30: 'SIGPWR', 31: 'SIGSYS',
};

export function signalName(n: number): string {
  return SIGNAL_NAMES[n] ?? (n >= 34 && n <= 64 ? `SIGRTMIN+${n - 34}` : `signal ${n}`);
}

/**
 * A wait status as the kernel keeps it for an exited process (/proc/PID/stat's exit_code, what waitpid(2)
 * returns): the low 7 bits the signal, bit 7 the core dump, bits 8..15 the exit code.
 */
export function decodeWaitStatus(status: number): { exitCode: number | null; signal: string | null; coreDumped: boolean } {
  const sig = status & 0x7f;
  if (sig === 0) return { exitCode: (status >> 8) & 0xff, signal: null, coreDumped: false };
  return { exitCode: null, signal: signalName(sig), coreDumped: (status & 0x80) !== 0 };
}

/** What a signal usually means, for a sentence. */
const SIGNAL_WORDS: Record<string, string> = {
  SIGSEGV: 'a segmentation fault', SIGBUS: 'a bus error', SIGILL: 'an illegal instruction', SIGFPE: 'an arithmetic error',
  SIGABRT: 'an abort', SIGKILL: 'SIGKILL', SIGTERM: 'SIGTERM',
};

/** How a process ended, in plain English: "was killed by SIGKILL", "exited with code 1 after ValueError: boom". */
export function describeEnd(e: RunEnd): string {
  if (e.oom) return `was killed by the OOM killer (SIGKILL; ${e.oom})`;
  if (e.signal) {
    const word = SIGNAL_WORDS[e.signal];
    const died = e.signal === 'SIGKILL' || e.signal === 'SIGTERM' || e.signal === 'SIGINT' || e.signal === 'SIGHUP' || !word
      ? `was killed by ${e.signal}` : `died of ${word} (${e.signal})`;
    return `${died}${e.coreDumped ? ', core dumped' : ''}`;
  }
  if (e.exception) return `raised ${e.exception.type}: ${firstLine(e.exception.message)}${e.exitCode !== null ? ` (exit code ${e.exitCode})` : ''}`;
  if (e.exitCode !== null) return e.exitCode === 0 ? 'exited with code 0' : `exited with code ${e.exitCode}`;
  if (e.source === 'lost-contact') return 'went silent (lost contact)';
  return 'ended; how is not known (its parent collected its exit status before logd looked)';
}

export function firstLine(s: string, max = 200): string {
  const l = s.split('\n').find((x) => x.trim()) ?? '';
  return l.length > max ? `${l.slice(0, max - 1)}…` : l;
}

/** A run's end record from its metadata JSON, or null. */
export function endOf(metadataJson: string): RunEnd | null {
  try {
    const m = JSON.parse(metadataJson || '{}') as { end?: RunEnd };
    return m.end && typeof m.end === 'object' && typeof m.end.at === 'number' ? m.end : null;
  } catch {
    return null;
  }
}
