"""logd's Python client.

    import logd
    logd.setup()                                # optional: find or start the daemon, export LOGD_SERVICE
    run = logd.init(project="p", group="g", config={"lr": 0.1})
    run.log({"loss": 0.5, "acc": {"top1": 0.9}})  # never blocks on I/O; nested dicts become "acc/top1"
    h = run.handle()                            # another process: logd.attach(h)
    run.finish()
"""
from __future__ import annotations

import numbers
import os
import socket
import sys
from typing import Optional

# grpcio's C core logs through absl; recent grpcio (1.8x, what pip gives a wheel user) prints INFO lines such as
# "Got goaway" on a trainer's stderr when its daemon stops or restarts, which logd handles. Errors only, unless
# the program set GRPC_VERBOSITY itself (before grpc loads: logd loads it lazily, at the first connection).
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

# logd never uses a gRPC channel across fork() (see relay.py), so grpcio's own
# fork handlers only add risk: on by default in newer grpcio, they pause gRPC's
# threads around every fork, or skip with a log line per DataLoader worker
# while a stream is open. Off unless the program chose otherwise before grpc loaded.
if "grpc" not in sys.modules:
    os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

from . import _ids, exit_hooks  # noqa: E402
from ._lazy import pb, json, re
from .transport.connection import CallError, ServiceAddress, connection_for, forked_after_grpc
from .transport.discovery import DaemonStartError, prestart
from .disabled import DisabledRun
from .paths import resolve_paths, tunables
from .transport.reach import DaemonUnavailableError, checked_daemon, with_daemon
from .transport.trust import UntrustedDaemonError, UntrustedDirError
from .console import capture_console
from .run import FinishResult, Run, live_runs
from .torchrun import job_run_id, rank_info, torchrun_env
from .values import to_json
from .media import Histogram, Image, Text
from .forks.relay import RelayWriter
from .writer import Writer, new_writer_id
from .transport import keepalive
from .deferred import (check_on_error, deferred_create, deferred_info, deferred_spool, problem_text, reason_of,
                       retry_create, should_raise)

from ._version import __version__  # package.json's version (packaging/sync-version.mjs)
from .hot import name as hot_path  # "c" when log()'s compiled hot path is in use, else "python (why)" (hot.py)
__all__ = ["setup", "init", "attach", "finish_all", "Run", "Histogram", "Image", "Text", "DisabledRun", "FinishResult", "CallError", "DaemonStartError", "Api",
           "DaemonUnavailableError", "UntrustedDirError", "UntrustedDaemonError"]


def __getattr__(name):
    # logd.Api (reading runs back, logd/readback/) loads on first use: `import logd` on the training path stays light.
    if name == "Api":
        from .readback import Api

        return Api
    raise AttributeError("module 'logd' has no attribute %r" % (name,))


def __dir__():
    # dir(logd) and a notebook's completion show the public API, not the modules and helpers this file imports
    # (os, re, socket, ...): they stay reachable as attributes, for logd's own modules.
    return sorted(__all__ + ["__version__", "hot_path", "integrations"])


def _warn(msg: str) -> None:
    sys.stderr.write(msg if msg.endswith("\n") else msg + "\n")


def new_run_id() -> str:
    """A fresh run id: 12 characters of a-z 0-9 (about 62 random bits)."""
    return _ids.run_id()


def client_info() -> pb.ClientInfo:
    return pb.ClientInfo(pid=os.getpid(), host=socket.gethostname(), rank=rank_info(), client_version=__version__)


def setup() -> str:
    """Makes sure a daemon is reachable and exports LOGD_SERVICE for child processes (spawned ones included)."""
    if forked_after_grpc():
        # No gRPC here (forked.py): the daemon the parent found (LOGD_SERVICE, inherited) or the data dir's.
        from .transport.discovery import find_daemon

        return find_daemon().format()
    return checked_daemon().format()


