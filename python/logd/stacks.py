"""Stacks on a stall (docs/health.md): at init() this process registers Python's faulthandler on SIGUSR2 so that
its node's daemon, when the process's group stalls, can ask what every thread is doing. The dump goes to
<data dir>/stacks/<pid>.<start ticks>.stacks (the daemon makes that dir; without it, no registration), whose
first line is the registration the daemon checks (pid, start time, signal) before it signals: a reused pid is
never signalled.

Opt out with LOGD_STACKS=0. A program that handles SIGUSR2 itself is left alone (no registration, no file)."""
import atexit
import faulthandler
import os
import signal

_registered = {}  # pid -> the open file faulthandler writes to (it must stay open)


def _start_ticks():
    with open("/proc/self/stat", "rb") as f:
        stat = f.read()
    return int(stat[stat.rindex(b")") + 2:].split()[19])


def stacks_dir(spool_dir: str) -> str:
    return os.path.join(os.path.dirname(spool_dir.rstrip("/")), "stacks")


def register(spool_dir: str) -> bool:
    """Registers this process once (per pid: a forked child registers its own). Never raises."""
    pid = os.getpid()
    if pid in _registered or os.environ.get("LOGD_STACKS", "1") in ("0", "false", "no", "off"):
        return pid in _registered
    try:
        if signal.getsignal(signal.SIGUSR2) not in (signal.SIG_DFL, None):
            return False  # the program uses SIGUSR2 itself
        directory = stacks_dir(spool_dir)
        if not os.path.isdir(directory):
            return False  # a daemon that does not ask for stacks
        start = _start_ticks()
        path = os.path.join(directory, "%d.%d.stacks" % (pid, start))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        f = os.fdopen(fd, "w")
        f.write("logd-stacks 1 pid=%d start=%d signal=SIGUSR2 kind=python\n" % (pid, start))
        f.flush()
        faulthandler.register(signal.SIGUSR2, file=f, all_threads=True, chain=False)
        _registered[pid] = (f, path)
        atexit.register(unregister)
        return True
    except (OSError, ValueError, RuntimeError, AttributeError):
        return False


def unregister() -> None:
    """At exit: the registration and its file go (the daemon also sweeps files of processes that are gone)."""
    entry = _registered.pop(os.getpid(), None)
    if entry is None:
        return
    f, path = entry
    try:
        faulthandler.unregister(signal.SIGUSR2)
    except (ValueError, RuntimeError):
        pass
    try:
        f.close()
        os.unlink(path)
    except OSError:
        pass
