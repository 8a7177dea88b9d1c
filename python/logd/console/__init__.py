"""Console capture: the run owner's sys.stdout and sys.stderr become tees that write through unchanged and keep
a copy, which the writer thread takes into each batch (RecordBatch.console_json). One capture per process at a
time (the first run's), undone at that run's finish.

Only Python-level writes are seen: a subprocess's output, or C code writing to file descriptor 1 or 2, goes
around sys.stdout. The copy is bounded per flush interval (CONSOLE_CHARS_PER_FLUSH); beyond it the text still
reaches the terminal, the bytes are counted, said once on stderr, and the cut is marked in the stored output.

The tee never waits: it appends the text to a queue (no lock), and the writer thread puts lines together when
it seals a batch. The capture's own warning goes to the real stderr, around the tee, so nothing loops; a forked
child's writes are not captured (the run is its parent's).
"""
import os
import sys
import threading
import time
from time import time as _now
# json's C string encoder, set when the first capture starts (`import logd` does not load json).
_quote = None
from collections import deque
from typing import List, Optional

from .._lazy import json
from ..hot import CaptureBase as _CaptureBase, TeeBase as _TeeBase, console as _hot_console

CONSOLE_CHARS_PER_FLUSH = 1024 * 1024  # characters of console text per flush interval (about 1 MiB of ASCII)
_PIECE_CHARS = 16 * 1024  # one entry's most characters: <= 64 KiB of UTF-8, the daemon's bound per entry
_ENTRY_SPAN_S = 0.05  # the lines of one entry were written within this time of its first

_active: Optional["ConsoleCapture"] = None
_pid = [os.getpid()]  # this process's pid, kept current across fork without a getpid() per write
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _pid.__setitem__(0, os.getpid()))
_active_lock = threading.Lock()


def capture_console(run_id: str, warn) -> Optional["ConsoleCapture"]:
    """Starts capturing this process's console; None when a capture is on already (another run has it)."""
    global _active, _quote
    with _active_lock:
        if _active is not None or sys.stdout is None or sys.stderr is None:
            return None
        if _quote is None:
            from json.encoder import encode_basestring_ascii as _quote
        _active = ConsoleCapture(run_id, warn)
        return _active


class _Tee(_TeeBase):
    """sys.stdout or sys.stderr while captured: writes go through first, then a copy is kept. Everything
    else (fileno, isatty, encoding, flush, buffer, ...) is the wrapped stream's.

    write() is _TeeBase's, in C, where the compiled hot path is in use (logd/hot/): the write, then the copy of
    a str in the common case, in one call, and _logd_slow() for the rest. Otherwise it is _logd_write() below."""

    def __init__(self, capture: "ConsoleCapture", stream, name: str):
        self._logd_capture = capture
        self._logd_stream = stream
        self._logd_name = name

    def _logd_write(self, text):
        n = self._logd_stream.write(text)
        self._logd_slow(text)
        return n

    def _logd_slow(self, text) -> None:
        """The capture's side of one write (the training thread's, kept short)."""
        c = self._logd_capture
        try:
            k = len(text)
            if k and not c._stopped and _pid[0] == c._pid:
                s = self._logd_name
                if c._queued_chars + k > CONSOLE_CHARS_PER_FLUSH:
                    c._drop(s, text)
                else:
                    if c._dropped[s]:
                        c._mark(s)
                    c._queued_chars += k
                    w = c.journal_to
                    if w is not None and k <= _JOURNAL_PIECE_CHARS and w.journal is not None and w._buf_lock.acquire(False):
                        # Into the crash journal as well, a whole line at a time (print() writes its text, then
                        # "\n": one journal record per line, not per write), in the segment whose batch will carry
                        # it (the writer closes segments under this lock, and a batch carries a line once its
                        # newline came): a line printed just before a kill survives it. Never waits: a print while
                        # the lock is held (by this thread, or the training thread in log()) only queues.
                        try:
                            t = _now()
                            c._queue.append((s, text, t))
                            line = c._jline[s]
                            if not line[0]:
                                line[1] = t
                            line[0] += text
                            if text[-1] == "\n" or len(line[0]) > _JOURNAL_PIECE_CHARS:
                                j = w.journal
                                if _hot_console is None or not _hot_console(j, line[1], s, line[0]):
                                    j.update("console", _entry(line[1], s, line[0]))  # what the C path writes too
                                line[0] = ""
                        finally:
                            w._buf_lock.release()
                    else:
                        c._queue.append((s, text, _now()))
        except Exception:  # the copy never gets in the way of the write itself
            pass

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def __getattr__(self, name):
        return getattr(self._logd_stream, name)

    def __iter__(self):
        return iter(self._logd_stream)


