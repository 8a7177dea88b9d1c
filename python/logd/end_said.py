"""How the process ends, as FinishRunRequest tells the daemon (docs/story.md): the first uncaught exception's
type and message, and when. Set by the exit hook (exit_hooks.py) or a run's __exit__ (run.py)."""
import time


def exception_said(tp, value) -> dict:
    """An exception as FinishRunRequest carries it: its type (module-qualified unless a builtin), its message, when."""
    mod = getattr(tp, "__module__", "") or ""
    name = getattr(tp, "__qualname__", None) or getattr(tp, "__name__", "Exception")
    try:
        msg = str(value)
    except Exception:  # a __str__ that raises: the type alone
        msg = ""
    return {"exception_type": name if mod in ("builtins", "") else "%s.%s" % (mod, name),
            "exception_message": msg[:2000], "ended_at": time.time()}
