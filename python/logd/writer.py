"""The client side of one writer's stream.

log() runs on the training thread and only appends a row (flat key and value
lists) to the open segment, and to the crash journal, under a short lock
(segments.py). A background thread seals the closed segments into columnar
RecordBatches (keys interned into the writer's dictionary, encoded once),
keeps each batch until the daemon acknowledges it as durable, re-sends the
unacknowledged ones after a reconnect (the daemon drops duplicates by seq),
and the exit paths write them to a spill file that the daemon ingests. What
the process never got to send (SIGKILL, OOM) the daemon reads from the
journal.
"""
from __future__ import annotations

import os
import queue
import socket
import threading
import time
from array import array
from typing import Callable, List, Optional, Tuple

from . import _ids
from ._lazy import grpc, pb

from .spool import spill
from . import stacks
from .transport.connection import Connection, ServiceAddress, connection_for, drop_connection
from .transport.batch_encoding import _u32, _le, _values, encode_batch
from .spool.overflow import Overflow
from .paths import resolve_paths
from .spool.segments import OpenSegments
# A stream whose OpenWriter got no answer in this long is given up and opened again (the TypeScript client's OPEN_ANSWER_MS).
_OPEN_ANSWER_S = 10
# Codes after which re-opening cannot help: PERMISSION_DENIED, NOT_FOUND, FAILED_PRECONDITION.
def _final_codes():
    return (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION)


def new_writer_id() -> str:
    return "w-" + _ids.token_hex(6)


class SpillError(RuntimeError):
    """Records that could not be handed to the daemon, not even through a spill file: lost, unless the crash journal holds them."""


class _Stream:
    """One Write call: requests go through a queue that gRPC's own thread drains."""

    def __init__(self, conn: Connection):
        self.requests: "queue.SimpleQueue" = queue.SimpleQueue()
        self.call = conn.write(iter(self.requests.get, None), metadata=conn.metadata)
        self.opened = False
        self.started = time.monotonic()

    def send(self, data: bytes) -> None:
        self.requests.put(data)

    def close(self) -> None:
        self.requests.put(None)
        try:
            self.call.cancel()
        except Exception:
            pass


