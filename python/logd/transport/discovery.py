"""Finding the daemon: LOGD_SERVICE first (inherited from the process that
started the job), then the service file of this data dir, then, when allowed,
starting a sidecar daemon (`logd serve --sidecar`: LOGD_BIN when set, else the
daemon that logd's wheel carries, else `logd` on PATH) and waiting for it with
a deadline. The answer is exported as LOGD_SERVICE so that spawned children
inherit it. A daemon of another logd version is used (said once on stderr);
one of another wire protocol refuses every call, naming both versions."""
import os
import time
from typing import Optional

from .._lazy import json
from .._version import __version__
from .connection import ServiceAddress
from ..paths import Paths, resolve_paths, tunables, proc_start_time
from .runtime_dir import private_runtime
from .trust import untrusted_dir_reason

EXIT_ALREADY_RUNNING = 3

try:  # the platform wheel's daemon and Node (packaging/wheel/_logd_bundled.py); absent from `pip install ./python`
    import _logd_bundled as bundled
except ImportError:
    bundled = None


class DaemonStartError(RuntimeError):
    """No daemon answers and none could be started. `transient`: a later look may succeed (no daemon yet,
    or another one is taking over); False when the start itself failed."""

    def __init__(self, message: str, transient: bool = False):
        super().__init__(message)
        self.transient = transient


def pid_alive(pid: int) -> bool:
    """True while pid runs; a zombie (dead, not reaped by its parent) counts as dead."""
    try:
        os.kill(pid, 0)
    except PermissionError:
        pass
    except OSError:
        return False
    try:
        with open("/proc/%d/stat" % pid, encoding="utf-8", errors="replace") as f:
            st = f.read()
        return st[st.rfind(")") + 2 : st.rfind(")") + 3] not in ("Z", "X")
    except FileNotFoundError:
        return not os.path.exists("/proc/self/stat")
    except OSError:
        return True


def _same_process(pid: int, proc_start) -> bool:
    """The service file's procStart (the daemon's start time, paths.proc_start_time) still matches: a pid alone can
    name another process once the daemon died and the pid came round again. True when the file has none."""
    if not isinstance(proc_start, int):
        return True
    now = proc_start_time(pid)
    return now == proc_start if now is not None else not os.path.exists("/proc/self/stat")


def _read_service(service_file: str) -> Optional[dict]:
    """A service file whose daemon still runs (pid and start time); None otherwise."""
    try:
        with open(service_file, encoding="utf-8") as f:
            s = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(s, dict) or not isinstance(s.get("pid"), int) or not isinstance(s.get("token"), str) or not isinstance(s.get("socket"), str):
        return None
    if not pid_alive(s["pid"]) or not _same_process(s["pid"], s.get("procStart")):
        return None
    return s


def _from_owner_file(paths: Paths, looked: str) -> Optional[dict]:
    """The service file of the daemon that holds the data dir's lock, from the owner file it wrote as it took it, when
    it serves from a runtime dir other than `looked` (already looked at). Only a runtime dir private to this user is
    read, and only a service file of the very daemon that owns the lock, for this data dir (client/discovery.ts)."""
    owner = _live_owner(paths)
    if owner is None or os.path.abspath(owner["runtimeDir"]) == os.path.abspath(looked):
        return None
    d = owner["runtimeDir"]
    if not os.path.isdir(d) or untrusted_dir_reason(d) is not None:
        return None
    s = _read_service(os.path.join(d, "service.json"))
    if s is None or s["pid"] != owner["pid"] or not isinstance(s.get("dataDir"), str):
        return None
    return s if os.path.abspath(s["dataDir"]) == os.path.abspath(paths.data_dir) else None


def from_service_file(paths: Paths) -> Optional[ServiceAddress]:
    """The daemon that serves this data dir: the one named by the service file in the runtime dir private_runtime()
    picks (the fallback when another user took the default), else the one the data dir's owner file names, wherever
    it serves from (a daemon started while another user squatted the default runtime dir, or by a process with
    another XDG_RUNTIME_DIR or LOGD_RUNTIME_DIR, still holds the data dir). Raises UntrustedDirError when no runtime
    dir is private to the user."""
    rt = private_runtime(paths, False)
    s = _read_service(rt.service_file) or _from_owner_file(paths, rt.runtime_dir)
    if s is None:
        return None
    _say_other_version(s, paths)
    return ServiceAddress(s["socket"], s["token"])