def _writer_factory(run_id: str, run_token: str, spool_dir: str = ""):
    # Spill and overflow files go to the spool of the daemon that owns the run, as it said in its answer (not
    # this process's own LOGD_DIR, which another HOME or a scrubbed environment makes a different place). An
    # older daemon does not say: this process's own spool is the best guess then.
    spool = spool_dir or resolve_paths().spool_dir

    def make(address: ServiceAddress, writer_id: str, relay: bool = False, deferred: Optional[dict] = None):
        t = tunables()
        if relay:
            return RelayWriter(address, run_id, run_token, writer_id, client_info(), t.flush_interval_s, _warn, spool,
                               t.journal_mb)
        return Writer(address, run_id, run_token, writer_id, client_info(), t.flush_interval_s, _warn, t.max_buffer_bytes, spool,
                      t.journal_mb, deferred=deferred)

    return make


def init(project: Optional[str] = None, name: Optional[str] = None, group: Optional[str] = None,
         job_type: Optional[str] = None, config: Optional[dict] = None, tags=None, notes: Optional[str] = None,
         id: Optional[str] = None, mode: Optional[str] = None, sample_interval_ms: int = 0,  # noqa: A002 - wandb's name
         on_error: Optional[str] = None, resume: Optional[str] = None, console: Optional[bool] = None,
         resume_from=None, fork_from=None, quiet: Optional[bool] = None, save_code: Optional[bool] = None):
    """Creates a run; this process becomes its owner.

    Says so in one stderr line (the run's id and name, where it is stored, how to look at it), from rank 0 only and
    once per group in a process; quiet=True or LOGD_QUIET=1 keeps it silent.

    When no daemon can be used (none can be started or reached, the data dir is unwritable or full, the runtime
    dir is untrusted, the daemon refuses), the run goes on deferred (deferred.py): log() works, `run.problem` and
    one stderr line say why, and a daemon gets the rows later. on_error="raise" (or LOGD_ON_ERROR=raise) raises
    instead. Invalid options raise either way.

    In a process forked after logd used gRPC (a multiprocessing or DataLoader worker of a parent that holds a
    run), the create goes through the child's relay process (forked.py): this process never touches gRPC.

    resume: when the run `id` exists, "allow" continues it (else creates it), "must" continues it or raises,
    "never" (the default) raises. A continued run is a new attempt: running again, its config merged, its steps
    going on from the last stored step (metadata.attempts lists the attempts).

    resume_from=(run_id, step): rewind. Continues run `run_id` (this init's id: give the same id or none; None
    stands for the id this init uses, under torchrun the rank's derived one) as a new attempt from `step`, the step
    of the checkpoint being resumed. Rows earlier attempts logged above that step stay stored but superseded: reads
    show the latest timeline (`logd export RUN --all-attempts` shows them too). log() without a step goes on from
    step + 1. Raises when the run does not exist or the step lies beyond its last stored step.

    fork_from=(run_id, step): a new run (this init's id, or a fresh one) whose history starts as the daemon's copy
    of run `run_id`'s rows up to and including `step`, with its config (merged with `config`);
    metadata["forkedFrom"] links back. Raises when the source does not exist or the step lies beyond its last.

    A rewind or a fork is done by the daemon at init: when no daemon can be used, init raises instead of deferring.

    Under torchrun the torchrun environment is recorded in config["torchrun"]. With no id given, each rank's run
    gets a stable id derived from the job (torchrun.py: TORCHELASTIC_RUN_ID, or the torchrun agent process when
    the job has none) and resume="allow": a worker restarted by --max-restarts continues its rank's run as a new
    attempt instead of starting another run.

    console: this process's sys.stdout and sys.stderr are captured into the run (default on; console=False or
    LOGD_CONSOLE=0 turns it off). Only the first open run of a process captures, and only Python-level writes
    (console.py); the output reaches the terminal unchanged.

    save_code: records the git commit, branch, dirty flag and remote, the command line, Python's and torch's
    versions on the run, gathered in a background thread (environment.py; default on; save_code=False or
    LOGD_SAVE_CODE=0 turns it off).
    """
    t = tunables()
    mode = t.mode or mode or "online"
    check_on_error(on_error)
    if mode not in ("online", "offline", "disabled"):
        raise ValueError("logd: mode=%r must be online, offline or disabled" % mode)
    if mode == "disabled":
        return DisabledRun(project or "", name or "", group or "", config)
    if config is not None and not isinstance(config, dict):
        raise TypeError("logd: config must be a dict, not %s" % type(config).__name__)
    cfg = dict(config or {})
    env = torchrun_env()
    if env:
        cfg.setdefault("torchrun", env)
    if resume not in (None, "allow", "must", "never"):
        raise ValueError("logd: resume=%r must be 'allow', 'must' or 'never'" % (resume,))
    rewind = _step_ref("resume_from", resume_from)
    fork = _step_ref("fork_from", fork_from)
    if rewind and fork:
        raise ValueError("logd: give resume_from (rewind this run) or fork_from (a new run from another), not both")
    _given_id = id is not None or (rewind is not None and rewind[0] is not None)
    if rewind:
        if rewind[0] is not None and id is not None and rewind[0] != id:
            raise ValueError("logd: resume_from names run %s but id is %s: resume_from rewinds the run being continued "
                             "(give the same id, or leave id out); to start a new run from another run's step use "
                             "fork_from" % (json.dumps(rewind[0]), json.dumps(id)))
        if resume == "never":
            raise ValueError("logd: resume='never' refuses to continue a run, and resume_from continues one: leave "
                             "resume out")
        if id is None:
            id = rewind[0]
        if id is None and not env:
            raise ValueError("logd: resume_from rewinds a run: name it, resume_from=(run_id, step) (or give id=)")
    if fork:
        if fork[0] is None:
            raise ValueError("logd: fork_from=(run_id, step) must name the run to fork")
        if fork[0] == id:
            raise ValueError("logd: fork_from names run %s, the run being created: a fork is a new run with its own "
                             "id; to go back in this run use resume_from" % json.dumps(id))
        if resume == "must":
            raise ValueError("logd: resume='must' continues an existing run, and fork_from creates a new one: leave "
                             "resume out")
    if resume == "must" and not id:
        raise ValueError("logd: resume='must' continues a run: give its id")
    if id is None and env:
        # A restarted worker (--max-restarts) continues its rank's run: the same id on every attempt.
        id = job_run_id(project or "", group or os.environ.get("LOGD_GROUP") or "", name or "")
        if id is not None and resume is None:
            resume = "allow"
    if id is not None and (not isinstance(id, str) or not re.match(_RUN_ID, id)):
        # Checked here, not only by the daemon: a deferred run's id names its files.
        raise TypeError("logd: run id %s must be 1-64 characters of A-Z a-z 0-9 _ -" % json.dumps(str(id)[:80]))
    # A rank started by `logd launch` gets its job's group in LOGD_GROUP.
    group = group or os.environ.get("LOGD_GROUP") or ""
    save_env = save_code is not False and os.environ.get("LOGD_SAVE_CODE", "") != "0"
    if not forked_after_grpc() and prestart() and save_env:
        # A sidecar init will wait for starts now, while protobuf and grpc load (discovery.py); the environment is
        # gathered in that wait too, rather than just before finish() waits for it.
        from .environment import gather_once

        try:
            gather_once()
        except Exception:  # noqa: BLE001 - a cwd gone, say: send_later's thread meets it again and goes without
            pass
    req = pb.CreateRunRequest(
        client=client_info(), project=project or "", name=name or "", group=group or "", job_type=job_type or "",
        config_json=to_json(cfg), tags=list(tags or []), id=id or new_run_id(), mode=mode, notes=notes or "",
        sample_interval_ms=int(sample_interval_ms or 0),
        # The id is chosen here and the create carries a key only this call knows: a CreateRun sent again
        # (after a timeout, or to a restarted daemon) gets the same run back instead of leaving a second one.
        create_key=_ids.token_urlsafe(18), resume=resume or "",
    )
    if rewind:
        req.resume_from.run_id = req.id
        req.resume_from.step = rewind[1]
    if fork:
        req.fork_from.run_id = fork[0]
        req.fork_from.step = fork[1]
    if forked_after_grpc():
        from .forks.forked import init_via_relay

        return init_via_relay(req, on_error)
    derived = rewind is not None and rewind[0] is None and resume_from is not None and id is not None and not _given_id
    try:
        run = create_run(req, on_error, _writer_factory, console=t.console and console is not False)
    except CallError as e:
        # A restarted torchrun worker rewinds its rank's run (resume_from=(None, step)); when the earlier attempt's
        # run never reached this node's daemon (its init was deferred and its process killed before its rows were
        # handed over), there is nothing to rewind: the run starts here under the job's id, said once, and training
        # goes on (logging never ends a job). A run named by its id is the caller's to get right: that raises.
        if not (derived and e.code is not None and e.code.name == "NOT_FOUND"):
            raise
        _warn("logd: run %s: resume_from=(None, %d): this rank's run of the job's earlier attempt is not in the daemon's "
              "store (its rows never reached it); the run starts here, from this attempt" % (req.id, rewind[1]))
        req.ClearField("resume_from")
        req.resume = "allow"
        req.create_key = _ids.token_urlsafe(18)
        run = create_run(req, on_error, _writer_factory, console=t.console and console is not False)
    if save_env and hasattr(run, "_writer"):
        from .environment import send_later

        run._environment = send_later(run)
    if not (quiet if quiet is not None else os.environ.get("LOGD_QUIET", "") not in ("", "0")):
        _announce(run)
    return run


