"""The rows log() hands a writer, cut into batches as they come, and the crash
journal that holds them until the daemon acknowledges them.

log() puts a row into the journal (journal.py) under _buf_lock and, as long
as the journal takes them, keeps no other copy: the writer thread reads the
rows back from the journal when it seals them (Journal.columns()), so log()
costs one journal record instead of a record and a Python tuple. Rows the
journal cannot take (it is full, or there is none) are kept in memory as
before.

A segment becomes a batch, with its seq, when it is closed: by log() when it
is full (journal.SEGMENT_BYTES of records; rows kept in memory: MAX_ROWS rows
or MAX_PAIRS values) or by the writer thread when it takes the rows to seal
them. Closing writes the batch's SEAL into the journal under the same lock,
so the journal records between two SEALs are exactly that batch's rows and
updates (the daemon reading the journal after a crash stores each batch once,
by seq). Seqs are given at closing and never reused.

Writer (the stream) and RelayWriter (a forked child's pipe to its relay) both
take their rows this way.
"""
import os
import struct
import threading
from typing import List, Optional, Tuple

from .journal import FULL, MAX_JOURNALED_MEDIA_BYTES, Journal, journal_path, journal_size
from ..media import MEDIA_BATCH_BYTES
from ..hot import WriterBase

MAX_ROWS = 8192
MAX_PAIRS = 128 * 1024

Segment = Tuple[int, list, list]  # (seq, rows as (step, time, keys, values), updates as (kind, json))