_said_version = False


def _say_other_version(s: dict, paths: Paths) -> None:
    """One stderr line per process when the daemon found is another logd version than this client: never a silent mix."""
    global _said_version
    version = s.get("version")
    if _said_version or not isinstance(version, str) or version == __version__:
        return
    _said_version = True
    import sys

    sys.stderr.write(
        "logd: the daemon of %s (pid %d) is logd %s and this client is logd %s; using it while they speak the same wire "
        "protocol (it refuses this client otherwise). For this version's daemon: `logd stop`, and the next init() starts it\n"
        % (paths.data_dir, s["pid"], version, __version__)
    )


def find_daemon(ignore_env: bool = False, auto_start: Optional[bool] = None) -> ServiceAddress:
    t = tunables()
    if t.service and not ignore_env:
        return ServiceAddress.parse(t.service)
    paths = resolve_paths()
    addr = from_service_file(paths)
    if addr is None:
        if not (t.auto_start if auto_start is None else auto_start):
            raise DaemonStartError(
                "no logd daemon is running for %s; start one with `logd serve` (or unset LOGD_NO_AUTOSTART)" % paths.data_dir,
                transient=True,
            )
        addr = start_sidecar(paths, t.start_timeout_s)
    os.environ["LOGD_SERVICE"] = addr.format()
    return addr


def daemon_command() -> list:
    """The command that runs the daemon: LOGD_BIN (a path, or a command line); else the daemon bundled in logd's wheel,
    run by the wheel's own Node (its version is this package's); else `logd` on PATH."""
    import shlex  # on first use: `import logd` does not pay for them
    import shutil
    raw = os.environ.get("LOGD_BIN", "")
    if raw:
        argv = [raw] if os.path.exists(raw) else shlex.split(raw)
        if argv and (os.path.exists(argv[0]) or shutil.which(argv[0])):
            return argv
        raise DaemonStartError("LOGD_BIN=%r does not name a program; point it at the `logd` executable" % raw)
    if bundled is not None:
        try:
            return bundled.command()
        except bundled.BundleError as e:
            raise DaemonStartError(str(e)) from None
    found = shutil.which("logd")
    if found:
        return [found]
    raise DaemonStartError(
        "no logd daemon is running and the `logd` program was not found to start one: install logd's wheel "
        "(pip install logd-<version>-py3-none-manylinux_*.whl, which carries the daemon), or the npm package "
        "(npm install -g ./logd-<version>.tgz, Node >= 20) so that `logd` is on PATH, set LOGD_BIN to its path, or start one with `logd serve`"
    )


def _tail(file: str, size: int = 2000) -> str:
    try:
        with open(file, encoding="utf-8", errors="replace") as f:
            return f.read()[-size:].strip()
    except OSError:
        return "(no daemon log)"


class _Spawned:
    """A sidecar this process started: its child, the paths it was given, where its log stood before it."""

    def __init__(self, child, paths: Paths, log_start: int):
        self.child = child
        self.paths = paths
        self.log_start = log_start


_prestarted: Optional[_Spawned] = None


