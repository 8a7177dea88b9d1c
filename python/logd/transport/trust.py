"""Trust in the runtime dir and in the daemon behind a socket, as in the
TypeScript client (src/private-dir.ts, client/peer-credentials.ts).

Whoever can write the runtime dir decides what its service file says and which
process listens on its socket. So a runtime dir is used only if it is a real
directory (not a symlink), owned by the user, mode 0700, and no other user can
rename or replace it (every directory above is the user's or root's, and not
writable by others unless sticky, like /tmp). Without this, another local user
who pre-creates /tmp/logd-<uid>/<hash> receives the user's runs.

Before anything is sent over a Unix socket (not even the token), the daemon
must run as the user: the socket's directory is private, the socket file is
the user's, and the process holding the listening socket (the pid in the
service file next to it, matched by inode through /proc/net/unix and
/proc/<pid>/fd) runs as the user. A loopback TCP port must belong to the user
(/proc/net/tcp{,6}). A daemon on another host cannot be vouched for here."""
import os
import stat
import sys
from typing import Optional, Set

from .._lazy import json, re


class UntrustedDirError(RuntimeError):
    """The runtime dir is not private to this user. `dir`: the directory refused; `reason`: why, in words."""

    def __init__(self, message: str, dir: str = "", reason: str = ""):
        super().__init__(message)
        self.dir = dir
        self.reason = reason


class UntrustedDaemonError(RuntimeError):
    """The daemon at an address does not run as this user; nothing was sent to it."""


def _uid() -> int:
    return os.getuid() if hasattr(os, "getuid") else 0


def _leaf_problem(d: str, uid: int) -> Optional[str]:
    st = os.lstat(d)
    if stat.S_ISLNK(st.st_mode):
        return "%s is a symbolic link" % d
    if not stat.S_ISDIR(st.st_mode):
        return "%s is not a directory" % d
    if st.st_uid != uid:
        return "%s is owned by uid %d, not by you (uid %d)" % (d, st.st_uid, uid)
    if st.st_mode & 0o777 != 0o700:
        return "%s has mode 0%o, not 0700" % (d, st.st_mode & 0o7777)
    return None


def _ancestor_problem(d: str, uid: int) -> Optional[str]:
    p = os.path.dirname(d)
    while True:
        st = os.stat(p)
        if st.st_uid not in (uid, 0):
            return "%s (above %s) is owned by uid %d, not by you or root" % (p, d, st.st_uid)
        if st.st_mode & 0o002 and not st.st_mode & 0o1000:
            return "%s (above %s) is writable by every user and not sticky (mode 0%o)" % (p, d, st.st_mode & 0o7777)
        if os.path.dirname(p) == p:
            return None
        p = os.path.dirname(p)


def untrusted_dir_reason(d: str, uid: Optional[int] = None) -> Optional[str]:
    """Why d cannot be trusted as a private directory of this user; None when it can (or does not exist)."""
    uid = _uid() if uid is None else uid
    try:
        return _leaf_problem(d, uid) or _ancestor_problem(d, uid)
    except FileNotFoundError:
        return None
    except OSError as e:
        return "%s cannot be checked: %s" % (d, e)


def untrusted_dir_message(what: str, reason: str) -> str:
    return ("logd: refusing %s: %s. Another local user may have created or changed it to receive or block your logging; "
            "nothing was sent. Set XDG_RUNTIME_DIR (or LOGD_RUNTIME_DIR) to a directory only you can write, or remove the "
            "offending directory (it may take an administrator)." % (what, reason))


def _tighten_own(d: str, uid: int) -> None:
    """A directory of the user's that nobody else could write is made 0700: its contents can only be the user's."""
    try:
        st = os.lstat(d)
        if stat.S_ISDIR(st.st_mode) and st.st_uid == uid and st.st_mode & 0o077 and not st.st_mode & 0o022:
            os.chmod(d, 0o700)
    except OSError:
        pass


def ensure_private_dir(d: str, parent: Optional[str] = None) -> None:
    """Makes d exist as a private directory of the user, or raises UntrustedDirError saying why it cannot be trusted."""
    uid = _uid()

    def make(x: str) -> None:
        try:
            os.mkdir(x, 0o700)
        except FileExistsError:
            pass
        _tighten_own(x, uid)
        why = untrusted_dir_reason(x, uid)
        if why:
            raise UntrustedDirError(untrusted_dir_message("to use %s as the runtime dir" % x, why), x, why)

    os.makedirs(os.path.dirname(parent or d), mode=0o700, exist_ok=True)
    if parent:
        make(parent)
    make(d)


