"""The code and environment a trainer runs (docs/api.md "Code and environment").

The command line, the working directory, Python, and the versions of torch, CUDA, cuDNN and NCCL when the program
has imported torch (this module never imports it), gathered in a background thread after init() and sent once with
SetEnvironment; the daemon keeps it on the run's writer and cuts secrets out of the command line. The git facts of
the working directory (commit, branch, dirty flag, remote) are read by the daemon (daemon/code), once per directory
for every run started there within a few seconds: the trainer runs no git. Off with init(save_code=False) or
LOGD_SAVE_CODE=0.

With it, in the same thread: the installed distributions (`pip freeze`-like, `name==version`; LOGD_SAVE_PACKAGES=0
leaves them out), which the run keeps as its `logd/packages` text item; LOGD_SAVE_DIFF=0 asks the daemon not to
keep a dirty tree's diff (`logd/code.diff`).
"""
import os
import sys
import threading

from ._version import __version__


def _torch():
    """The versions of torch and what it was built with, when the program has imported it."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    out = {"version": getattr(torch, "__version__", None)}
    try:
        out["cuda"] = torch.version.cuda
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        if cudnn:
            out["cudnn"] = cudnn
        if torch.cuda.is_available():
            nccl = torch.cuda.nccl.version()
            out["nccl"] = ".".join(str(x) for x in nccl) if isinstance(nccl, tuple) else nccl
            out["gpus"] = torch.cuda.device_count()
    except Exception:  # noqa: BLE001 - a torch without CUDA parts: what is known is kept
        pass
    return out


_MAX_PACKAGES = 5000


def _packages():
    """`name==version` of every distribution on sys.path (what `pip freeze` lists), sorted; the first found of a
    name wins, as for imports. Read from the `NAME-VERSION.dist-info` / `.egg-info` entries' names alone (a few
    directory listings, about a millisecond), not from each one's METADATA (importlib.metadata: 90 ms for 66)."""
    seen = {}
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for n in names:
            if n.endswith(".dist-info"):
                stem = n[: -len(".dist-info")]
            elif n.endswith(".egg-info"):
                stem = n[: -len(".egg-info")]
                stem = stem.split("-py", 1)[0] if "-py" in stem else stem
            else:
                continue
            name, sep, version = stem.partition("-")
            if not sep or not name or not version:
                continue
            key = name.lower().replace("_", "-").replace(".", "-")
            if key not in seen:
                seen[key] = ("%s==%s" % (name.replace("_", "-"), version))[:200]
    return sorted(seen.values(), key=str.lower)[:_MAX_PACKAGES]


def gather():
    import platform

    cwd = os.getcwd()
    env = {
        "command": [a if len(a) <= 500 else a[:499] + "…" for a in [sys.executable] + list(sys.argv)][:100],
        "cwd": cwd,
        "runtime": "python %s" % platform.python_version(),
        "platform": "%s %s %s" % (platform.system().lower(), platform.release(), platform.machine()),
        "logd": __version__,
        "client": "python",
    }
    t = _torch()
    if t:
        env["torch"] = t
    np = sys.modules.get("numpy")
    if np is not None:
        env["numpy"] = getattr(np, "__version__", None)
    if os.environ.get("LOGD_SAVE_PACKAGES") != "0":
        pk = _packages()
        if pk is not None:
            env["packages"] = pk
    if os.environ.get("LOGD_SAVE_DIFF") == "0":
        env["saveDiff"] = False
    return env


_gathered = {}
_gather_lock = threading.Lock()


def gather_once():
    """gather(), once per process and working directory."""
    key = (os.getpid(), os.getcwd())
    with _gather_lock:
        if key not in _gathered:
            _gathered[key] = gather()
        return _gathered[key]


def send_later(run):
    """Gathers and sends in a daemon thread; returns the thread (finish() waits for it a moment)."""

    def go():
        try:
            import json

            from ._pb import logd_pb2 as pb

            w = run._writer
            conn = getattr(w, "conn", None) if w is not None else None
            if conn is None or getattr(w, "deferred", None):
                return
            req = pb.SetEnvironmentRequest(run_id=run.id, run_token=run._token, writer_id=w.writer_id,
                                           environment_json=json.dumps(gather_once(), default=str))
            conn.unary("SetEnvironment", req, 5.0)
        except Exception:  # noqa: BLE001 - not essential: the run goes on without it
            pass

    t = threading.Thread(target=go, name="logd-environment", daemon=True)
    t.start()
    return t
