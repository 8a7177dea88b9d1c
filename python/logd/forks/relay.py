"""How a forked child logs without gRPC.

gRPC's state does not survive fork(): grpcio shares its epoll set and threads
with the parent, so a child that so much as opens a channel can break the
parent's connection (observed: "Bad file descriptor" in the child, the
parent's calls then hanging), and grpcio's own fork support is off by default
and changes between releases. So a forked child never calls into gRPC. When
it logs, it starts a relay: a fresh interpreter (`python -m logd.forks._relay_main`, a
fork+exec, so nothing inherited) that holds a writer of its own on a
connection of its own. The child's log() appends to a buffer as usual, and
to the child's own crash journal (segments.py, journal.py); a background
thread hands the rows to the relay through a pipe, as batches with their
seqs, which the relay sends on as they are.

The journal is the child's, under the relay's writer id, because the child
may be SIGKILLed before its rows reach the relay. The relay passes the
daemon's acknowledgements back to the child, which frees them in the
journal; whatever is left in it when the child dies, the daemon reads, and
drops what the relay delivered as well (same writer, same seqs).

The relay outlives the child if need be: when the pipe closes (the child
exited, with os._exit as multiprocessing and DataLoader workers do, or was
killed) it delivers what it has, detaches its writer and exits.

Pipe messages are length-prefixed pickles (the two ends are one user's
processes of one program):
  child -> relay  ("open", service, run_id, run_token, writer_id, client_info bytes, spool_dir)
                  ("batches", [(seq, rows, updates), ...]) | ("sync", timeout) | ("finish", exit_code, timeout)
  relay -> child  ("acked", seq), whenever the daemon acknowledges
                  ("ok", acked, problem, acked_seq) | ("finished", state, message, timed_out, acked_seq), answers
"""
from __future__ import annotations

import os
import pickle
import queue
import struct
import sys
import threading
import time
from typing import Optional

from ..finish_result import FinishResult
from ..spool.segments import OpenSegments


def _send(f, msg) -> None:
    data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
    f.write(struct.pack("<I", len(data)) + data)
    f.flush()


def _recv(f):
    head = f.read(4)
    if len(head) < 4:
        return None
    (n,) = struct.unpack("<I", head)
    data = f.read(n)
    if len(data) < n:
        return None
    return pickle.loads(data)


def relay_marker(run_id: str, writer_id: str) -> str:
    """While a forked child's relay is not yet known to the daemon, a marker says so: the
    run's owner waits for it before finishing, so that the relay's records are not refused."""
    from ..paths import resolve_paths

    return os.path.join(resolve_paths().spool_dir, "%s--%s.relay" % (run_id, writer_id))