def _spawn(paths: Paths) -> _Spawned:
    """Starts a detached daemon (its own session) for `paths` (a private runtime dir already chosen)."""
    import subprocess  # on first use: `import logd` does not pay for it
    argv = daemon_command()
    env = dict(os.environ, LOGD_DIR=paths.data_dir, LOGD_RUNTIME_DIR=paths.runtime_dir)
    env.pop("LOGD_SERVICE", None)
    log_fd = os.open(paths.daemon_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    log_start = os.fstat(log_fd).st_size
    try:
        child = subprocess.Popen(
            argv + ["serve", "--sidecar"], stdin=subprocess.DEVNULL, stdout=log_fd, stderr=log_fd,
            env=env, start_new_session=True, close_fds=True,
        )
    except OSError as e:
        raise DaemonStartError("could not start the logd daemon (%s): %s" % (" ".join(argv), e)) from None
    finally:
        os.close(log_fd)
    return _Spawned(child, paths, log_start)


def prestart() -> bool:
    """init() calls this before it builds its request. When no daemon serves this data dir and init would start
    one, the sidecar is spawned now, so that its start (Node, its modules, the store: ~100 ms) runs while this
    process imports what the create needs (protobuf, then grpc: 40-80 ms); start_sidecar then waits for that
    child instead of spawning one. Anything unexpected here is left to find_daemon, which reports it. True when it
    started one (init then has time to spare until it is up)."""
    global _prestarted
    if _prestarted is not None:
        return False
    try:
        t = tunables()
        if t.service or not t.auto_start:
            return False
        paths = resolve_paths()
        if from_service_file(paths) is not None:
            return False
        _prestarted = _spawn(private_runtime(paths, True))
        return True
    except Exception:  # noqa: BLE001 - find_daemon says what is wrong, in its words
        return False


def _warm_imports() -> None:
    """What the first call needs and `import logd` left out (_lazy.py), imported while the sidecar starts."""
    try:
        import grpc  # noqa: F401
        from .._pb import logd_pb2  # noqa: F401
    except Exception:  # noqa: BLE001 - the call that needs them reports it
        pass


def start_sidecar(paths: Paths, timeout_s: float) -> ServiceAddress:
    """Starts a detached daemon (its own session), or takes the one prestart() started, and waits for its service
    file."""
    global _prestarted
    # The sidecar gets the runtime dir chosen here (LOGD_RUNTIME_DIR), so it never chooses another.
    paths = private_runtime(paths, True)
    pre, _prestarted = _prestarted, None
    if pre is not None and (pre.paths.data_dir, pre.paths.runtime_dir) == (paths.data_dir, paths.runtime_dir):
        spawned = pre
    else:
        spawned = _spawn(paths)
    child, log_start = spawned.child, spawned.log_start
    _warm_imports()
    started = time.monotonic()
    deadline = started + timeout_s

    def new_log() -> str:
        try:
            with open(paths.daemon_log, "rb") as f:
                f.seek(log_start)
                return f.read().decode("utf-8", "replace").strip()
        except OSError:
            return ""

    while time.monotonic() < deadline:
        addr = from_service_file(paths)
        if addr is not None and (not addr.target.startswith("unix:") or os.path.exists(addr.target[len("unix:"):])):
            return addr
        code = child.poll()
        if code is not None and code != EXIT_ALREADY_RUNNING:
            raise DaemonStartError(
                "the logd daemon exited with code %d while starting:\n%s\n(full log: %s)" % (code, new_log() or _tail(paths.daemon_log), paths.daemon_log)
            )
        if code == EXIT_ALREADY_RUNNING:
            # Lost the start race. The winner named itself in the data dir's owner file as it took the lock: while it
            # lives it is starting (seconds on a loaded node), here or in another private runtime dir (from_service_file
            # finds it there), so wait for it rather than start another. One whose runtime dir this user cannot trust,
            # or none known after 2 s: say so.
            owner = _live_owner(paths)
            elsewhere = owner is not None and owner.get("runtimeDir") != paths.runtime_dir and untrusted_dir_reason(owner["runtimeDir"]) is not None
            if elsewhere or (owner is None and time.monotonic() - started > 2):
                where = " (from the runtime dir %s; give this process LOGD_RUNTIME_DIR=%s)" % (owner["runtimeDir"], owner["runtimeDir"]) if elsewhere else ""
                raise DaemonStartError("%s%s\n(full log: %s)" % (new_log() or "another logd daemon serves this data dir", where, paths.daemon_log), transient=True)
        # Every 3 ms for the first second (a cold start is done in 100-200 ms: the process waits for it), then 20.
        time.sleep(0.003 if time.monotonic() - started < 1.0 else 0.02)
    # Transient when the winner of the start race still lives: it is slow to start, and a later look may find it.
    raise DaemonStartError(
        "the logd daemon did not come up within %d ms (raise LOGD_START_TIMEOUT_MS, or start it with `logd serve`); its log says:\n%s"
        % (timeout_s * 1000, _tail(paths.daemon_log)),
        transient=child.poll() == EXIT_ALREADY_RUNNING and _live_owner(paths) is not None,
    )


def _live_owner(paths: Paths) -> Optional[dict]:
    """The data dir's owner file (daemon.json, written by the daemon as it takes the data dir's lock) when the daemon it
    names still runs; None otherwise."""
    try:
        with open(os.path.join(paths.data_dir, "daemon.json"), encoding="utf-8") as f:
            o = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(o, dict) or not isinstance(o.get("pid"), int) or not isinstance(o.get("runtimeDir"), str):
        return None
    return o if pid_alive(o["pid"]) and _same_process(o["pid"], o.get("procStart")) else None
