"""A run as the training code sees it: log(), config, summary, handle(),
finish(), and `with` (finish on leaving; crashed on an exception)."""
import base64
import os
import sys
import threading
import time
from array import array
from collections.abc import Mapping
from typing import Optional

from .media import device_values
from . import values
from .hot import RunBase as _RunBase
from ._lazy import pb, json
from .media import Media
from .transport.connection import CallError, ServiceAddress, keep_forever
from .finish_result import FinishResult
from .paths import tunables
from .forks.relay import wait_for_relays
from .writer import SpillError, Writer, new_writer_id

_live_lock = threading.Lock()
_live = []  # open runs of this process (and runs inherited over fork)


def live_runs():
    with _live_lock:
        return list(_live)


def _forget(run) -> None:
    with _live_lock:
        if run in _live:
            _live.remove(run)


class _Updates(dict):
    """run.config / run.summary: a dict whose update() also reaches the daemon."""

    def __init__(self, initial, kind, run):
        super().__init__(initial)
        self._kind = kind
        self._run = run

    def update(self, other=(), **kw):
        obj = dict(other, **kw)
        super().update(obj)
        self._run._update(self._kind, values.to_json(obj))

    def __setitem__(self, key, value):
        self.update({key: value})


# The address in a deferred run's handle while no daemon created it: attach() with it finds no daemon.
_NO_DAEMON = ServiceAddress("unix:/nonexistent", "deferred")


