"""Where logd keeps things, and the client tunables: the same rules as the
daemon's src/config.ts, so that a Python process and the daemon agree on the
runtime dir (socket, service file) and the spool dir (spill files)."""
import os
import socket
from typing import NamedTuple, Optional

from ._ids import sha256


class Paths(NamedTuple):
    data_dir: str
    runtime_dir: str
    socket_path: str
    service_file: str
    daemon_log: str
    spool_dir: str
    # The per-user directory above a default runtime dir (<tmp or XDG_RUNTIME_DIR>/logd-<uid>), checked as private
    # too; None when LOGD_RUNTIME_DIR names the runtime dir.
    runtime_parent: Optional[str] = None
    # Where the runtime dir goes instead when another user holds the default one (runtime_dir.py): under the
    # user's own state dir, one per host; None when LOGD_RUNTIME_DIR names the runtime dir.
    runtime_fallback: Optional[str] = None


def resolve_paths(env=None) -> Paths:
    env = os.environ if env is None else env
    home = os.path.expanduser("~")
    data_home = env.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share")
    data_dir = os.path.abspath(env.get("LOGD_DIR") or os.path.join(data_home, "logd"))
    uid = os.getuid() if hasattr(os, "getuid") else 0
    key = sha256(data_dir.encode()).hexdigest()[:12]
    xdg = env.get("XDG_RUNTIME_DIR")
    # Node's os.tmpdir(): TMPDIR without a trailing slash, else /tmp.
    tmp = (env.get("TMPDIR") or env.get("TMP") or env.get("TEMP") or "/tmp").rstrip("/") or "/"
    base = xdg if xdg and len(xdg) < 60 else tmp
    runtime_parent = None if env.get("LOGD_RUNTIME_DIR") else os.path.abspath(os.path.join(base, "logd-%d" % uid))
    runtime_dir = os.path.abspath(env.get("LOGD_RUNTIME_DIR") or os.path.join(runtime_parent, key))
    return Paths(
        data_dir=data_dir,
        runtime_dir=runtime_dir,
        spool_dir=os.path.join(data_dir, "spool"),
        runtime_parent=runtime_parent,
        runtime_fallback=None if env.get("LOGD_RUNTIME_DIR") else _fallback_runtime_dir(env, home, key),
        **runtime_files(runtime_dir),
    )


def runtime_files(runtime_dir: str) -> dict:
    """What lives in a runtime dir."""
    return dict(
        socket_path=os.path.join(runtime_dir, "logd.sock"),
        service_file=os.path.join(runtime_dir, "service.json"),
        daemon_log=os.path.join(runtime_dir, "daemon.log"),
    )


def _fallback_runtime_dir(env, home: str, key: str) -> str:
    """$XDG_STATE_HOME/logd/run-<host>/<key> (else ~/.local/state/...), as src/config.ts computes it: no other user
    can create it, and every process of this user on this host finds the same one. The host becomes a hash when the
    socket path would pass the 107 bytes a Unix socket allows."""
    state = env.get("XDG_STATE_HOME") or ""
    state_home = state if os.path.isabs(state) else os.path.join(home, ".local", "state")
    host = socket.gethostname()
    d = os.path.abspath(os.path.join(state_home, "logd", "run-" + host, key))
    if len(os.path.join(d, "logd.sock").encode()) <= 107:
        return d
    return os.path.abspath(os.path.join(state_home, "logd", "run-" + sha256(host.encode()).hexdigest()[:12], key))


def _env_number(name: str, default: float) -> float:
    raw = os.environ.get(name, "")
    if raw == "":
        return default
    try:
        n = float(raw)
    except ValueError:
        n = -1.0
    if not (n >= 0 and n != float("inf")):
        raise ValueError("config: %s=%r is not a non-negative number; unset it or set e.g. %s=%g" % (name, raw, name, default))
    return n


class Tunables(NamedTuple):
    service: Optional[str]
    mode: Optional[str]
    flush_interval_s: float
    max_buffer_bytes: int
    start_timeout_s: float
    call_timeout_s: float
    auto_start: bool
    journal_mb: float  # the crash journal's size (journal.py); 0: no journal
    keepalive_s: float = 15.0  # keepalive.py: how often a process with open runs tells its daemons it lives
    console: bool = True  # LOGD_CONSOLE=0: no init() captures stdout/stderr (console.py)
    device_values_async: bool = True  # LOGD_DEVICE_VALUES=sync: a CUDA value is read in log() (device_values.py)


def tunables() -> Tunables:
    mode = os.environ.get("LOGD_MODE") or None
    if mode not in (None, "online", "offline", "disabled"):
        raise ValueError("config: LOGD_MODE=%r must be online, offline or disabled" % mode)
    return Tunables(
        service=os.environ.get("LOGD_SERVICE") or None,
        mode=mode,
        flush_interval_s=_env_number("LOGD_FLUSH_INTERVAL_MS", 200) / 1000,
        max_buffer_bytes=int(_env_number("LOGD_MAX_BUFFER_MB", 64) * 1024 * 1024),
        start_timeout_s=_env_number("LOGD_START_TIMEOUT_MS", 10_000) / 1000,
        call_timeout_s=_env_number("LOGD_CALL_TIMEOUT_MS", 10_000) / 1000,
        auto_start=os.environ.get("LOGD_NO_AUTOSTART") != "1",
        journal_mb=_journal_mb(),
        keepalive_s=_env_number("LOGD_KEEPALIVE_MS", 15_000) / 1000,
        console=os.environ.get("LOGD_CONSOLE") != "0",
        device_values_async=_device_values(),
    )


def _device_values() -> bool:
    mode = os.environ.get("LOGD_DEVICE_VALUES") or "async"
    if mode not in ("async", "sync"):
        raise ValueError("config: LOGD_DEVICE_VALUES=%r must be async (the default) or sync" % mode)
    return mode == "async"


def _journal_mb() -> float:
    mb = _env_number("LOGD_JOURNAL_MB", 64)
    if mb > 1024:  # the daemon refuses a journal over 1 GiB: better said here than found after a crash
        raise ValueError("config: LOGD_JOURNAL_MB=%g is more than 1024 (the daemon reads journals of up to 1 GiB); "
                         "set at most 1024, or 0 for no crash journal" % mb)
    return mb


def proc_start_time(pid: int) -> Optional[int]:
    """Field 22 of /proc/PID/stat (clock ticks since boot): with the pid it tells a process from a later one that got
    the same pid (pid_max is often 32768). None when the process is gone or there is no /proc."""
    try:
        with open("/proc/%d/stat" % pid, encoding="utf-8", errors="replace") as f:
            stat = f.read()
        return int(stat[stat.rindex(")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None