def _write_marker(path: str, relay_pid: int = 0) -> None:
    """The marker holds the pids to watch: the child's, then its relay's once started."""
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        tmp = "%s.%d.tmp" % (path, os.getpid())
        with open(tmp, "w") as f:
            f.write("%d %d" % (os.getpid(), relay_pid))
        os.replace(tmp, path)
    except OSError:
        pass  # without a marker only the owner's wait is lost, never records


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _running(pid: int) -> bool:
    """Alive and not a zombie (an exited relay its parent has not reaped yet)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
        return stat[stat.rindex(")") + 2] not in "ZX"
    except (OSError, ValueError, IndexError):
        from ..transport.discovery import pid_alive

        return not os.path.exists("/proc/self") and pid_alive(pid)


def wait_for_relays(run_id: str, deadline: float) -> None:
    """The owner's side: waits (until deadline, monotonic) until every live forked child that
    logs into this run has its relay registered with the daemon."""
    import glob

    from ..paths import resolve_paths

    pattern = os.path.join(resolve_paths().spool_dir, glob.escape(run_id) + "--*.relay")
    while True:
        waiting = []
        for path in glob.glob(pattern):
            try:
                with open(path) as f:
                    pids = [int(x) for x in f.read().split()]
            except (OSError, ValueError):
                continue
            if any(pid > 0 and _running(pid) for pid in pids):
                waiting.append(path)
            else:
                _remove(path)  # its process ended before its relay came up; the relay, if any, spills
        if not waiting or time.monotonic() >= deadline:
            return
        time.sleep(0.02)


class _Address:
    def __init__(self, service: str):
        from ..transport.connection import ServiceAddress

        self.address = ServiceAddress.parse(service)


class RelayWriter(OpenSegments):
    """The writer of a forked child: same surface as writer.Writer, no gRPC in this process."""

    def __init__(self, address, run_id: str, run_token: str, writer_id: str, client, flush_interval_s: float, warn,
                 spool_dir: str = "", journal_mb: float = 0, proc: Optional[subprocess.Popen] = None):
        """proc: a relay already started, that created or attached the run itself (forked.py): the daemon knows its
        writer already, so no marker is needed."""
        self.run_id = run_id
        self.spool_dir = spool_dir  # the owning daemon's spool: the relay spills there, the child journals there
        self.run_token = run_token
        self.writer_id = writer_id
        self.pid = os.getpid()
        self.seq = 0  # the last batch handed to the relay
        self.acked_seq = 0
        self.last_problem: Optional[str] = None
        self._service = address.format()
        self.conn = _Address(self._service)
        self._client = client.SerializeToString()
        self._flush_interval_s = flush_interval_s
        self._warn = warn
        self._init_segments(spool_dir, journal_mb)
        self._answers: "queue.SimpleQueue" = queue.SimpleQueue()  # the relay's answers; None: it is gone
        self._io = threading.Lock()  # one request/answer on the pipe at a time
        self._proc: Optional[subprocess.Popen] = proc
        self._failed: Optional[str] = None
        self.closed = False
        self._said_bye = False
        self._marker = None if proc is not None else relay_marker(run_id, writer_id)
        if self._marker:
            _write_marker(self._marker)
        if proc is not None:
            threading.Thread(target=self._read, args=(proc.stdout,), name="logd-relay-acks-" + run_id, daemon=True).start()
        self._thread = threading.Thread(target=self._loop, name="logd-relay-" + run_id, daemon=True)
        self._thread.start()
        mp_util = sys.modules.get("multiprocessing.util")
        if mp_util is not None:
            # multiprocessing children (DataLoader workers among them) end with os._exit,
            # which runs no atexit hook but does run these finalizers first.
            mp_util.Finalize(None, self.close, exitpriority=100)

    def _start(self) -> bool:
        """Starts the relay (caller holds _io); False when it cannot run."""
        if self._proc is not None:
            return self._proc.poll() is None
        if self._failed:
            return False
        try:
            import subprocess  # on first use: `import logd` does not pay for it

            self._proc = subprocess.Popen(
                [sys.executable, "-m", "logd.forks._relay_main"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True,
            )
            _write_marker(self._marker, self._proc.pid)
            threading.Thread(target=self._read, args=(self._proc.stdout,), name="logd-relay-acks-" + self.run_id,
                             daemon=True).start()
            _send(self._proc.stdin, ("open", self._service, self.run_id, self.run_token, self.writer_id, self._client, self.spool_dir))
            return True
        except (OSError, ValueError) as e:
            if self._marker:
                _remove(self._marker)
            self._failed = "could not start the relay of this forked process (%s -m logd.forks._relay_main): %s" % (sys.executable, e)
            self.last_problem = self._failed
            self._warn("logd: run %s: %s; %s" % (self.run_id, self._failed, "its rows stay in its crash journal, which the daemon "
                       "reads once this process exits" if self.journal is not None else "its records are lost"))
            return False

    def _read(self, f) -> None:
        """The relay's messages: acknowledgements free the journal; answers go to _ask."""
        while True:
            try:
                msg = _recv(f)
            except Exception:  # a pipe closed under the read, a dying interpreter
                msg = None
            if msg is None:
                self._answers.put(None)
                return
            if msg[0] == "acked":
                self._acked(msg[1])
            else:
                self._answers.put(msg)

    def _acked(self, seq: int) -> None:
        if seq > self.acked_seq:
            self.acked_seq = seq
            self.journal_acked(seq)

    def _push(self, lock_timeout_s: float = -1) -> None:
        """Hands the closed batches to the relay (caller holds _io). Those it cannot take stay in the journal,
        for the daemon to read once this process is gone."""
        segs = self._take_segments(lock_timeout_s)
        if not segs:
            return
        if self._start():
            try:
                _send(self._proc.stdin, ("batches", segs))
                self.seq = segs[-1][0]
            except (OSError, ValueError) as e:
                self.last_problem = "relay: %s" % e

    def _loop(self) -> None:
        with self._io:
            self._start()  # at once: the daemon learns of this writer early, so the owner's finish waits for it
        while not self.closed:
            time.sleep(self._flush_interval_s)
            with self._io:
                if self.closed:
                    return
                self._push()

    def _ask(self, msg, timeout_s: float):
        """One request and its answer; None when the relay is gone or does not answer in time."""
        with self._io:
            self._push()
            if not self._start():
                return None
            while True:  # the late answer of an earlier request that timed out is not this one's
                try:
                    if self._answers.get_nowait() is None:
                        return None
                except queue.Empty:
                    break
            try:
                _send(self._proc.stdin, msg)
            except (OSError, ValueError):
                return None
            try:
                return self._answers.get(timeout=timeout_s + 2)
            except queue.Empty:
                return None

    def wait_acked(self, timeout_s: float) -> bool:
        ans = self._ask(("sync", timeout_s), timeout_s)
        if ans is None:
            return False
        self.last_problem = ans[2]
        self._acked(ans[3])
        return bool(ans[1])

    def finish(self, exit_code: int, timeout_s: float):
        ans = self._ask(("finish", exit_code, timeout_s), timeout_s + 2)
        if ans is not None:
            self._acked(ans[4])
        self.close()
        if ans is None:
            return FinishResult("running", "finish: the relay of this forked process did not answer; it delivers what it has when this process exits", True)
        return FinishResult(ans[1], ans[2], ans[3])

    def spill(self, exit_code, lock_timeout_s: float = 2.0):
        # The relay holds the records; it delivers them when this process's end closes the pipe. The journal stays
        # (its rows are not acknowledged yet): the daemon drops the copies the relay delivered too.
        if self._io.acquire(timeout=lock_timeout_s):
            try:
                self._push(lock_timeout_s)  # a signal that interrupted log() on this thread: its rows stay in the journal
                self._bye(exit_code)
            finally:
                self._io.release()
        return None

    def _bye(self, exit_code: Optional[int]) -> None:
        """Tells the relay how this process ends (caller holds _io): the relay of a run this process created
        finishes it with that code once the pipe closes (0 for a plain close, 1 when the pipe closes unsaid)."""
        p = self._proc
        if self._said_bye or p is None or p.stdin is None or p.poll() is not None:
            return
        self._said_bye = True
        try:
            _send(p.stdin, ("bye", exit_code))
        except (OSError, ValueError):
            pass

    def forget_after_fork(self) -> None:
        """In a process forked from this one: the pipe to this relay is the parent's. Its descriptors are closed
        here (the file objects, whose locks a parent thread may have held, are never touched), so that the relay
        sees the parent's end when the parent ends, not when the last of its forks does."""
        p = self._proc
        for f in (p.stdin, p.stdout) if p is not None else ():
            try:
                if f is not None:
                    os.close(f.fileno())
            except (OSError, ValueError):
                pass

    def close(self) -> None:
        """Hands over what is buffered and closes the pipe: the relay delivers it, detaches and exits."""
        if self._io.acquire(timeout=2.0):
            try:
                if not self.closed:
                    self._push()
                    self._bye(None)
            finally:
                self._io.release()
        self.closed = True
        # Removed when the daemon has everything (a finish that was answered); else the daemon reads it after this exit.
        self.close_journal(self.acked_seq >= self._last_seq)
        p = self._proc
        if p is not None and p.stdin:
            try:
                p.stdin.close()
            except OSError:
                pass