class Run(_RunBase):
    def __init__(self, info, writer: Writer, run_token: str, is_owner: bool, warn, make_writer):
        self.id = info.id
        self.name = info.name
        self.project = info.project
        self.group = info.group
        self._token = run_token
        self.is_owner = is_owner
        self._warn = warn
        self._make_writer = make_writer  # (address, writer_id) -> Writer, for a forked child
        self._writer = writer
        # A deferred run (deferred.py) has no daemon yet: adopt() sets the address once one created it.
        self._address = writer.conn.address if writer.conn is not None else _NO_DAEMON
        self._pid = os.getpid()
        self._next_step = 0
        # A continued run (init(resume=...)) goes on from its last stored step (its owner; an attached writer
        # counts its own steps from 0, as before).
        try:
            last = json.loads(info.metadata_json or "{}").get("lastStep") if is_owner else None
            if type(last) in (int, float) and last >= 0:
                self._next_step = int(last) + 1
        except (ValueError, AttributeError):
            pass
        self._known = set()  # metric names already checked
        self._row_media = []  # (key, Histogram | Image | Text) of the row being flattened
        # One-element CUDA tensors of the row being flattened, as (index in vals, host copy, device); the rows that
        # wait for such values, in log() order (device_values.py).
        self._row_device = []
        self._device_rows = device_values.DeviceRows()
        self._device_queue = self._device_rows.rows  # its deque: log() tests it at C speed
        self._defer_device = tunables().device_values_async
        self._ddp_watch = None  # run.watch(): its figures ride in the next row (ddp_watch.py)
        # The names of the last row that had no nesting and no skipped value, as a list: a row with the same names
        # (nearly every step) takes a short path, and every row of it shares this one list (the journal's cache
        # knows it by identity).
        self._flat_keys: list = []
        self._finish_lock = threading.Lock()
        self._finished: Optional[FinishResult] = None
        self._console = None  # this process's console capture when this run has it (console.py); ended by finish
        cfg = json.loads(info.config_json) if info.config_json else {}
        self.config = _Updates(cfg if isinstance(cfg, dict) else {}, "config", self)
        self.summary = _Updates({}, "summary", self)
        with _live_lock:
            _live.append(self)

    # ---- logging: the training thread's path, kept short ----

    def _log_slow(self, data: dict, step: Optional[int] = None, commit=None) -> None:
        """Appends one row of metrics. Returns at once; never blocks on I/O. (Run.log: the C one in logd/hot/
        journals the common row itself and hands every other row here; without it, this is Run.log.)"""
        if self._finished is not None:
            raise RuntimeError("logd: run %s is finished; log() after finish() is not stored" % self.id)
        if type(data) is dict:
            keys = list(data)
            if keys == self._flat_keys:
                # The same names as the last flat row (nearly every step): the values become f64 in one C call, which
                # refuses whatever is not a number (None, text, a nested dict, a big int): those take the long way.
                try:
                    vals = array("d", list(data.values()))
                    keys = self._flat_keys
                except Exception:
                    keys, vals = self._flatten(data, keys)
            else:
                keys, vals = self._flatten(data, keys)
        elif isinstance(data, Mapping):
            keys, vals = self._flatten(data, None)
        else:
            raise TypeError("logd: log() takes a dict of metrics, not %s" % type(data).__name__)
        dw = self._ddp_watch
        if dw is not None and dw._pending is not None:
            keys, vals = dw.merge(keys, vals)
        media = self._row_media
        if media:
            self._row_media = []
        copies = self._row_device
        if copies:
            self._row_device = []
        given = step is not None
        if not given:
            step = self._next_step
        elif type(step) is not int:
            step = self._check_step(step)
        elif step < 0:
            raise TypeError("logd: step %r must be a non-negative integer" % step)
        self._next_step = step + 1
        w = self._writer
        if w is None or w.pid != self._pid:
            w = self._writer_after_fork()
        if given:
            w.steps_given = True  # sent with every batch: rank health judges the pace of given steps only
        t = time.time()
        if media:
            for k, m in media:
                w.media(m.to_pb(pb, k, step, t), m.size)
            if not keys:
                return  # media only: no row of numbers
        if copies or self._device_queue:
            # Values still on the GPU (or an earlier row's): the row waits its turn, never the training thread.
            self._device_rows.push(step, t, keys, vals, copies, device_values.record_events(copies) if copies else ())
            self._device_rows.drain(w.add)
            return
        w.add(step, t, keys, vals)

    if _RunBase is object:
        log = _log_slow

    def watch(self, model, group=None):
        """Times this rank's arrival at DDP's gradient all-reduce and its wait there, every iteration, as the
        metrics logd/ddp/arrival, logd/ddp/wait_ms, logd/ddp/backward_ms and logd/ddp/buckets, carried by the next
        log() (ddp_watch.py). Call it once, before the first backward, with the DistributedDataParallel model."""
        from .ddp_watch import watch

        self._ddp_watch = watch(self, model, group)
        return self._ddp_watch

    def _drain_device_rows(self, timeout_s: float) -> str:
        """Hands on the rows that wait for GPU values, waiting up to timeout_s; '' or what was left behind."""
        rows = self._device_rows
        if not rows:
            return ""
        w = self._writer
        if w is None or w.pid != self._pid:
            return ""
        try:
            left = rows.drain(w.add, time.monotonic() + timeout_s)
        except Exception as e:  # a CUDA error (the context is gone at interpreter exit, say): those values are lost
            left = rows.drop()
            return "%d row(s) whose values were still on the GPU were not stored (%s: %s)" % (left, type(e).__name__, e)
        if left:
            rows.drop()
            return ("%d row(s) whose values were still on the GPU after %.1f s were not stored (the GPU did not get "
                    "to them)" % (left, timeout_s))
        return ""

    def _flatten(self, data, names):
        """(keys, values) of a row: nested dicts flattened, names checked (once each), values made numbers; its
        histograms, images and text go to _row_media, its one-element CUDA tensors to _row_device.
        `names`: the dict's own keys as a list, when data is a dict."""
        try:
            return self._flatten_row(data, names)
        except BaseException:
            self._row_media = []
            self._row_device = []
            raise

    def _flatten_row(self, data, names):
        keys = []
        vals = []
        self._row_media = []
        self._row_device = []
        known = self._known
        nested = False
        for k, v in data.items():
            t = type(v)
            if (t is float or t is int) and k in known:
                keys.append(k)
                vals.append(v)
            elif self._slow(k, v, keys, vals):
                nested = True
        # A dict's own keys differ; only flattening ({'a/b': 1, 'a': {'b': 2}}) can name one twice.
        if nested and len(set(keys)) != len(keys):
            self._row_media = []
            self._duplicate(keys)
        if names is not None and keys == names and not self._row_device:
            # No nesting, nothing skipped, nothing on a GPU (the short path would read it there and then): the next
            # row with these names takes the short path.
            self._flat_keys = keys
        return keys, vals

    def _slow(self, k, v, keys, vals, prefix: str = "") -> bool:
        """Adds one value the fast path did not take; True when it was a nested dict (flattened)."""
        key = prefix + k if type(k) is str else k
        if isinstance(v, Mapping):
            if type(k) is not str:
                values.check_key(k)
            for k2, v2 in v.items():
                self._slow(k2, v2, keys, vals, key + "/")
            return True
        if key not in self._known:
            values.check_key(key)
            self._known.add(key)
        if isinstance(v, Media):
            self._row_media.append((key, v))
            return False
        t = type(v)
        if t is not float and t is not int and self._defer_device and device_values.is_device_scalar(v):
            keys.append(key)
            vals.append(0.0)  # filled in when the copy has landed
            self._row_device.append(device_values.start_copy(len(vals) - 1, v))
            return False
        x = v if (t is float or t is int) else values.scalar(key, v)
        if x is not None:
            keys.append(key)
            vals.append(x)
        return False

    @staticmethod
    def _duplicate(keys) -> None:
        seen = set()
        for k in keys:
            if k in seen:
                raise TypeError(values.duplicate_key_message(k))
            seen.add(k)

    @staticmethod
    def _check_step(step) -> int:
        if isinstance(step, bool) or not isinstance(step, int):
            item = getattr(step, "item", None)
            step = item() if callable(item) else step
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise TypeError("logd: step %r must be a non-negative integer" % (step,))
        return int(step)

    def _update(self, kind: str, text: str) -> None:
        w = self._writer
        if w is None or w.pid != self._pid:
            w = self._writer_after_fork()
        w.update(kind, text)

    def _writer_after_fork(self) -> Writer:
        """In a forked child: the parent's writer (its thread, its channel) stayed in the parent.
        This process logs as a writer of its own, on a channel of its own."""
        if self._pid != os.getpid():
            self._pid = os.getpid()
            self.is_owner = False
            self._writer = self._make_writer(self._address, new_writer_id(), relay=True)
        return self._writer

    def _forked(self) -> None:
        """Called in a forked child: forget the parent's writer without touching it (its
        stream and channel are gRPC objects whose finalizers must never run here)."""
        self._finish_lock = threading.Lock()
        self._device_rows.drop()  # the parent's CUDA events and copies mean nothing here
        if self._writer is not None:
            forget = getattr(self._writer, "forget_after_fork", None)
            if forget is not None:
                forget()  # a relay's pipe: closed here, so the relay sees its own process end
            keep_forever(self._writer)
        self._writer = None

    def adopt(self, run_token: str, address: ServiceAddress) -> None:
        """A daemon created this deferred run: it chose the token (the writer took it, with the owner's writer id)."""
        self._token = run_token
        self._address = address

    # ---- the rest of the API ----

    @property
    def problem(self) -> Optional[str]:
        """What keeps records from being stored right now (a full disk, a daemon being
        restarted), as the daemon or the connection reported it; None when all is well."""
        w = self._writer
        if w is None or w.pid != os.getpid():
            return None
        return w.last_problem or getattr(w, "drop_note", None)

    def handle(self) -> str:
        """A string another process can pass to logd.attach() to log into this run."""
        w = self._writer
        addr: ServiceAddress = w.conn.address if w is not None and w.conn is not None else self._address
        p = {"v": 1, "s": addr.format(), "r": self.id, "t": self._token}
        raw = json.dumps(p, separators=(",", ":")).encode()
        return "logd1." + base64.urlsafe_b64encode(raw).decode().rstrip("=")

    def flush(self, timeout: float = 10.0) -> bool:
        """Sends what is buffered and waits (up to timeout seconds) until the daemon has it durably."""
        w = self._writer
        if w is None or w.pid != os.getpid():
            return True
        deadline = time.monotonic() + timeout
        lost = self._drain_device_rows(timeout)
        if lost:
            self._warn("logd: flush: " + lost)
        return w.wait_acked(max(0.0, deadline - time.monotonic())) and not lost

    def alert(self, title: str, text: str = "", level: str = "info", timeout: float = 5.0) -> bool:
        """Sends an alert to the daemon's sinks (docs/alerts.md), like its own alerts: with the run, its group and a
        link. level: "info", "warn" or "error". At most 10 per run in any minute (more are dropped, said on stderr).
        Returns whether it was queued; never raises for a daemon that cannot take it (it says why on stderr)."""
        if level not in ("info", "warn", "error"):
            raise ValueError("logd: alert level=%r must be 'info', 'warn' or 'error'" % (level,))
        if not isinstance(title, str) or not title.strip():
            raise ValueError("logd: alert title must be a non-empty string")
        import uuid

        from ._pb import logd_pb2 as pb

        w = self._writer
        conn = getattr(w, "conn", None) if w is not None else None
        if conn is None or getattr(w, "deferred", None):
            self._warn("logd: run.alert(%r): no daemon has this run yet (it is deferred); the alert is not sent" % title[:80])
            return False
        req = pb.AlertRequest(run_id=self.id, run_token=self._token, title=title[:200], text=str(text)[:4000], level=level, alert_id=uuid.uuid4().hex)
        try:
            res = conn.unary("Alert", req, timeout)
        except Exception as e:
            self._warn("logd: run.alert(%r) was not sent: %s" % (title[:80], e))
            return False
        if not res.queued:
            self._warn("logd: run.alert(%r) was not sent: %s" % (title[:80], res.message))
        return bool(res.queued)

    # How the process ends, for the daemon's end record (docs/story.md): exception_type, exception_message and
    # ended_at of FinishRunRequest, set by the exit hook (exit_hooks.py) or __exit__ before finish().
    _end_said = None

    def finish(self, exit_code: Optional[int] = None, timeout: Optional[float] = None) -> FinishResult:
        """Waits (up to timeout seconds, default 10) until everything is durable, then
        finishes the run (the owner) or detaches from it (an attached writer)."""
        self._stop_console()
        with self._finish_lock:
            if self._finished is None:
                self._finished = self._finish(0 if exit_code is None else int(exit_code), 10.0 if timeout is None else float(timeout))
            return self._finished

    def _finish(self, exit_code: int, timeout_s: float) -> FinishResult:
        env = getattr(self, "_environment", None)
        if env is not None and env.is_alive():
            env.join(min(1.0, timeout_s / 4))  # a short script finishes before its environment is sent
        w = self._writer
        if w is None or w.pid != os.getpid():
            _forget(self)  # a forked child that never logged: nothing of its own to finish
            return FinishResult("running", "this process never logged into run %s; nothing to finish" % self.id, False)
        if not isinstance(w, Writer):  # a forked child's relay finishes its own writer
            try:
                return w.finish(exit_code, timeout_s)
            finally:
                _forget(self)
        if w.deferred:
            # No daemon ever created the run: its rows go where a daemon will find them. Nothing to wait for.
            try:
                spilled = self._spill_and_say(w, exit_code if self.is_owner else None, "from which the daemon of this data "
                                              "dir creates and stores the run at its next start (or: logd sync --ingest FILE)")
                return FinishResult("finishing", "finish: the run is deferred (%s); %s" % (w.last_problem or "no daemon", spilled), False)
            finally:
                w.close()
                _forget(self)
        deadline = time.monotonic() + timeout_s
        lost = self._drain_device_rows(timeout_s / 2)
        if lost:
            self._warn("logd: finish: " + lost)
        try:
            if not w.wait_acked(max(0.001, deadline - time.monotonic())):
                problem = w.last_problem
                spilled = self._spill_and_say(w, exit_code if self.is_owner else None, "which the daemon ingests")
                msg = "finish: the daemon did not acknowledge everything within %d ms%s; %s" % (
                    timeout_s * 1000, " (%s)" % problem if problem else "", spilled)
                self._warn("logd: " + msg)
                return FinishResult("finishing", msg, True)
            if self.is_owner:
                wait_for_relays(self.id, deadline)
            try:
                res = self._finish_call(w, exit_code, deadline)
            except CallError as e:
                spilled = self._spill_and_say(w, exit_code if self.is_owner else None, "from which the daemon finalises the run once this process exits")
                msg = "finish: %s; %s" % (e, spilled)
                self._warn("logd: " + msg)
                return FinishResult("running", msg, True)
            if res.message and res.timed_out:
                self._warn("logd: " + res.message)
            return FinishResult(res.run.state, res.message, res.timed_out)
        finally:
            w.close()
            _forget(self)

    @staticmethod
    def _spill_and_say(w: Writer, exit_code: Optional[int], after: str) -> str:
        """Spills, and says where to (or, when even that failed, how many rows are lost and why): never raises."""
        try:
            path = w.spill(exit_code)
        except SpillError as e:
            return str(e)
        return "unsent records were written to %s, %s" % (path, after) if path else "nothing was left unsent"

    def _finish_call(self, w: Writer, exit_code: int, deadline: float):
        """FinishRun; sent again to the daemon found anew while time is left when the one
        it went to is gone (UNAVAILABLE). A daemon killed after it finalised the run
        refuses the retry with FAILED_PRECONDITION; the final state is then read back. A call that reaches a
        restarted daemon with the old token (UNAUTHENTICATED: restarted while this writer was idle, or not named
        by its service file yet) looks for it again, for about 5 s at most."""
        import grpc

        from ._pb import logd_pb2 as pb

        retried = False
        unauthenticated = 0  # answers of UNAUTHENTICATED so far: the daemon at the address is not the one found
        while True:
            left = max(0.001, deadline - time.monotonic())
            said = self._end_said or {}
            req = pb.FinishRunRequest(run_id=self.id, run_token=self._token, writer_id=w.writer_id, exit_code=exit_code,
                                      timeout_ms=int(left * 1000), last_seq=w.seq, **said)
            try:
                return w.conn.unary("FinishRun", req, left + 2)
            except CallError as e:
                if retried and e.code == grpc.StatusCode.FAILED_PRECONDITION:
                    run = w.conn.unary("GetRun", pb.GetRunRequest(run_id=self.id), max(0.001, deadline - time.monotonic()))
                    if run.state not in ("running", "finishing"):
                        return pb.FinishRunResponse(run=run)
                # UNAUTHENTICATED: the daemon was restarted since this writer found it (a new token at the same
                # socket), under the call or while the writer was idle, and its service file may lag its socket by
                # a moment: look for it again. A token still refused after about 5 s of that is wrong for good.
                if e.code == grpc.StatusCode.UNAUTHENTICATED:
                    unauthenticated += 1
                restarted = e.code == grpc.StatusCode.UNAUTHENTICATED and unauthenticated <= 25
                if (e.code != grpc.StatusCode.UNAVAILABLE and not restarted) or deadline - time.monotonic() < 0.5:
                    raise
                retried = True
                time.sleep(0.2)
                w.rediscover()

    def _stop_console(self) -> None:
        """Gives sys.stdout and sys.stderr back; what the capture still held goes with the last batch."""
        c, self._console = self._console, None
        if c is not None and os.getpid() == c._pid:
            c.stop()

    def spill_for_exit(self, exit_code: int) -> None:
        """At a fatal signal: hand everything unsent to the daemon through a spill file (no network)."""
        self._stop_console()
        w = self._writer
        if w is None or w.pid != os.getpid():
            return
        if self._finished is not None or self._finish_lock.locked():
            w.spill(None, lock_timeout_s=0.5)  # finish() is under way: keep its records, no second finish
            return
        w.spill(exit_code if self.is_owner else None, lock_timeout_s=0.5)
        _forget(self)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None and not issubclass(exc_type, (KeyboardInterrupt, SystemExit)) and self._end_said is None:
            from .end_said import exception_said

            self._end_said = exception_said(exc_type, exc)
        if exc_type is None:
            self.finish()
        elif issubclass(exc_type, KeyboardInterrupt):
            self.finish(exit_code=130)
        elif issubclass(exc_type, SystemExit):
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            self.finish(exit_code=code)
        else:
            self.finish(exit_code=1)
        return False

    def __repr__(self):
        return "<logd.Run %s project=%r name=%r group=%r>" % (self.id, self.project, self.name, self.group)


def _after_fork_in_child() -> None:
    global _live_lock
    _live_lock = threading.Lock()
    for r in _live:
        r._forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