_announced = set()
_ANNOUNCE_MAX = 5  # lines per process: a sweep of many runs in one process says the first few


def _announce(run) -> None:
    """One line per run, as other trackers print: its id and name, where it is stored, how to look at it. Rank 0
    only (every rank would say the same), once per group in a process, nothing for a deferred run (it said why)."""
    try:
        if os.environ.get("RANK", "0") != "0" or getattr(run, "problem", None):
            return
        key = run.group or run.id
        if key in _announced or len(_announced) > _ANNOUNCE_MAX:
            return
        _announced.add(key)
        if len(_announced) > _ANNOUNCE_MAX:
            (sys.__stderr__ or sys.stderr).write("logd: (more runs follow; their lines are left out: LOGD_QUIET=1 or init(quiet=True) silences them)\n")
            return
        from .paths import resolve_paths

        where = " in %s" % resolve_paths().data_dir
        look = "logd health %s" % run.group if run.group else "logd show %s" % run.id
        # The process's own stderr, not the run's console capture (the line is not the run's output).
        out = sys.__stderr__ or sys.stderr
        out.write("logd: run %s (%s/%s%s) stored%s; see it with `%s` or `logd ui`\n" % (
            run.id, run.project, run.name or "-", ", group %s" % run.group if run.group else "", where, look))
        out.flush()
    except Exception:  # never let a courtesy line break init()
        pass


