"""Reaching the daemon for init() and attach() through whatever happens to it
meanwhile (as client/reach.ts and client/stale-service.ts): killed and
restarted, replaced by a sidecar, a zombie, or named by a stale LOGD_SERVICE
(a dead address, or a token from an earlier daemon). A call is tried again,
on the daemon found anew, until the deadline: LOGD_CALL_TIMEOUT_MS +
LOGD_START_TIMEOUT_MS in all, 20 s by default. The calls made through here are
idempotent (CreateRun carries a client-chosen id and key, AttachRun a writer
id), so a retry after a timeout never makes a second run. When time runs out,
DaemonUnavailableError says what was tried."""
import sys
import time
from typing import Callable, Optional, Tuple, TypeVar

from .._lazy import grpc

from .connection import CallError, Connection, ServiceAddress, connection_for
from .discovery import DaemonStartError, find_daemon
from ..paths import tunables
from .._version import PROTOCOL_VERSION

T = TypeVar("T")


class DaemonUnavailableError(RuntimeError):
    """No daemon answered init() or attach() within its deadline; nothing was created."""


def _retriable_codes():
    return (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAUTHENTICATED)


def _retriable(e: Exception) -> bool:
    if isinstance(e, DaemonStartError):
        return e.transient  # no daemon yet (waiting for a restart), or a start race lost
    return isinstance(e, CallError) and e.code in _retriable_codes()


def shows_stale(e: Exception) -> bool:
    """True when e, from a call to an address, shows it is not (or no longer) a daemon that takes our token."""
    return isinstance(e, CallError) and e.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNAUTHENTICATED)


_warned = False


def warn_stale(addr: ServiceAddress, e: Exception) -> None:
    """Says once per process that LOGD_SERVICE was stale, and why."""
    global _warned
    if _warned:
        return
    _warned = True
    why = "the daemon there refuses its token (it was restarted)" if isinstance(e, CallError) and e.code == grpc.StatusCode.UNAUTHENTICATED else "no daemon answers there"
    sys.stderr.write("logd: LOGD_SERVICE (%s) is stale: %s; using the daemon of this data dir instead "
                     "(found or started anew, and exported to child processes)\n" % (addr.target, why))


def env_service() -> Optional[ServiceAddress]:
    s = tunables().service
    return ServiceAddress.parse(s) if s else None


def with_daemon(what: str, fn: Callable[[Connection, float], T], first: Optional[ServiceAddress] = None) -> Tuple[T, ServiceAddress]:
    """Runs fn(connection, timeout_s) against `first` (default: LOGD_SERVICE, else the daemon found as usual)
    and, while it fails in a way a restart explains, against the daemon found anew."""
    t = tunables()
    budget = t.call_timeout_s + t.start_timeout_s
    deadline = time.monotonic() + budget
    from_env = None if first else env_service()
    address = first or from_env
    last: Optional[Exception] = None
    tries = 0
    backoff = 0.05
    while True:
        tries += 1
        try:
            if address is None:
                address = find_daemon(ignore_env=True)
            left = deadline - time.monotonic()
            return fn(connection_for(address), max(0.001, min(t.call_timeout_s, left))), address
        except (CallError, DaemonStartError) as e:
            if not _retriable(e):
                raise
            last = e
            if from_env is not None and address == from_env and shows_stale(e):
                warn_stale(from_env, e)
        if time.monotonic() + backoff >= deadline:
            break
        time.sleep(backoff)
        backoff = min(backoff * 2, 0.5)
        address = None  # look again: the daemon may have been restarted, replaced or started by someone else
    raise DaemonUnavailableError(
        "%s: no logd daemon answered within %d ms (%d tries; last: %s). Check `logd status`; start one with "
        "`logd serve`, or raise LOGD_START_TIMEOUT_MS / LOGD_CALL_TIMEOUT_MS" % (what, budget * 1000, tries, last)
    ) from last


def checked_daemon() -> ServiceAddress:
    """For setup(): the daemon to use, checked with a Hello when it comes from LOGD_SERVICE; a stale one is
    reported and replaced through discovery (which may start a sidecar)."""
    from .._pb import logd_pb2 as pb

    env = env_service()
    if env is not None:
        try:
            connection_for(env).unary("Hello", pb.HelloRequest(protocol_version=PROTOCOL_VERSION), tunables().call_timeout_s)
            return env
        except CallError as e:
            if not shows_stale(e):
                raise
            warn_stale(env, e)
    return find_daemon(ignore_env=True)
