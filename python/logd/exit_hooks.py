"""What happens when a process ends without finish(), as in the TypeScript client:
- a normal exit (atexit): every open run is finished, with the exit code of
  sys.exit() or 1 after an uncaught exception;
- SIGTERM / SIGHUP (when the program left them at their default): what is
  unsent goes to a spill file with exit code 128+signal, the daemon ingests it
  and finalises, and the process dies of the signal as it would have.
  Not in a worker process (a multiprocessing child, fork or spawn, or a process
  forked from one that imported logd): a Python-level handler runs only when
  the main thread next checks for signals, and a SIGTERM that lands just as the
  main thread enters a wait with no deadline is never handled. multiprocessing
  terminates its workers with SIGTERM and then joins them without a deadline:
  an idle pool worker blocked in its task queue's lock, with such a handler,
  never ends and the parent's `with Pool()` hangs (seen: 1 run in 20 under
  load). So a worker dies of SIGTERM at once, as it would without logd, and its
  rows are kept as after a SIGKILL: its crash journal (and its relay's, for a
  forked child) holds them, and the daemon finalises its run as crashed. A
  handler inherited over fork() is put back to the default in the child.
  The exception: a worker that holds a deferred run (no daemon could be used;
  its rows are only in memory) takes the handler when that run starts, since
  dying at once would lose them.

None of this waits on a lock or thread a forked child lacks: runs inherited
over fork() have no writer in the child (see run.py) and are skipped, and the
spill path takes locks with a timeout."""
import atexit
import os
import signal
import sys
import threading
import time

from .end_said import exception_said
from .run import live_runs

_installed = False
_import_pid = os.getpid()  # a process forked from this one is a worker: no signal handlers of logd's there
_exit_code = 0
# The first uncaught exception, as FinishRunRequest's fields (docs/story.md): the job's story names it.
_exception_said = None


def _record_exit_code(code) -> None:
    global _exit_code
    _exit_code = code


def install(deferred: bool = False) -> None:
    """The exit hooks, once per process; deferred: a run whose rows are only in memory starts here."""
    global _installed
    if deferred:
        _install_signals(worker_too=True)
    if _installed:
        return
    _installed = True
    atexit.register(_at_exit)

    prev_hook = sys.excepthook

    def excepthook(tp, value, tb):
        global _exception_said
        _record_exit_code(130 if issubclass(tp, KeyboardInterrupt) else 1)
        if _exception_said is None and not issubclass(tp, KeyboardInterrupt):
            try:
                _exception_said = exception_said(tp, value)
            except Exception:
                pass
        prev_hook(tp, value, tb)

    sys.excepthook = excepthook

    prev_exit = sys.exit

    def exit(code=None):  # noqa: A001 - the exit code is not visible to atexit otherwise
        _record_exit_code(code if isinstance(code, int) else (0 if code is None else 1))
        prev_exit(code)

    sys.exit = exit

    _install_signals(worker_too=False)


def _install_signals(worker_too: bool) -> None:
    if threading.current_thread() is threading.main_thread() and (worker_too or not _is_worker()):
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) == signal.SIG_DFL:
                signal.signal(sig, _on_signal)


def _is_worker() -> bool:
    """A process whose parent ends it with SIGTERM and waits without a deadline (see above)."""
    if os.getpid() != _import_pid:
        return True
    mp = sys.modules.get("multiprocessing.process")
    return mp is not None and getattr(mp, "parent_process", lambda: None)() is not None


def _after_fork_in_child() -> None:
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            if signal.getsignal(sig) is _on_signal:
                signal.signal(sig, signal.SIG_DFL)
        except (ValueError, OSError):  # not the main thread: cannot happen in a fresh child, but never raise here
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _at_exit() -> None:
    mine = [r for r in live_runs() if r._writer is not None and r._writer.pid == os.getpid()]
    said = _exception_said or {"ended_at": time.time()}
    for r in mine:
        try:
            if r._end_said is None:
                r._end_said = said
            r.finish(exit_code=_exit_code)
        except Exception as e:
            sys.stderr.write("logd: could not finish run %s at exit: %s\n" % (r.id, e))


def _on_signal(signum, frame) -> None:
    for r in live_runs():
        try:
            r.spill_for_exit(128 + signum)
        except Exception as e:
            # Nothing more can be done in a dying process but say what is lost.
            try:
                sys.stderr.write("logd: could not spill run %s at signal %d: %s\n" % (r.id, signum, e))
            except Exception:
                pass
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