def _step_ref(what: str, value):
    """(run_id or None, step) from a resume_from / fork_from value, or None when not given."""
    if value is None:
        return None
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise TypeError("logd: %s must be a (run_id, step) pair, not %r" % (what, value))
    run_id, step = value
    if run_id is not None and (not isinstance(run_id, str) or not re.match(_RUN_ID, run_id)):
        raise TypeError("logd: %s run id %s must be 1-64 characters of A-Z a-z 0-9 _ -" % (what, json.dumps(str(run_id)[:80])))
    if isinstance(step, bool) or not isinstance(step, numbers.Integral) or not 0 <= step < 2 ** 53:
        raise ValueError("logd: %s step %r must be a non-negative integer (a step the run logged)" % (what, step))
    step = int(step)
    return run_id, step


def create_run(req: pb.CreateRunRequest, on_error: Optional[str], factory, console: bool = False) -> Run:
    """The create, or a deferred run when no daemon can be used; also what a forked child's relay runs for it."""

    def create():
        return with_daemon("init", lambda c, timeout_s: c.unary("CreateRun", req, timeout_s))

    try:
        info, address = create()
    except Exception as e:
        # A rewind or a fork is done by the daemon at init: it cannot be deferred to a daemon found later.
        if should_raise(on_error, e) or req.HasField("resume_from") or req.HasField("fork_from"):
            raise
        return _with_console(_deferred_run(req, e, create, factory), console)
    make = factory(info.id, info.run_token, info.spool_dir)
    exit_hooks.install()
    run = Run(info, make(address, info.owner_writer_id), info.run_token, True, _warn, make)
    keepalive.ensure(client_info, tunables().keepalive_s, live_runs)
    return _with_console(run, console)


