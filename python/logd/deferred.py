"""init() never ends training (issue 24), as in the TypeScript client
(client/deferred.ts, src/deferred.ts): when no daemon can be used at start
(none can be started or reached, the data dir is unwritable or full, the
runtime dir is untrusted, the daemon is of another version or refuses), the
run goes on *deferred*. log() keeps working: the rows wait in this process
(memory, then the overflow file); a background thread keeps trying to create
the run (2 s, doubling to a minute; same id and create key, so never twice)
and, once a daemon answers, the writer hands everything over and goes on as
usual. A process that ends first writes `<run>--<writer>.deferred.spill`,
the TypeScript client's format with the create request in its header, to the
data dir's spool or, when that takes no files, to the user's private
fallback dir: the daemon of that data dir creates the run from it at its
next start or in its periodic scan (or `logd sync --ingest FILE`).

`on_error="raise"` (or LOGD_ON_ERROR=raise) keeps the old behaviour: init()
raises. Programming errors (a bad option or id, a reserved name) raise
whatever was asked: they are the caller's bug, said at once.

While deferred, a writer has no crash journal: a journal names a run that no
daemon knows yet, so the daemon could not store it after a crash. The rows are
in memory and in the spill file written at exit (SIGTERM/SIGHUP included);
a SIGKILLed deferred process loses them. After a daemon created the run, the
writer goes on without a journal too (see python/README.md, "Deferred runs").
"""
from __future__ import annotations

import os
import threading
import time
from typing import Callable, Optional

from ._ids import sha256
from . import _ids
from ._lazy import grpc, pb

from .paths import resolve_paths

# Why no daemon could be used, shown in run.problem and on stderr, is cut to this many characters (one line).
_REASON_CHARS = 400


def should_raise(on_error: Optional[str], e: BaseException) -> bool:
    """Whether an init() failure raises (asked for, or a programming error) instead of deferring the run."""
    if (on_error or os.environ.get("LOGD_ON_ERROR")) == "raise":
        return True
    if isinstance(e, (TypeError, ValueError)):
        return True  # a bad option, id or setting: the caller's bug, said at once
    from .transport.connection import CallError

    # INVALID_ARGUMENT, ALREADY_EXISTS (a taken id, a run to continue that a live owner holds) and NOT_FOUND
    # (resume="must" of an unknown run) are about the request, not about a daemon that cannot be used.
    return isinstance(e, CallError) and e.code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.ALREADY_EXISTS,
                                                   grpc.StatusCode.NOT_FOUND)


def check_on_error(on_error: Optional[str]) -> None:
    if on_error not in (None, "raise", "defer"):
        raise ValueError("logd: on_error=%r must be 'defer' (the default) or 'raise'" % (on_error,))


def reason_of(e: BaseException) -> str:
    """The failure as one line (a daemon's start log can run to many)."""
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 1] + "…"


def fallback_dir(data_dir: str, env=None) -> str:
    """src/deferred.ts's deferredFallbackDir: the daemon of data_dir reads it at start and in its periodic scan."""
    env = os.environ if env is None else env
    state = env.get("XDG_STATE_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".local", "state")
    tag = sha256(os.path.abspath(data_dir).encode()).hexdigest()[:16]
    return os.path.join(state, "logd", "deferred", tag)


def _writable(d: str) -> bool:
    try:
        os.makedirs(d, mode=0o700, exist_ok=True)
        probe = os.path.join(d, ".probe-%d-%s" % (os.getpid(), _ids.token_hex(4)))
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
        os.unlink(probe)
        return True
    except OSError:
        return False


# Room for a deferred run's files: a full disk takes a probe's empty file, and then not one row.
_SPOOL_ROOM_BYTES = 8 * 1024 * 1024


def _has_room(d: str) -> bool:
    try:
        st = os.statvfs(d)
    except OSError:
        return True  # cannot tell: the write says
    return st.f_bavail * st.f_frsize >= _SPOOL_ROOM_BYTES


def deferred_spool() -> str:
    """Where a deferred run's overflow and spill files go: the data dir's spool when it takes files and has room,
    else the user's private fallback dir."""
    paths = resolve_paths()
    if _writable(paths.spool_dir) and _has_room(paths.spool_dir):
        return paths.spool_dir
    d = fallback_dir(paths.data_dir)
    _writable(d)
    return d


def deferred_info(req: pb.CreateRunRequest, spool: str, writer_id: str) -> pb.RunInfo:
    """The RunInfo a deferred run starts with (nothing of it came from a daemon)."""
    return pb.RunInfo(
        id=req.id, project=req.project or "default", name=req.name or req.id, group=req.group, job_type=req.job_type,
        tags=list(req.tags), state="running", state_reason="deferred: no daemon yet", created_at=time.time(),
        config_json=req.config_json, summary_json="{}", metadata_json="{}", writers=1,
        run_token=_ids.token_urlsafe(18), mode=req.mode, notes=req.notes, owner_writer_id=writer_id, spool_dir=spool,
    )


def deferred_create(req: pb.CreateRunRequest, reason: str) -> dict:
    """src/spill.ts's DeferredCreate, as the TypeScript client writes it (JSON of the wire's camelCase fields)."""
    c = req.client
    r = c.rank
    client = {"pid": c.pid, "host": c.host,
              "rank": {"rank": r.rank, "localRank": r.local_rank, "worldSize": r.world_size, "nodeRank": r.node_rank,
                       "localWorldSize": r.local_world_size},
              "clientVersion": c.client_version}
    return {"project": req.project, "name": req.name, "group": req.group, "jobType": req.job_type,
            "configJson": req.config_json, "tags": list(req.tags), "notes": req.notes, "mode": req.mode,
            "client": client, "createKey": req.create_key, "reason": reason}


def problem_text(reason: str, spool: str, retrying: bool = True) -> str:
    return ("deferred: %s. Training goes on and its rows are kept; %s written to %s, which the daemon of this data dir "
            "stores at its next start (or: logd sync --ingest FILE)" % (
                reason, "logd keeps trying to reach a daemon, and if none answers before this process ends they are"
                if retrying else "they are", spool))


def retry_create(writer, create: Callable, on_created: Callable, first_delay_s: float = 2.0) -> threading.Thread:
    """Keeps trying to create the deferred run (2 s, doubling to 60 s) until a daemon answers, then hands the
    writer over to it (on_created(info, address)). A daemon thread: it never keeps the process alive."""

    def loop() -> None:
        delay = first_delay_s
        pid = os.getpid()
        while True:
            time.sleep(delay)
            if os.getpid() != pid or writer.closed or not writer.deferred:
                return  # a forked child has no such thread; a finished or created run needs none
            try:
                info, address = create()
            except Exception:
                delay = min(delay * 2, 60.0)
                continue
            if writer.closed or not writer.deferred:
                return
            on_created(info, address)
            return

    t = threading.Thread(target=loop, name="logd-deferred-" + writer.run_id, daemon=True)
    t.start()
    return t

