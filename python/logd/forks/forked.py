"""init() and attach() in a process forked after logd used gRPC (issue 24).

A multiprocessing or DataLoader worker forked from a parent that holds a run
inherits grpcio's state, which is not fork-safe: a channel the child opens
shares the parent's epoll set and threads (see relay.py). So the child never
calls into gRPC, whatever the parent did. Its create (or attach) goes through
the child's relay: a fresh interpreter (`python -m logd.forks._relay_main`,
fork+exec) that makes the call on a connection of its own, answers with the
RunInfo, and then carries the child's rows as it does for inherited runs.

- The relay makes the call the way init() does in any process (the same
  deadline, the same deferred run when no daemon can be used, said once on
  stderr by the relay, whose stderr is the child's). The child raises what
  the relay raised, by name, when it raises (on_error="raise", a bad option).
- The run's owner, as the daemon sees it, is the relay (its pid is the one
  the daemon watches): the child may end with os._exit right after its last
  row, and the relay still delivers and finishes. The relay finishes the run
  with the code the child gave: finish(exit_code=...), its exit code at exit
  (atexit, SIGTERM), 0 when the pipe is closed as a multiprocessing worker
  ends, and 1 when the pipe closes without a word (the child was killed).
- When no relay can be started or none answers, the run goes on deferred in
  the child itself, with no retry (a retry would need gRPC here): the rows
  go to a deferred spill file at exit, which a running daemon picks up in its
  periodic scan, or the next one at its start.
"""
from __future__ import annotations

import queue
import subprocess
import sys
import threading
from typing import Optional


from .._lazy import grpc, pb
from ..transport.connection import CallError, ServiceAddress
from ..deferred import deferred_create, deferred_info, deferred_spool, problem_text, reason_of, should_raise
from ..transport.discovery import DaemonStartError
from ..transport.reach import DaemonUnavailableError
from .relay import _recv, _send
from ..transport.trust import UntrustedDaemonError, UntrustedDirError
from ..writer import new_writer_id

_ERRORS = {c.__name__: c for c in (DaemonUnavailableError, DaemonStartError, UntrustedDirError, UntrustedDaemonError,
                                   TypeError, ValueError, RuntimeError)}


def error_from(name: str, message: str, code: Optional[str]) -> Exception:
    """The exception the relay raised, raised again here."""
    if name == "CallError":
        return CallError(getattr(grpc.StatusCode, code or "UNKNOWN", grpc.StatusCode.UNKNOWN), "relay", message)
    return _ERRORS.get(name, RuntimeError)(message)


def _answer_within(proc: subprocess.Popen, timeout_s: float):
    """The relay's first answer, or None when it is gone or silent past timeout_s."""
    q: "queue.SimpleQueue" = queue.SimpleQueue()

    def read() -> None:
        try:
            q.put(_recv(proc.stdout))
        except Exception:
            q.put(None)

    threading.Thread(target=read, name="logd-relay-answer", daemon=True).start()
    try:
        return q.get(timeout=timeout_s)
    except queue.Empty:
        return None


def _ask_relay(first) -> "tuple":
    """Starts a relay, sends it `first` and returns (proc, answer); answer None when it did not answer."""
    from ..paths import tunables

    t = tunables()
    proc = subprocess.Popen([sys.executable, "-m", "logd.forks._relay_main"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            close_fds=True)
    try:
        _send(proc.stdin, first)
    except (OSError, ValueError):
        return proc, None
    # The relay's own init() has the usual deadline (call + start timeouts); a little more for its interpreter.
    return proc, _answer_within(proc, t.call_timeout_s + t.start_timeout_s + 15)


def _stop(proc: Optional[subprocess.Popen]) -> None:
    if proc is None:
        return
    try:
        proc.kill()
        proc.wait(5)
    except Exception:
        pass


def _relayed_run(proc: subprocess.Popen, info: pb.RunInfo, address: ServiceAddress, token: str, writer_id: str,
                 is_owner: bool, deferred: bool):
    from .. import _warn, _writer_factory, client_info, exit_hooks
    from ..paths import tunables
    from .relay import RelayWriter
    from ..run import Run

    t = tunables()
    # No journal for a deferred run: it would name a run no daemon knows (deferred.py).
    w = RelayWriter(address, info.id, token, writer_id, client_info(), t.flush_interval_s, _warn, info.spool_dir,
                    0 if deferred else t.journal_mb, proc=proc)
    exit_hooks.install(deferred=deferred)
    return Run(info, w, token, is_owner, _warn, _writer_factory(info.id, token, info.spool_dir))


def init_via_relay(req: pb.CreateRunRequest, on_error: Optional[str]):
    proc = None
    try:
        proc, ans = _ask_relay(("init", req.SerializeToString(), on_error))
        if ans is None:
            raise DaemonUnavailableError("init: the relay of this forked process (%s -m logd.forks._relay_main) did not "
                                         "answer; is logd installed for that Python?" % sys.executable)
    except (OSError, DaemonUnavailableError) as e:
        _stop(proc)
        if should_raise(on_error, e):
            raise
        return _deferred_here(req, e)
    if ans[0] == "error":
        _stop(proc)
        raise error_from(ans[1], ans[2], ans[3])
    _, info_bytes, service, problem = ans
    info = pb.RunInfo.FromString(info_bytes)
    run = _relayed_run(proc, info, ServiceAddress.parse(service), info.run_token, info.owner_writer_id, True,
                       problem is not None)
    run._writer.last_problem = problem  # the relay said it on stderr already
    return run


def attach_via_relay(p: dict):
    from .. import client_info

    writer_id = new_writer_id()
    proc, ans = _ask_relay(("attach", p["s"], p["r"], p["t"], writer_id, client_info().SerializeToString()))
    if ans is None:
        _stop(proc)
        raise DaemonUnavailableError("attach: the relay of this forked process (%s -m logd.forks._relay_main) did not answer"
                                     % sys.executable)
    if ans[0] == "error":
        _stop(proc)
        raise error_from(ans[1], ans[2], ans[3])
    _, info_bytes, service, _problem = ans
    info = pb.RunInfo.FromString(info_bytes)
    return _relayed_run(proc, info, ServiceAddress.parse(service), p["t"], writer_id, False, False)


def _deferred_here(req: pb.CreateRunRequest, e: BaseException):
    """No relay: a deferred run in this process, without retries (they would need gRPC); spilled at exit."""
    from .. import _warn, _writer_factory
    from ..run import Run
    from .. import exit_hooks

    reason = reason_of(e)
    spool = deferred_spool()
    writer_id = new_writer_id()
    info = deferred_info(req, spool, writer_id)
    make = _writer_factory(info.id, info.run_token, spool)
    w = make(None, writer_id, deferred=deferred_create(req, reason))
    w.last_problem = problem_text(reason, spool, retrying=False)
    _warn("logd: run %s: %s" % (info.id, w.last_problem))
    exit_hooks.install(deferred=True)
    return Run(info, w, info.run_token, True, _warn, make)
