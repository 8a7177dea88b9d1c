"""Which runtime dir to use, as src/runtime-dir.ts decides it. The default one,
<tmp>/logd-<uid>/<key> when XDG_RUNTIME_DIR is unset, has a name every local
user can predict, so another user can create it first (as a directory or a
symlink) to receive or block this user's logging. Such a dir is never used
(trust.py); the runtime dir then moves to the user's own state dir
(Paths.runtime_fallback), which no other user can create, and stderr says once
what was taken and by whom. Every process of the user computes the same
fallback, so later processes find the daemon there; children get it through
LOGD_SERVICE. LOGD_RUNTIME_DIR is never replaced: it is used or refused."""
import os
import sys

from ..paths import Paths, runtime_files
from .trust import UntrustedDirError, ensure_private_dir, trusted_runtime_dir

_told = False


def private_runtime(paths: Paths, create: bool) -> Paths:
    """paths with a runtime dir this user can trust: checked, or made when `create` (before starting a daemon in it).
    Raises UntrustedDirError when neither the default dir nor the fallback is private to the user."""
    global _told

    def use(p: Paths) -> None:
        (ensure_private_dir if create else trusted_runtime_dir)(p.runtime_dir, p.runtime_parent)

    try:
        use(paths)
        return paths
    except UntrustedDirError as e:
        if not paths.runtime_fallback:
            raise
        d = paths.runtime_fallback
        moved = paths._replace(runtime_dir=d, runtime_parent=os.path.dirname(d), runtime_fallback=None, **runtime_files(d))
        use(moved)
        if not _told:
            _told = True
            sys.stderr.write(_taken_line(e, d) + "\n")
            sys.stderr.flush()
        return moved


def _taken_line(e: UntrustedDirError, instead: str) -> str:
    by = _owner(e.dir)
    what = "another local user, %s, made it (%s)" % (by, e.reason) if by else e.reason
    return ("logd: not using %s as the runtime dir: %s. It may be there to receive or block your logging; nothing was sent "
            "to it. Using %s instead, which only you can create. To choose the place yourself, set XDG_RUNTIME_DIR or "
            "LOGD_RUNTIME_DIR to a directory only you can write." % (e.dir, what, instead))


def _owner(p: str) -> str:
    """'uid N (name)' of whoever owns p when that is not this user; '' otherwise."""
    try:
        uid = os.lstat(p).st_uid
    except OSError:
        return ""
    if uid == (os.getuid() if hasattr(os, "getuid") else uid):
        return ""
    try:
        import pwd
        return "uid %d (%s)" % (uid, pwd.getpwuid(uid).pw_name)
    except (ImportError, KeyError):
        return "uid %d" % uid