if _TeeBase is object:
    _Tee.write = _Tee._logd_write


def _entry(t: float, s: str, text) -> str:
    """One console entry as RecordBatch.console_json holds it, built by hand (a dict through json.dumps costs
    several times more, on every write of a printing rank); the text quoted by json's C string encoder (ASCII-only
    output: a lone surrogate from undecodable bytes stays an escape, still valid JSON)."""
    if type(text) is not str:
        text = bytes(text).decode("utf-8", "replace")
    return '{"t":%.6f,"s":"%s","l":%s}' % (t, s, _quote(text))  # microseconds, as the C path writes it


# A write longer than this is not journaled (it still goes with the next batch): an entry stays under the daemon's
# 64 KiB per entry whatever its characters' UTF-8 length.
_JOURNAL_PIECE_CHARS = 8192


class ConsoleCapture(_CaptureBase):
    def __init__(self, run_id: str, warn):
        self._run_id = run_id
        self._warn = warn  # unused for the cut's warning, which goes to the real stderr (never back into the tee)
        self._pid = os.getpid()
        # The tees only append here (atomic, no lock: a signal handler that prints can never wait on it); the
        # writer thread turns it into entries when it seals a batch (drain()).
        self._queue: deque = deque()  # (stream, text or bytes, time) | ("mark", stream, dropped bytes)
        self._queue_append = self._queue.append  # bound once: the compiled tee calls it per write
        self._queued_chars = 0  # this flush interval's, for the bound
        self._dropped = {"out": 0, "err": 0}
        self._cut = False  # something was cut: say so once
        self._warned = False
        self._stopped = False
        # The writer (segments.py) whose crash journal also takes each write as it is printed; set by init().
        self.journal_to = None
        # Per stream, the journaled line being put together: [its text so far, the time of its first write].
        self._jline = {"out": ["", 0.0], "err": ["", 0.0]}
        # drain() and stop(): the lines being put together (a line without its newline waits for it).
        self._lock = threading.Lock()
        self._ready: List[str] = []
        self._parts = {"out": [], "err": []}  # the pending text of each stream, and its length
        self._size = {"out": 0, "err": 0}
        self._pending_at = {"out": 0.0, "err": 0.0}
        self._out = _Tee(self, sys.stdout, "out")
        self._err = _Tee(self, sys.stderr, "err")
        sys.stdout = self._out
        sys.stderr = self._err

    # ---- the tees' side (_Tee.write): the training thread's, kept short ----

    def _drop(self, s: str, text) -> None:
        self._dropped[s] += len(text.encode("utf-8", "replace")) if isinstance(text, str) else len(text)
        self._cut = True

    def _mark(self, s: str) -> None:
        """Writes go on after a cut: the cut's mark goes first."""
        self._queue.append(("mark", s, self._dropped[s]))
        self._dropped[s] = 0

    # ---- the writer thread's side (segments.py) ----

    def waiting(self) -> bool:
        return bool(self._queue) or bool(self._ready)

    def drain(self) -> List[str]:
        """The entries ready for the batch being sealed; the bound starts again with the next flush interval."""
        if not self._lock.acquire(timeout=1.0):
            return []
        try:
            self._queued_chars = 0
            self._process()
            out, self._ready = self._ready, []
        finally:
            self._lock.release()
        if self._cut and not self._warned:
            self._warned = True
            try:  # to the real stderr: this warning is not captured
                self._err._logd_stream.write(
                    "logd: run %s: console output beyond %d MiB per flush interval is not stored (it still reaches the "
                    "terminal); each cut is marked in the stored output\n" % (self._run_id, CONSOLE_CHARS_PER_FLUSH // 1048576))
            except Exception:
                pass
        return out

    # ---- the run's side ----

    def stop(self) -> None:
        """Gives sys.stdout and sys.stderr back (unless someone replaced them since); what is still held goes with
        the last batch."""
        global _active
        if self._stopped:
            return
        self._stopped = True
        if sys.stdout is self._out:
            sys.stdout = self._out._logd_stream
        if sys.stderr is self._err:
            sys.stderr = self._err._logd_stream
        for s in ("out", "err"):
            if self._dropped[s]:
                self._queue.append(("mark", s, self._dropped[s]))
                self._dropped[s] = 0
        if self._lock.acquire(timeout=1.0):
            try:
                self._process()
                for s in ("out", "err"):
                    self._flush(s, True)
            finally:
                self._lock.release()
        with _active_lock:
            if _active is self:
                _active = None

    # ---- putting lines together (under _lock) ----
    # Whole lines go out as entries of one or more lines: an entry's time is its first write's, and an entry
    # spans at most _ENTRY_SPAN_S, so each line's time is that close. A line without its newline waits for it.

    def _process(self) -> None:
        q = self._queue
        parts, size, other = self._parts, self._size, {"out": "err", "err": "out"}
        while q:
            s, text, t = q.popleft()
            if s == "mark":
                s, n = text, t
                self._flush(s, True)
                line = "[logd: %d bytes of std%s not stored here: more than %d MiB of console output in one flush interval]\n" % (
                    n, s, CONSOLE_CHARS_PER_FLUSH // 1048576)
                self._ready.append(json.dumps({"t": time.time(), "s": s, "l": line}))
                continue
            if type(text) is not str:
                if not isinstance(text, (bytes, bytearray)):
                    continue
                text = bytes(text).decode("utf-8", "replace")
            if parts[other[s]]:
                self._flush(other[s], False)  # the other stream's whole lines first: the order between them is kept
            if not parts[s]:
                self._pending_at[s] = t
            elif t - self._pending_at[s] > _ENTRY_SPAN_S:
                self._flush(s, False, t)
            parts[s].append(text)
            size[s] += len(text)
            if size[s] >= _PIECE_CHARS:
                self._flush(s, False, t)
        for s in sorted(("out", "err"), key=lambda x: self._pending_at[x]):
            self._flush(s, False)

    def _flush(self, s: str, everything: bool, now: float = 0.0) -> None:
        """Emits the pending whole lines of stream s (everything: the partial line too); a partial line longer
        than a piece goes out in pieces."""
        if not self._parts[s]:
            return
        p = "".join(self._parts[s])
        nl = len(p) - 1 if everything else p.rfind("\n")
        keep = p[nl + 1 :]
        if len(keep) >= _PIECE_CHARS:
            nl += len(keep) - len(keep) % _PIECE_CHARS
            keep = p[nl + 1 :]
        if nl >= 0:
            self._emit(s, p[: nl + 1], self._pending_at[s])
            self._pending_at[s] = now or time.time()
        self._parts[s] = [keep] if keep else []
        self._size[s] = len(keep)

    def _emit(self, s: str, text: str, t: float) -> None:
        """Text as entries of at most _PIECE_CHARS, cut after a newline where one is near."""
        at = 0
        while at < len(text):
            end = min(len(text), at + _PIECE_CHARS)
            if end < len(text):
                nl = text.rfind("\n", at, end)
                if nl >= at + _PIECE_CHARS // 2:
                    end = nl + 1
            piece = text[at:end]
            # surrogateescape text (undecodable bytes) becomes "?": entries are valid UTF-8 JSON
            self._ready.append(json.dumps({"t": t, "s": s, "l": piece.encode("utf-8", "replace").decode("utf-8")}))
            at = end