class OpenSegments(WriterBase):
    def _init_segments(self, spool_dir: Optional[str], journal_mb: float) -> None:
        self._buf_lock = threading.Lock()
        self._buf_locked = self._buf_lock.locked  # bound once: the compiled log() and console tee ask it per call
        # The open segment: its rows in the journal from _ring_from on (up to _ring_to, once it had to keep rows
        # in memory: from then on all its rows are in _buf as well, in order), the rows kept in memory, its updates.
        self._ring_from = 0
        self._ring_to = -1  # -1: every row of the segment from _ring_from on is in the journal
        self._buf: List[Tuple[int, float, list, list]] = []
        self._seg_rows = 0  # of them in memory, and their values
        self._seg_pairs = 0
        self._updates: List[Tuple[str, str]] = []  # ("summary" | "config" | "console", json) or ("media", pb.Media), in call order
        # The process's console capture (console.py) when this writer's run has it: drained into each segment.
        self.console_source = None
        # Closed segments not yet taken by the writer thread: (seq, ring_from, ring_to, rows in memory, updates).
        self._segments: list = []
        self._last_seq = 0  # the seq of the last segment closed
        # Held while the journal's bytes are read back outside _buf_lock, so that it is not unmapped meanwhile.
        self._ring_lock = threading.Lock()
        self.journal: Optional[Journal] = None
        self.journal_problem: Optional[str] = None
        self._journal_warned = False
        size = journal_size(journal_mb)
        if size and spool_dir:
            try:
                self.journal = Journal.create(spool_dir, self.run_id, self.run_token, self.writer_id, size)
            except (OSError, ValueError) as e:
                self._journal_trouble("no crash journal (%s: %s): rows not yet acknowledged are lost if this process "
                                      "is killed. Check that %s is writable and has space, or set LOGD_JOURNAL_MB=0 "
                                      "to run without one" % (journal_path(spool_dir, self.run_id, self.writer_id),
                                                              getattr(e, "strerror", None) or e, spool_dir))

    def _journal_trouble(self, msg: str) -> None:
        """Said once on stderr, kept in journal_problem: the journal is a safety net, never a reason to fail."""
        self.journal_problem = msg
        if not self._journal_warned:
            self._journal_warned = True
            self._warn("logd: run %s: %s" % (self.run_id, msg))

    # ---- the training thread ----

    def add(self, step: int, t: float, keys: list, vals) -> None:
        """One row from log(): keys a list of names, vals their numbers (a list, or an array("d")). Never raises an
        I/O error: a row the journal cannot take is kept in memory."""
        with self._buf_lock:
            j = self.journal
            r = False
            if j is not None:
                r = j.row(step, t, keys, vals)
                if self._ring_to < 0:
                    if r is True:
                        return  # the journal holds it; the writer thread reads it back from there
                    if r:  # FULL
                        self._close_segment()
                        return
                if not r:
                    self._keep_in_memory(j)
            self._buf.append((step, t, keys, vals))
            self._seg_rows += 1
            self._seg_pairs += len(keys)
            if self._seg_rows >= MAX_ROWS or self._seg_pairs >= MAX_PAIRS or r is FULL:
                self._close_segment()

    def media(self, m, size: int) -> None:
        """One histogram, image or text (a pb.Media): rides with the open segment's batch, and goes into the crash
        journal too (up to MAX_JOURNALED_MEDIA_BYTES), so that a value logged just before a kill survives it. A
        segment whose media reach MEDIA_BATCH_BYTES is closed, so that a batch stays well under the message limit."""
        with self._buf_lock:
            j = self.journal
            if j is not None and size <= MAX_JOURNALED_MEDIA_BYTES and not j.update("media", m.SerializeToString()) and j.problem:
                self._journal_trouble(j.problem)
                j.problem = None
            self._updates.append(("media", m))
            self._seg_media_bytes = getattr(self, "_seg_media_bytes", 0) + size
            if self._seg_media_bytes >= MEDIA_BATCH_BYTES:
                self._close_segment()

    def _keep_in_memory(self, j: Journal) -> None:
        """A row the journal did not take: it and the rest of the segment are kept in memory (in order behind
        the rows the journal holds; later ones still go into the journal too, for a crash)."""
        if self._ring_to < 0:
            self._ring_to = j.tail
            j.mark()
        if j.problem:
            self._journal_trouble(j.problem)
            j.problem = None

    def update(self, kind: str, text: str) -> None:
        with self._buf_lock:
            j = self.journal
            if j is not None and not j.update(kind, text) and j.problem:
                self._journal_trouble(j.problem)
                j.problem = None
            self._updates.append((kind, text))

    # ---- closing segments (caller holds _buf_lock) ----

    def _close_segment(self) -> None:
        c = self.console_source
        if c is not None:  # console output (console.py) rides with this batch; never journaled
            self._updates.extend(("console", e) for e in c.drain())
        self._last_seq += 1
        j = self.journal
        if j is None:
            self._segments.append((self._last_seq, 0, 0, self._buf, self._updates))
        else:
            self._segments.append((self._last_seq, max(self._ring_from, j.skip_end),
                                   j.tail if self._ring_to < 0 else self._ring_to, self._buf, self._updates))
            j.seal(self._last_seq)
            j.start_segment()
            self._ring_from = j.tail
        self._ring_to = -1
        self._buf, self._seg_rows, self._seg_pairs, self._updates = [], 0, 0, []
        self._seg_media_bytes = 0

    def _take_raw(self, lock_timeout_s: float = -1):
        """Closes the open segment (if it holds anything) and takes every closed one, in seq order: (the journal,
        [(seq, ring_from, ring_to, rows kept in memory, updates)]), or None when _buf_lock could not be had within
        lock_timeout_s (a signal handler whose thread was interrupted inside log(): those rows stay in the journal).
        The caller holds _ring_lock while it reads the rows in [ring_from, ring_to) back from the journal
        (Journal.rows(), Journal.columns()): outside _buf_lock, so log() does not wait for that."""
        if not self._buf_lock.acquire(timeout=lock_timeout_s):
            return None
        try:
            self._check_journal_lost()
            if self._open_has_content():
                self._close_segment()
            segs, self._segments = self._segments, []
            return self.journal, segs
        finally:
            self._buf_lock.release()

    def _take_segments(self, lock_timeout_s: float = -1) -> List[Segment]:
        """_take_raw(), the rows read back: [(seq, rows, updates)] ([] when the locks could not be had)."""
        if not self._ring_lock.acquire(timeout=lock_timeout_s):
            return []
        try:
            taken = self._take_raw(lock_timeout_s)
            if taken is None:
                return []
            j, segs = taken
            return [(seq, (j.rows(a, b) if j is not None and b > a else []) + mem, updates)
                    for seq, a, b, mem, updates in segs]
        finally:
            self._ring_lock.release()

    def _open_has_content(self) -> bool:
        """The open segment holds rows (in memory or in the journal), updates, or console output waits (caller holds _buf_lock)."""
        j = self.journal
        c = self.console_source
        return bool(self._seg_rows or self._updates or (j is not None and j.tail > max(self._ring_from, j.skip_end))
                    or (c is not None and c.waiting()))

    def add_segment(self, seq: int, rows: list, updates: list) -> None:
        """A segment closed elsewhere, with its seq (the relay process gets a forked child's segments this way)."""
        with self._buf_lock:
            self._last_seq = max(self._last_seq, seq)
            self._segments.append((seq, 0, 0, rows, updates))

    # ---- the journal's end ----

    def _check_journal_lost(self) -> None:
        """A journal whose file another process truncated (busguard.py kept this process alive) is given up: the rows
        it still holds are read back into memory, the file is removed, and logging goes on without a journal, said
        once. Rows that were only in the truncated part of the file are gone with it: their batches go out without
        them (the seqs stay whole) and the message counts them (Journal.salvage()). Caller holds _ring_lock and
        _buf_lock."""
        j = self.journal
        if j is None or not j.lost():
            return
        lost = 0

        def salvage(a: int, b: int) -> list:
            nonlocal lost
            rows, gone = j.salvage(a, b)
            lost += gone
            return rows

        self._segments = [(seq, 0, 0, (salvage(a, b) if b > a else []) + mem, updates)
                          for seq, a, b, mem, updates in self._segments]
        start = max(self._ring_from, j.skip_end)
        end = j.tail if self._ring_to < 0 else self._ring_to
        if end > start:
            ring_rows = salvage(start, end)
            self._buf[:0] = ring_rows
            self._seg_rows += len(ring_rows)
        self._ring_from, self._ring_to = 0, -1
        self.journal = None
        j.close(remove=True)
        msg = ("crash journal lost: %s was truncated by another process; logging goes on without a journal (rows wait "
               "for the daemon in this process's memory and spool, and those of the last flush interval are lost if it "
               "is killed)" % j.path)
        if lost:
            msg += "; %d rows logged just before were only in the truncated file and are lost" % lost
        self.journal_problem = msg
        self._journal_warned = True
        self._warn("logd: run %s: %s" % (self.run_id, msg))

    def journal_acked(self, seq: int) -> None:
        """The daemon has every batch up to seq: the journal frees them."""
        with self._buf_lock:
            if self.journal is not None:
                self.journal.acked(seq)

    def close_journal(self, everything_acked: bool) -> None:
        """Unmaps the journal; removes it when every row in it is acknowledged (or in a spill file) and no row
        waits unsealed. Otherwise the file stays for the daemon to read once this process is gone. Rows not yet
        sealed are read back into memory first."""
        with self._ring_lock:
            with self._buf_lock:
                self._check_journal_lost()
                j = self.journal
                if j is None:
                    return
                pending = bool(self._open_has_content() or self._segments)
                self.journal = None
                self._segments = [(seq, 0, 0, (j.rows(a, b) if b > a else []) + mem, updates)
                                  for seq, a, b, mem, updates in self._segments]
                start = max(self._ring_from, j.skip_end)
                end = j.tail if self._ring_to < 0 else self._ring_to
                if end > start:
                    ring_rows = j.rows(start, end)
                    self._buf[:0] = ring_rows
                    self._seg_rows += len(ring_rows)
                self._ring_from, self._ring_to = 0, -1
                j.close(remove=everything_acked and not pending and os.getpid() == j.pid)