class Writer(OpenSegments):
    """journal_mb: the crash journal's size (LOGD_JOURNAL_MB; 0: none). on_acked(seq): called (holding _cv) as
    acknowledgements arrive; the relay process passes them on to the forked child that journals its rows."""

    def __init__(self, address: ServiceAddress, run_id: str, run_token: str, writer_id: str, client: pb.ClientInfo,
                 flush_interval_s: float, warn, max_buffer_bytes: int = 64 * 1024 * 1024, spool_dir: Optional[str] = None,
                 journal_mb: float = 0, on_acked: Optional[Callable[[int], None]] = None, deferred: Optional[dict] = None):
        self.run_id = run_id
        self.run_token = run_token
        self.writer_id = writer_id
        self._client = client
        self._flush_interval_s = flush_interval_s
        self._max_buffer_bytes = max_buffer_bytes
        self._warn = warn
        self._on_acked = on_acked
        # A deferred run (deferred.py): no daemon created it yet, so nothing is sent and there is no connection
        # (and no journal) until undefer(); a spill carries this create request, so the daemon that ingests it
        # creates the run.
        self.deferred = deferred
        self.conn: Optional[Connection] = None if deferred else connection_for(address)
        if deferred:
            journal_mb = 0
        self.pid = os.getpid()
        # The spool of the daemon that owns the run (RunInfo.spool_dir), for journal, overflow and spill files.
        self.spool_dir = spool_dir or resolve_paths().spool_dir
        # The training thread's rows, cut into segments, and the crash journal (segments.py).
        self._init_segments(self.spool_dir, journal_mb)
        if self.conn is not None:
            stacks.register(self.spool_dir)  # the daemon may ask for this process's stacks when its group stalls
        # Everything below is guarded by _cv.
        self._cv = threading.Condition(threading.Lock())
        self._ids = {}
        self.keys: List[str] = []
        self._keys_sealed = 0
        self.seq = 0
        self.acked_seq = 0
        self._unacked: List[Tuple[int, bytes]] = []
        self._unacked_bytes = 0
        self._overflow = Overflow(os.path.join(self.spool_dir, "%s--%s.overflow" % (run_id, writer_id)))
        # Rows dropped because memory and disk were both full; the count rides on every batch (dropped_rows).
        self.dropped_rows = 0
        # The code gave a step explicitly at least once (run.log(step=...)): rank health judges these steps' pace.
        self.steps_given = False
        self.drop_note: Optional[str] = None
        self._sent = 0  # unacked[:_sent] went out on the current stream
        self._stream: Optional[_Stream] = None
        self._reconnect_at = 0.0
        self._backoff = 0.05
        self._rediscover = False
        self._auth_retries = 0
        self._wake = False
        self.closed = False
        self.run_final: Optional[str] = None
        self.last_problem: Optional[str] = None
        self._thread = threading.Thread(target=self._loop, name="logd-writer-" + run_id, daemon=True)
        self._thread.start()

    # ---- the training thread: add() and update() (segments.py) ----

    def undefer(self, address: ServiceAddress, run_token: str, writer_id: str, spool_dir: str) -> None:
        """A daemon created the deferred run: from now on this writer is its owner there, and what waited goes out
        (the batches keep their seqs and the dictionary its ids: the stream's open sends the names sealed so far)."""
        conn = connection_for(address)
        with self._cv:
            if not self.deferred or self.closed:
                return  # finish() came first: the rows and the create request are in the deferred spill file
            self.deferred = None
            self.run_token = run_token
            self.writer_id = writer_id
            self.spool_dir = spool_dir
            self.conn = conn
            self.last_problem = None
            self._wake = True
            self._cv.notify_all()

    def kick(self) -> None:
        with self._cv:
            self._wake = True
            self._cv.notify_all()

    # ---- sealing ----

    def _seal(self, lock_timeout_s: float = -1) -> bool:
        """Encodes the segments the training thread closed, and the open one, into batches (caller holds _cv).
        False when the locks could not be had within lock_timeout_s (see spill())."""
        if not self._ring_lock.acquire(timeout=lock_timeout_s):
            return False
        try:
            taken = self._take_raw(lock_timeout_s)
            if taken is None:
                return False
            j, segs = taken
            for seq, a, b, rows, updates in segs:
                self._seal_one(seq, rows, updates, j if j is not None and b > a else None, a, b)
            return True
        finally:
            self._ring_lock.release()

    def _seal_one(self, seq: int, rows, updates, journal=None, ring_from: int = 0, ring_to: int = 0) -> None:
        """One batch: the rows in [ring_from, ring_to) of the journal, then those kept in memory."""
        ids = self._ids
        steps = array("d")
        times = array("d")
        counts = _u32()
        kid = _u32()
        values = array("d")
        n = journal.columns(ring_from, ring_to, self._wire_ids, steps, times, counts, kid, values) if journal else 0
        for step, t, keys, row_values in rows:
            steps.append(step)
            times.append(t)
            counts.append(len(keys))
            for k in keys:
                i = ids.get(k)
                if i is None:
                    i = ids[k] = len(self.keys)
                    self.keys.append(k)
                kid.append(i)
            values.extend(row_values if type(row_values) is array else _values(row_values))  # array: log()'s short path
        n += len(rows)
        self.seq = seq
        batch = pb.RecordBatch(
            seq=seq, new_keys=self.keys[self._keys_sealed :], new_keys_first=self._keys_sealed, rows=n,
            steps=_le(steps), times=_le(times), counts=_le(counts), key_ids=_le(kid), values=_le(values),
            summary_json=[j for kind, j in updates if kind == "summary"],
            config_json=[j for kind, j in updates if kind == "config"], dropped_rows=self.dropped_rows,
            steps_given=self.steps_given, console_json=[j for kind, j in updates if kind == "console"],
            media=[m for kind, m in updates if kind == "media"],
        )
        keys_before = self._keys_sealed
        self._keys_sealed = len(self.keys)
        data = encode_batch(batch)
        if self._overflow.count or self._unacked_bytes + len(data) > self._max_buffer_bytes:
            if not self._overflow.count:
                self._problem("buffer: %d MB not yet acknowledged by the daemon; further records wait on disk until it catches up"
                              % (self._unacked_bytes // 1048576))
            failed = self._overflow.push(seq, data)
            if failed is not None:
                self._drop(batch, keys_before, failed)
            return
        self._unacked.append((seq, data))
        self._unacked_bytes += len(data)

    def _wire_ids(self, names) -> bytes:
        """The ids of these names in this writer's dictionary, as the key_ids column holds them (new ones added)."""
        ids = self._ids
        out = _u32()
        for k in names:
            i = ids.get(k)
            if i is None:
                i = ids[k] = len(self.keys)
                self.keys.append(k)
            out.append(i)
        return _le(out)

    def _drop(self, batch, keys_before: int, why: OSError) -> None:
        """Memory is at its bound and the spool cannot take the batch (a full disk): its rows are dropped, counted
        exactly. Logging never raises an I/O error into training. The batch goes on without rows: its seq (the
        journal sealed its rows under it; seqs are never reused), its new names, its config/summary updates and the
        dropped count, which lands in the run's metadata. That small batch waits in memory past the bound, behind
        what waits on disk (caller holds _cv)."""
        rows = batch.rows
        if rows:
            self._count_dropped(rows, why)
        empty = encode_batch(pb.RecordBatch(
            seq=batch.seq, new_keys=self.keys[keys_before : self._keys_sealed], new_keys_first=keys_before, rows=0,
            summary_json=batch.summary_json, config_json=batch.config_json, dropped_rows=self.dropped_rows,
            steps_given=self.steps_given, console_json=batch.console_json))
        if self._overflow.count:
            self._overflow.keep(batch.seq, empty)
        else:
            self._unacked.append((batch.seq, empty))
            self._unacked_bytes += len(empty)

    def _count_dropped(self, rows: int, why: OSError) -> None:
        first = self.dropped_rows == 0
        self.dropped_rows += rows
        code = getattr(why, "strerror", None) or str(why)
        self.drop_note = self.last_problem = (
            "%d rows dropped: %d MB wait for the daemon (LOGD_MAX_BUFFER_MB) and the spool cannot hold more (%s); "
            "the count is recorded in the run's metadata (droppedRows)" % (self.dropped_rows, self._unacked_bytes // 1048576, code))
        if first:
            self._warn("logd: run %s: %s. Free disk space under %s, or raise LOGD_MAX_BUFFER_MB; further drops are counted "
                       "without more warnings" % (self.run_id, self.last_problem, self.spool_dir))

    def _refill(self) -> None:
        """Moves batches back from disk once acknowledgements freed memory (caller holds _cv)."""
        half = self._max_buffer_bytes / 2
        if not self._overflow.count or self._unacked_bytes > half:
            return
        for seq, data in self._overflow.take(half - self._unacked_bytes):
            self._unacked.append((seq, data))
            self._unacked_bytes += len(data)

    # ---- the background thread ----

    def _loop(self) -> None:
        while True:
            with self._cv:
                if not self._wake:
                    self._cv.wait(self._flush_interval_s)
                self._wake = False
                if self.closed:  # finish() delivered everything, or spilled what it could not
                    return
                try:
                    self._give_up_unanswered()
                    self._seal()
                    self._pump()
                except Exception as e:  # never let the writer thread die silently
                    self._problem("writer: %s: %s" % (type(e).__name__, e))

    def _pump(self) -> None:
        """Opens a stream when there is something to send, and sends (caller holds _cv)."""
        if self.run_final or self.deferred or not (self._unacked or self._overflow.count):
            return
        if self._stream is None:
            if time.monotonic() < self._reconnect_at:
                return
            if self._rediscover:
                self._cv.release()  # discovery may start a daemon: never hold the lock over it
                try:
                    ok = self.rediscover()
                finally:
                    self._cv.acquire()
                if ok:
                    self._rediscover = False
                if self._stream is not None or self.run_final:
                    return
            self._open()
            return
        if not self._stream.opened:
            return
        self._refill()
        while self._sent < len(self._unacked):
            self._stream.send(self._unacked[self._sent][1])
            self._sent += 1

    def _give_up_unanswered(self) -> None:
        """A daemon answers OpenWriter at once: a stream still unanswered after _OPEN_ANSWER_S is stuck (a
        connection nobody serves) and is cancelled, so that the daemon is looked for anew (caller holds _cv)."""
        s = self._stream
        if s is not None and not s.opened and time.monotonic() - s.started > _OPEN_ANSWER_S:
            self._problem("reconnect: the daemon did not answer the stream's open within %d s" % _OPEN_ANSWER_S)
            s.close()  # _read sees CANCELLED and _on_broken looks for the daemon again

    def _open(self) -> None:
        s = _Stream(self.conn)
        self._stream = s
        self._sent = 0
        s.send(pb.WriteRequest(open=pb.OpenWriter(
            run_id=self.run_id, run_token=self.run_token, writer_id=self.writer_id, client=self._client,
            keys=self.keys[: self._keys_sealed],
        )).SerializeToString())
        threading.Thread(target=self._read, args=(s,), name="logd-acks-" + self.run_id, daemon=True).start()

    def _read(self, s: _Stream) -> None:
        err = None
        try:
            for m in s.call:
                with self._cv:
                    if s is not self._stream:
                        return
                    self._on_message(s, m)
        except grpc.RpcError as e:
            err = e
        except Exception as e:  # a dying interpreter, a closed channel
            err = e
        with self._cv:
            self._on_broken(s, err)

    def _on_message(self, s: _Stream, m) -> None:
        kind = m.WhichOneof("kind")
        if kind == "opened":
            s.opened = True
            self._backoff = 0.05
            self._auth_retries = 0
            self.last_problem = None
            self._acked(m.opened.last_seq)
            self._sent = 0  # everything unacknowledged goes out again on this stream
            self._pump()
        elif kind == "ack":
            self.last_problem = None
            self._acked(m.ack.seq)
        elif kind == "control":
            c = m.control
            if c.kind == "rejected":
                self._warn("logd: run %s: %s" % (self.run_id, c.message))
                self._drop_seq(c.seq)
            elif c.kind == "run_final":
                self.run_final = c.message or "the run is final"
            elif c.kind == "storage":
                if self.last_problem != c.message:
                    self._warn("logd: daemon: %s" % c.message)
                self.last_problem = c.message
        self._cv.notify_all()

    def _acked(self, seq: int) -> None:
        if seq > self.acked_seq:
            self.acked_seq = seq
            self._tell_acked()
        n = 0
        while n < len(self._unacked) and self._unacked[n][0] <= seq:
            self._unacked_bytes -= len(self._unacked[n][1])
            n += 1
        if n:
            del self._unacked[:n]
            self._sent = max(0, self._sent - n)
            if self._overflow.count:
                self._refill()
                self._pump()

    def _drop_seq(self, seq: int) -> None:
        for i, (s, _) in enumerate(self._unacked):
            if s == seq:
                self._unacked_bytes -= len(self._unacked[i][1])
                del self._unacked[i]
                if i < self._sent:
                    self._sent -= 1
                break
        if seq > self.acked_seq and all(s > seq for s, _ in self._unacked):
            self.acked_seq = seq  # a refused batch is never stored: the journal need not keep it either
            self._tell_acked()

    def _tell_acked(self) -> None:
        self.journal_acked(self.acked_seq)
        if self._on_acked is not None:
            self._on_acked(self.acked_seq)

    def _on_broken(self, s: _Stream, err) -> None:
        if s is not self._stream:
            return
        self._stream = None
        self._cv.notify_all()
        if self.run_final or (self.closed and not self._unacked):
            return
        code = err.code() if isinstance(err, grpc.RpcError) else None
        if code == grpc.StatusCode.CANCELLED and self.closed:
            return
        self._rediscover = True
        auth_failed = code == grpc.StatusCode.UNAUTHENTICATED and self._auth_retries >= 3
        if code == grpc.StatusCode.UNAUTHENTICATED:
            self._auth_retries += 1
        if code in _final_codes() or auth_failed:
            self.run_final = "the daemon refused the stream: %s" % err.details()
            self._warn("logd: run %s: %s" % (self.run_id, self.run_final))
            return
        why = (err.details() if isinstance(err, grpc.RpcError) else str(err)) if err else "stream closed"
        self.last_problem = "reconnect: %s" % why
        self._reconnect_at = time.monotonic() + self._backoff
        self._backoff = min(self._backoff * 2, 1.0)

    def _problem(self, msg: str) -> None:
        if self.last_problem != msg:
            self._warn("logd: run %s: %s" % (self.run_id, msg))
        self.last_problem = msg

    def rediscover(self) -> bool:
        """Looks for the daemon again (it may have restarted with a new token); False when none is found."""
        from .transport.discovery import find_daemon

        if self.conn is None:
            return False  # deferred: the retry thread (deferred.py) brings the daemon
        try:
            addr = find_daemon(ignore_env=True)
        except Exception:
            return False
        if addr != self.conn.address:
            drop_connection(self.conn)
            self.conn = connection_for(addr)
        return True

    def connect(self) -> None:
        """Opens the stream now, with nothing to send yet: the daemon then knows this writer."""
        with self._cv:
            if self._stream is None and not self.run_final and not self.closed and not self.deferred:
                self._open()

    def wait_opened(self, timeout_s: float) -> bool:
        """Waits until the daemon answered the stream's open (it then knows this writer)."""
        deadline = time.monotonic() + timeout_s
        with self._cv:
            while not (self._stream is not None and self._stream.opened) and not self.run_final:
                if self.deferred:
                    return False
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                if self._stream is None and time.monotonic() >= self._reconnect_at:
                    self._open()
                self._cv.wait(min(left, 0.05))
            return self._stream is not None

    # ---- waiting, closing, spilling ----

    def wait_acked(self, timeout_s: float) -> bool:
        """Seals what is buffered and waits, up to timeout_s, until the daemon has all of it durably."""
        deadline = time.monotonic() + timeout_s
        with self._cv:
            self._seal()
            target = self.seq
            if self.deferred:
                return target == 0  # no daemon created the run yet: nothing can be acknowledged
            self._pump()
            while self.acked_seq < target and not self.run_final:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cv.wait(min(left, 0.05))
                self._pump()
            return self.acked_seq >= target

    def close(self) -> None:
        with self._cv:
            self.closed = True
            # Removed when all of it is acknowledged (or spilled, see spill()); else the daemon reads it after this exit.
            self.close_journal(not self._unacked and not self._overflow.count)
            if not self._unacked:
                self._overflow.clear()
            s, self._stream = self._stream, None
            self._cv.notify_all()
        if s is not None:
            s.close()

    def spill(self, exit_code: Optional[int], lock_timeout_s: float = 2.0) -> Optional[str]:
        """Writes everything not acknowledged to a spill file; exit_code set asks the daemon to finish the run.

        Used at exit and from signal handlers: it never waits long on a lock (the
        interrupted thread may hold it) and does no network I/O.
        """
        got = self._cv.acquire(timeout=lock_timeout_s)
        try:
            # Sealed: every row log() accepted is in the spill or acknowledged. Not (a lock held by the interrupted
            # thread): the rows not sealed stay in the journal, which is then kept for the daemon.
            sealed = got and self._seal(lock_timeout_s)
            pending = [b for _, b in self._unacked] + [b for _, b in self._overflow.all()]
            if not pending and exit_code is None:
                if sealed:
                    self.close_journal(True)  # everything in it is acknowledged
                return None
            header = {
                "runId": self.run_id, "runToken": self.run_token, "writerId": self.writer_id, "pid": os.getpid(),
                "host": socket.gethostname(), "keys": list(self.keys[: self._keys_sealed]), "exitCode": exit_code,
            }
            name = None
            if self.deferred:
                header["create"] = self.deferred  # the daemon that ingests the file creates the run from it
                name = spill.deferred_spill_file_name(self.run_id, self.writer_id)
            try:
                try:
                    path = spill.write_spill(self.spool_dir, self.run_id, self.writer_id, header, pending, name)
                except OSError as first:
                    # The spool's disk is full (or refuses files): the user's private fallback, which the daemon of
                    # this data dir also reads (at start, and every few seconds while it runs).
                    # Only a deferred run's spool is this process's own choice, for its own data dir; a run a daemon
                    # created spills to that daemon's spool only (another user or HOME may own it).
                    other = spill.fallback_for(self.spool_dir) if self.deferred else None
                    if other is None:
                        raise
                    path = spill.write_spill(other, self.run_id, self.writer_id, header, pending, name)
                    self._warn("logd: run %s: unsent rows could not be written to %s (%s); written to %s instead, which the daemon of this data dir stores"
                               % (self.run_id, self.spool_dir, first.strerror or first, path))
            except OSError as e:
                rows = sum(pb.WriteRequest.FromString(b).batch.rows for b in pending)
                j = self.journal
                fate = "are lost" if j is None else (
                    "stay in the crash journal %s, which the daemon reads once this process exits%s" % (
                        j.path, " (except %d rows that did not fit it)" % j.not_journaled if j.not_journaled else ""))
                raise SpillError("run %s: %d unsent rows could not be written to %s (%s) and %s%s" % (
                    self.run_id, rows, os.path.join(self.spool_dir, name or spill.spill_file_name(self.run_id, self.writer_id)),
                    e.strerror or e, fate, ", besides %d rows dropped before" % self.dropped_rows if self.dropped_rows else "")) from None
            if sealed:
                # Everything the journal holds is acknowledged or in the spill file now (the daemon would drop the
                # journal's copies as duplicates): no need to leave it.
                self.close_journal(True)
            return path
        finally:
            if got:
                self._cv.release()