def _with_console(run: Run, console: bool) -> Run:
    """The owner's run takes this process's console, unless turned off or another run has it (console.py)."""
    if console:
        capture = capture_console(run.id, _warn)
        if capture is not None:
            run._writer.console_source = capture
            if hasattr(run._writer, "_buf_lock"):
                capture.journal_to = run._writer  # each write goes into the crash journal too (console.py)
            run._console = capture
    return run


def _deferred_run(req: pb.CreateRunRequest, e: BaseException, create, factory) -> Run:
    """init() could not use a daemon: the run goes on deferred, and a daemon gets it later (deferred.py)."""
    reason = reason_of(e)
    spool = deferred_spool()
    writer_id = new_writer_id()
    info = deferred_info(req, spool, writer_id)
    make = factory(info.id, info.run_token, spool)
    w = make(None, writer_id, deferred=deferred_create(req, reason))
    problem = problem_text(reason, spool)
    w.last_problem = problem
    _warn("logd: run %s: %s" % (info.id, problem))
    exit_hooks.install(deferred=True)
    run = Run(info, w, info.run_token, True, _warn, make)

    def created(real: pb.RunInfo, address: ServiceAddress) -> None:
        real_spool = real.spool_dir or resolve_paths().spool_dir
        w.undefer(address, real.run_token, real.owner_writer_id, real_spool)
        run.adopt(real.run_token, address)
        run._make_writer = factory(real.id, real.run_token, real_spool)
        keepalive.ensure(client_info, tunables().keepalive_s, live_runs)
        _warn("logd: run %s: a daemon answered; the deferred run is created and its rows are being delivered" % info.id)

    retry_create(w, create, created)
    return run


_RUN_ID = r"^[A-Za-z0-9_-]{1,64}$"


def parse_handle(handle: str) -> dict:
    import base64
    import json

    bad = TypeError("logd: that is not a run handle; pass the string returned by run.handle()")
    if not isinstance(handle, str) or not handle.startswith("logd1."):
        raise bad
    try:
        raw = handle[6:]
        p = json.loads(base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode())
    except Exception:
        raise bad from None
    if not isinstance(p, dict) or p.get("v") != 1 or not all(isinstance(p.get(k), str) for k in ("r", "t", "s")):
        raise bad
    return p


def attach(handle: str) -> Run:
    """Attaches to a run created elsewhere (its handle came from run.handle())."""
    p = parse_handle(handle)
    if forked_after_grpc():
        from .forks.forked import attach_via_relay

        return attach_via_relay(p)
    # The writer id goes with the attach: the daemon knows this writer from now on, so the owner's finish
    # waits for it (and ingests its spill file) even if it never opens a stream.
    writer_id = new_writer_id()
    req = pb.AttachRunRequest(client=client_info(), run_id=p["r"], run_token=p["t"], writer_id=writer_id)
    info, address = with_daemon("attach", lambda c, timeout_s: c.unary("AttachRun", req, timeout_s), ServiceAddress.parse(p["s"]))
    make = _writer_factory(info.id, p["t"], info.spool_dir)
    exit_hooks.install()
    run = Run(info, make(address, writer_id), p["t"], False, _warn, make)
    keepalive.ensure(client_info, tunables().keepalive_s, live_runs)
    return run


def finish_all(exit_code: int = 0) -> None:
    """Finishes every run this process still has open (what happens at exit too)."""
    for r in live_runs():
        r.finish(exit_code=exit_code)
