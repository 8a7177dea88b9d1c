"""What happens when a process ends without finish(), as in the TypeScript client:
- a normal exit (atexit): every open run is finished, with the exit code of
  sys.exit() or 1 after an uncaught exception;
- SIGTERM / SIGHUP (when the program left them at their default): what is
  unsent goes to a spill file with exit code 128+signal, the daemon ingests it
  and finalises, and the process dies of the signal as it would have.

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
_exit_code = 0
# The first uncaught exception, as FinishRunRequest's fields (docs/story.md): the job's story names it.
_exception_said = None


def _record_exit_code(code) -> None:
    global _exit_code
    _exit_code = code


def install() -> None:
    global _installed
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

    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) == signal.SIG_DFL:
                signal.signal(sig, _on_signal)


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