def trusted_runtime_dir(d: str, parent: Optional[str] = None) -> None:
    """Raises UntrustedDirError when an existing d (or its default per-user parent) is not private."""
    uid = _uid()
    for x in ([parent, d] if parent else [d]):
        _tighten_own(x, uid)
        why = untrusted_dir_reason(x, uid)
        if why:
            raise UntrustedDirError(untrusted_dir_message("to use %s as the runtime dir" % x, why), x, why)


# ---- the daemon's peer credentials ----

def _refuse(target: str, why: str) -> None:
    raise UntrustedDaemonError(
        "logd: refusing to talk to the daemon at %s: %s. It may belong to another local user; nothing was sent. "
        "Unset LOGD_SERVICE (or set it to your own daemon), or set XDG_RUNTIME_DIR (or LOGD_RUNTIME_DIR) to a "
        "directory only you can write." % (target, why))


def verify_daemon_peer(target: str) -> None:
    """Raises UntrustedDaemonError unless the daemon at target ("unix:/path" or "host:port") runs as this user,
    as far as this node can tell."""
    if not sys.platform.startswith("linux"):
        return
    if target.startswith("unix:"):
        _verify_unix(target[len("unix:"):])
        return
    m = re.match(r"^(?:\[([^\]]+)\]|([^:]+)):(\d+)$", target)
    if m:
        _verify_loopback_tcp(target, m.group(1) or m.group(2), int(m.group(3)))


def _verify_unix(sock: str) -> None:
    uid = _uid()
    target = "unix:" + sock
    why = untrusted_dir_reason(os.path.dirname(sock), uid)
    if why:
        _refuse(target, "its directory is not private to you: " + why)
    try:
        st = os.lstat(sock)
    except OSError:
        return  # nothing there: the call fails as unavailable, and nothing reaches anyone
    if not stat.S_ISSOCK(st.st_mode):
        _refuse(target, "%s is not a socket" % sock)
    if st.st_uid != uid:
        _refuse(target, "%s is owned by uid %d, not by you (uid %d)" % (sock, st.st_uid, uid))
    holder = _listener_process(sock)
    if holder is not None and holder[1] != uid:
        _refuse(target, "the process listening on it (pid %d) runs as uid %d, not as you (uid %d)" % (holder[0], holder[1], uid))


def _listening_unix_inodes(sock: str) -> Set[str]:
    """/proc/net/unix: Num RefCount Protocol Flags Type St Inode Path; listening sockets have SO_ACCEPTCON."""
    out: Set[str] = set()
    try:
        with open("/proc/net/unix", encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\n")[1:]
    except OSError:
        return out
    for line in lines:
        fields = line.split()
        if len(fields) < 8 or " ".join(fields[7:]) != sock:
            continue
        if int(fields[3], 16) & 0x10000:
            out.add(fields[6])
    return out


def _listener_process(sock: str):
    """(pid, effective uid) of the process holding the listening socket at sock; None when it cannot be told."""
    try:
        with open(os.path.join(os.path.dirname(sock), "service.json"), encoding="utf-8") as f:
            pid = json.load(f).get("pid")
    except (OSError, ValueError, AttributeError):
        return None
    inodes = _listening_unix_inodes(sock)
    if not isinstance(pid, int) or not inodes:
        return None
    try:
        holds = False
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue
            if link.startswith("socket:[") and link[8:-1] in inodes:
                holds = True
                break
        if not holds:
            return None
        with open("/proc/%d/status" % pid, encoding="utf-8") as f:
            m = re.search(r"^Uid:\s+(\d+)\s+(\d+)", f.read(), re.M)
        return (pid, int(m.group(2))) if m else None
    except OSError:
        return None  # another user's process: /proc/<pid>/fd is not readable, and the file checks above already hold


def _reaches_loopback(hex_ip: str) -> bool:
    if re.fullmatch(r"0+", hex_ip):
        return True
    if len(hex_ip) == 8:
        return hex_ip.endswith("7F")  # little-endian: the first octet is the last byte
    return hex_ip == "00000000000000000000000001000000" or (
        hex_ip.startswith("0000000000000000FFFF0000") and (hex_ip.endswith("7F") or hex_ip.endswith("00000000")))


def _verify_loopback_tcp(target: str, host: str, port: int) -> None:
    if not (host in ("localhost", "::1") or host.startswith("127.")):
        return
    uid = _uid()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="utf-8") as f:
                lines = f.read().split("\n")[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 8 or fields[3] != "0A":  # TCP_LISTEN
                continue
            ip, hex_port = fields[1].split(":")
            if int(hex_port, 16) != port or not _reaches_loopback(ip):
                continue
            owner = int(fields[7])
            if owner != uid:
                _refuse(target, "the socket listening on port %d belongs to uid %d, not to you (uid %d)" % (port, owner, uid))
