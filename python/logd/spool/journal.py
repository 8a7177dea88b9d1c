"""The crash journal of one writer (docs/journal.md, format 1, checksum kind 2).

log() puts each row into a file this process maps MAP_SHARED, so the rows
survive the process however it dies (SIGKILL, the OOM killer, os._exit, a
segfault): the kernel keeps the mapped pages and the daemon reads them back.
Nothing here makes a syscall on the per-row path.

The file's blocks are reserved (posix_fallocate) before it is mapped: a store
into a mapped hole that the file system cannot back (a full disk, a full
tmpfs) raises SIGBUS and would kill the trainer. When they cannot be had,
there is no journal (Journal.create() raises, the writer says so and goes on).

The commit: bytes [8, len) first, then the terminator past the record, then
len and check together in one 8-byte store (CPython packs an integer format
with a single memcpy on a little-endian host), so a record is there whole or
not at all: len is still the last thing written, and the check is never seen
without it.

Threads: row(), update(), seal() and acked() run under the writer's
_buf_lock (segments.py): the training thread, the writer thread closing a
batch, the thread that takes acknowledgements. rows() and columns() read
back records of closed batches outside it: nothing writes there until the
daemon acknowledged them, which it cannot before they were read and sent.
"""
import mmap
import os
import socket
import struct
import sys
import zlib
from array import array
from collections import deque
from typing import Optional

from . import busguard
from .. import hot
from .._lazy import json
from ..paths import proc_start_time

MAGIC = b"LOGDJRN1"
VERSION = 1
CHECK_CRC32 = 2
HEADER_BYTES = 4096
MAX_IDENTITY_BYTES = 3000
NOT_JOURNALED_AT = 3584
MIN_BYTES = 64 * 1024
MAX_BYTES = 1 << 30  # the daemon refuses larger journals

ROW, KEY, UPDATE, SEAL, PAD = 1, 2, 3, 4, 5
SEAL_DROPPED = 1
UPDATE_KINDS = {"summary": 1, "config": 2, "console": 3, "media": 4}
# A histogram, image or text is journaled as its encoded pb.Media; a larger one (an image) stays in memory only, as
# it would crowd rows out of the ring (src/journal.ts, MAX_JOURNALED_MEDIA_BYTES).
MAX_JOURNALED_MEDIA_BYTES = 4 * 1024 * 1024

_ROOM = 48  # kept free past a ROW or UPDATE: the SEAL that closes its batch (40 bytes with a PAD) and a terminator
# While the daemon keeps up, the ring wraps back to its start once the tail passed this far (as the TypeScript
# writer does): the pages in use stay near this many, not the whole journal.
_SOFT_WRAP = 8 << 20
# A batch holds at most about this many bytes of ROW records: row() says FULL past it (the writer then closes the
# batch), so that the writer counts neither rows nor values per log() (1 MiB: ~7000 rows of 10 values, ~87000 values).
SEGMENT_BYTES = 1 << 20
FULL = 2  # row(): journaled, and the batch is full

# Stores that must not tear (len+check, head, ackedSeq, notJournaled) go through integer formats: on a
# little-endian host CPython packs "<I" and "<Q" with one memcpy, one store; floats it packs byte by byte.
_U32 = struct.Struct("<I")
_Q = struct.Struct("<Q")
_F64 = struct.Struct("<d")
_HEAD = struct.Struct("<8sIIddIIIIII")  # magic .. identity crc: header bytes [0, 56)
_SEAL = struct.Struct("<HHI")  # type, flags, n: a SEAL's bytes [8, 16)
_TEXT = struct.Struct("<HHIII")  # type, flags, n, byte length, 0: KEY and UPDATE bytes [8, 24)
_PAD = struct.Struct("<HHI")  # type, flags, n: a PAD's bytes [8, 16)
_TYPE_N = struct.Struct("<HxxI")  # type, n of a record's bytes [8, 16)
_STEP_TIME = struct.Struct("<dd")
_ROW_HEAD = struct.Struct("<Qdd")  # a ROW's bytes [8, 32): type, flags, n (as one u64), step, time
_crc32 = zlib.crc32
_commit_store = _Q.pack_into


def journal_path(spool_dir: str, run_id: str, writer_id: str) -> str:
    return os.path.join(spool_dir, "%s--%s.journal" % (run_id, writer_id))


def journal_size(mb: float) -> int:
    """LOGD_JOURNAL_MB as bytes: whole pages, at least 64 KiB; 0 means no journal."""
    if mb <= 0:
        return 0
    return min(MAX_BYTES, max(MIN_BYTES, int(mb * 1048576) // 4096 * 4096))


def process_start_time() -> int:
    """This process's start time (paths.proc_start_time); 0 where there is no /proc."""
    return proc_start_time(os.getpid()) or 0


class Journal(hot.RingBase):
    """One writer's journal file, mapped. Create it with Journal.create()."""

    def __init__(self, path: str, fd: int, size: int, identity: bytes):
        self.path = path
        self.pid = os.getpid()
        self.size = size
        keys_bytes = size // 8 // 8 * 8
        self._keys_off = HEADER_BYTES
        self._keys_bytes = keys_bytes
        self._ring_off = HEADER_BYTES + keys_bytes
        self._ring = size - self._ring_off
        if hasattr(os, "posix_fallocate"):
            os.posix_fallocate(fd, 0, size)
        else:  # no fallocate: zeros written make the blocks exist just as well
            for at in range(0, size, 1 << 20):
                os.pwrite(fd, bytes(min(1 << 20, size - at)), at)
        self._mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        # A truncation of the file by another process must not kill the trainer with SIGBUS (busguard.py).
        self._guard = busguard.guard(self._mm, size)
        # log()'s C path (logd/hot/) writes rows at this address; 0 while it is not in use or once unmapped.
        self._map_size = size
        self._base = hot.address_of(self._mm)
        # Rows journaled so far, and their number when the tail was at each batch boundary not yet freed: how many
        # rows a part of the ring held, should the file be truncated under it (salvage()).
        self.rows_total = 0
        self._marks = {0: 0}
        # The key dictionary (name -> id), and the layout of the last row's names (the same nearly every step).
        self._kid = {}
        self._knames: list = []  # id -> name
        self._ktail = 0
        self._rows = {}  # n -> the struct of a ROW's bytes [8, len)
        self._last_keys: list = []
        self._last = self._row_layout(b"", 0)
        # Logical ring positions (they only grow): tail, head; SEALs written and not yet freed: (seq, end).
        self._tail = 0
        self._off = self._ring_off  # where the tail is in the file
        self._head = 0
        self._sealed_at = 0  # the tail just past the last SEAL: records since, when the tail moved on
        self._seals: deque = deque()
        self._acked = 0
        self._skip = 0  # the last batch sealed with none of its records here, its SEAL not yet written
        # Just past the last such SEAL once written (before the next batch's first record, which it precedes): an
        # acknowledgement may free it before that batch is read back, so reading starts after it.
        self.skip_end = 0
        # row()'s test for its common case, kept up to date by whatever changes them: a record of `length` bytes at
        # the tail fits, with the room past it, before the ring's end or the soft wrap (_off + length <= _fast_end),
        # without reaching the head's record or the end of its batch (_tail + length <= _fast_limit). -1: the slow
        # path, always.
        self._fast_end = -1
        self._fast_limit = 0
        self._seg_end = SEGMENT_BYTES  # the tail past which row() says FULL
        self._soft = True  # this lap may wrap at _SOFT_WRAP (False once the head was too close behind to allow it)
        self.not_journaled = 0
        self._full_said = False
        self.problem: Optional[str] = None  # why rows were not journaled, for the writer to report once
        self._refresh()
        self._mm[0:HEADER_BYTES] = _HEAD.pack(MAGIC, VERSION, CHECK_CRC32, 0.0, 0.0, self._keys_off, keys_bytes,
                                             self._ring_off, self._ring, len(identity),
                                             zlib.crc32(identity)) + identity + bytes(HEADER_BYTES - 56 - len(identity))

    @classmethod
    def create(cls, spool_dir: str, run_id: str, run_token: str, writer_id: str, size: int) -> "Journal":
        """Makes <spool>/<run>--<writer>.journal; raises OSError (no spool, a full disk, the file exists) or
        ValueError (an identity over 3000 bytes, a big-endian host), leaving no file behind."""
        if sys.byteorder != "little":  # see the commit in the module's docstring
            raise ValueError("the crash journal needs a little-endian host")
        identity = json.dumps({"runId": run_id, "runToken": run_token, "writerId": writer_id, "pid": os.getpid(),
                               "host": socket.gethostname(), "startTime": process_start_time(), "client": "py"},
                              separators=(",", ":")).encode()
        if len(identity) > MAX_IDENTITY_BYTES:
            raise ValueError("the journal's identity is %d bytes, more than %d" % (len(identity), MAX_IDENTITY_BYTES))
        path = journal_path(spool_dir, run_id, writer_id)
        os.makedirs(spool_dir, mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_RDWR | getattr(os, "O_CLOEXEC", 0), 0o600)
        try:
            os.ftruncate(fd, size)
            return cls(path, fd, size, identity)
        except BaseException:
            try:
                os.unlink(path)
            except OSError:
                pass
            raise
        finally:
            os.close(fd)  # the mapping keeps the file

    def _refresh(self) -> None:
        end = min(self._ring, _SOFT_WRAP) if self._soft else self._ring
        self._fast_end = -1 if self._skip else self._ring_off + end - _ROOM
        self._fast_limit = min(self._head + self._ring - _ROOM, self._seg_end)

    def mark(self) -> None:
        """A batch boundary at the tail (salvage() counts the rows between two)."""
        self._marks[self._tail] = self.rows_total

    def start_segment(self) -> None:
        """A batch was closed: the next one may grow SEGMENT_BYTES from here."""
        self._marks[self._tail] = self.rows_total
        self._seg_end = self._tail + SEGMENT_BYTES
        self._refresh()

    # ---- placing and committing ring records ----

    def _place(self, length: int, room: int = _ROOM) -> int:
        """The logical position for a ring record of `length` bytes, a PAD written first when it does not fit before
        the ring's end (or past the soft wrap); -1 when the ring is full.

        `room` bytes are kept free past a ROW or UPDATE for the SEAL that closes its batch and for the terminator,
        so that a SEAL always fits (a SEAL itself needs only its terminator). No record leaves exactly 8 bytes before
        the ring's end: too few for a PAD's header."""
        tail = self._tail
        ring = self._ring
        rem = ring - tail % ring
        pad = 0 if length <= rem and rem - length != 8 else rem
        if not pad and self._soft and ring - rem + length + room > _SOFT_WRAP:
            # Past the soft wrap: back to the ring's start when the backlog is under a third of this lap (the new
            # lap can then grow to where the head is, at least two thirds of it, before the head follows), else on
            # to the ring's end.
            if 3 * (tail - self._head) <= ring - rem and tail + rem + length + room - self._head <= ring:
                pad = rem
            else:
                self._soft = False
                self._refresh()
        pos = tail + pad
        if pos + length + room - self._head > ring:
            if not self._full_said:
                self._full_said = True
                self.problem = ("the crash journal is full (%d MB of records the daemon has not acknowledged; "
                                "LOGD_JOURNAL_MB): rows past it are kept in memory only" % (ring >> 20))
            return -1
        if pad:
            off = self._ring_off + tail % ring
            _PAD.pack_into(self._mm, off + 8, PAD, 0, 0)
            self._commit(tail, pad, 0)  # not checksummed
            self._soft = True
            self._refresh()
        return pos

    def _commit(self, pos: int, length: int, check: int) -> None:
        """Steps 2 and 3 of the commit order, once bytes [8, len) are written: the terminator past the record (on
        the first lap those bytes are still the file's zeros; past the ring's end, at its start), then len and check
        in one store."""
        end = pos + length
        ring = self._ring
        off = self._ring_off + end % ring
        if end >= ring:
            _U32.pack_into(self._mm, off, 0)
        _Q.pack_into(self._mm, self._ring_off + pos % ring, length | check << 32)
        self._tail = end
        self._off = off

    # ---- records ----

    def row(self, step, t, keys: list, vals: list):
        """Journals one row (names and values as log() collected them): True, FULL (it is in, and its batch reached
        SEGMENT_BYTES), or False when it did not fit.

        log()'s own path, so written for CPython's sake: the layout of the last list of names is cached (key ids
        packed, the struct); one pack writes the rest, zeroing the ids' place, which a slice assignment fills."""
        if keys is self._last_keys or keys == self._last_keys:
            st, length, hdr, idb, ids_end = self._last
        else:
            layout = self._layout(keys)
            if layout is None:
                return self._skipped()
            st, length, hdr, idb, ids_end = layout
        off = self._off
        tail = self._tail
        res = True
        if off + length > self._fast_end or tail + length > self._fast_limit:
            tail = self._row_slow(length)
            if tail < 0:
                return self._skipped()
            off = self._off
            if tail + length > self._seg_end:
                res = FULL
        mm = self._mm
        if type(vals) is array:  # log()'s short path made them f64 already: their bytes go in as they are
            try:
                _ROW_HEAD.pack_into(mm, off + 8, hdr, step, t)
            except OverflowError:  # a step beyond float range
                _ROW_HEAD.pack_into(mm, off + 8, hdr, _float(step), t)
            mm[off + ids_end : off + length] = vals
        else:
            try:
                st.pack_into(mm, off + 8, hdr, step, t, *vals)
            except (OverflowError, struct.error):  # an int beyond float range: +-inf, as on the wire
                st.pack_into(mm, off + 8, hdr, _float(step), _float(t), *[_float(v) for v in vals])
        mm[off + 32 : off + ids_end] = idb
        check = _crc32(mm[off + 8 : off + length])
        tail += length
        if tail < self._ring:  # the first lap: past the tail the file's zeros are the terminator
            self._off = off + length
        else:
            self._off = end = self._ring_off + tail % self._ring
            _U32.pack_into(mm, end, 0)
        _commit_store(mm, off, length | check << 32)
        self._tail = tail
        self.rows_total += 1
        return res

    @property
    def tail(self) -> int:
        """The logical ring position just past the last record."""
        return self._tail

    def rows(self, start: int, end: int) -> list:
        """The rows of the ROW records in [start, end) of the ring, as log() gave them: (step, time, keys, values),
        the keys lists shared between rows with the same names. The writer reads its rows back this way when it
        seals them (the caller keeps the journal mapped and that part of the ring unfreed meanwhile)."""
        out = []
        append = out.append
        mm = self._mm
        ring = self._ring
        ring_off = self._ring_off
        names = self._knames
        layouts = {}  # n and the ids, as bytes -> (their names, the values' struct, where the values start)
        pos = start
        while pos < end:
            off = ring_off + pos % ring
            length = _U32.unpack_from(mm, off)[0]
            if length < 16 or length & 7:  # never in a range this writer wrote and did not free; no endless loop
                raise ValueError("journal %s: no record at ring position %d" % (self.path, pos))
            typ, n = _TYPE_N.unpack_from(mm, off + 8)
            if typ == ROW:
                ids_end = off + 32 + 4 * n + 4 * (n & 1)
                idb = mm[off + 28 : ids_end]  # n and the ids: one id and its padding look like two ids
                layout = layouts.get(idb)
                if layout is None:
                    layout = layouts[idb] = ([names[i] for i in struct.unpack("<%dI" % n, idb[4 : 4 + 4 * n])],
                                             struct.Struct("<%dd" % n), ids_end - off)
                keys, vs, at = layout
                step, t = _STEP_TIME.unpack_from(mm, off + 16)
                append((step, t, keys, list(vs.unpack_from(mm, off + at))))
            pos += length
        return out

    def salvage(self, start: int, end: int):
        """rows() of a part of the ring that the file's truncation under the mapping zeroed in part (busguard.py):
        records whose length and checksum hold are read, the rest is skipped 8 bytes at a time. Returns (the rows,
        how many rows of that part are lost: counted from the batch boundaries' marks, or estimated from the bytes
        skipped where a boundary has none)."""
        out = []
        skipped = 0
        mm = self._mm
        ring = self._ring
        ring_off = self._ring_off
        pos = start
        while pos < end:
            off = ring_off + pos % ring
            word = _Q.unpack_from(mm, off)[0]
            length, check = word & 0xFFFFFFFF, word >> 32
            if 16 <= length and not length & 7 and pos + length <= end and off + length <= ring_off + ring:
                typ = _TYPE_N.unpack_from(mm, off + 8)[0]
                if (typ == PAD and check == 0) or _crc32(mm[off + 8 : off + length]) == check:
                    if typ == ROW:
                        out.extend(self.rows(pos, pos + length))
                    pos += length
                    continue
            pos += 8
            skipped += 8
        marks = self._marks
        at_end = self.rows_total if end == self._tail else marks.get(end)
        at_start = marks.get(start)
        if at_end is not None and at_start is not None:
            return out, max(0, at_end - at_start - len(out))
        return out, (skipped + self._last[1] - 1) // max(8, self._last[1]) if skipped else 0

    def columns(self, start: int, end: int, wire_ids, steps, times, counts, key_ids, values) -> int:
        """Appends the rows of the ROW records in [start, end) of the ring to a batch's columns (arrays of f64 and
        u32; wire_ids(names) gives the key ids column's bytes for a row's names); returns how many. The values go
        from the journal's bytes to the column's without becoming Python floats."""
        mm = self._mm
        ring = self._ring
        ring_off = self._ring_off
        names = self._knames
        layouts = {}  # n and the ids, as bytes -> (the key ids column's bytes for them, where the values start)
        rows = 0
        pos = start
        while pos < end:
            off = ring_off + pos % ring
            length = _U32.unpack_from(mm, off)[0]
            if length < 16 or length & 7:  # never in a range this writer wrote and did not free; no endless loop
                raise ValueError("journal %s: no record at ring position %d" % (self.path, pos))
            typ, n = _TYPE_N.unpack_from(mm, off + 8)
            if typ == ROW:
                ids_end = off + 32 + 4 * n + 4 * (n & 1)
                idb = mm[off + 28 : ids_end]  # n and the ids: one id and its padding look like two ids
                layout = layouts.get(idb)
                if layout is None:
                    layout = layouts[idb] = (wire_ids([names[i] for i in struct.unpack("<%dI" % n, idb[4 : 4 + 4 * n])]),
                                             ids_end - off)
                wire, at = layout
                step, t = _STEP_TIME.unpack_from(mm, off + 16)
                steps.append(step)
                times.append(t)
                counts.append(n)
                key_ids.frombytes(wire)
                values.frombytes(mm[off + at : off + length])
                rows += 1
            pos += length
        return rows

    def _row_slow(self, length: int) -> int:
        """A pending SEAL first, then _place (a PAD, a reservation, a full ring): the position, or -1."""
        if self._skip and not self._seal_skipped():
            return -1
        return self._place(length)

    def _skipped(self) -> bool:
        self.not_journaled += 1
        _Q.pack_into(self._mm, NOT_JOURNALED_AT, _f64_bits(self.not_journaled))
        return False

    def _layout(self, keys: list):
        """The cached layout of a row with these names (see row()); None when a new name does not fit the key
        region."""
        kid = self._kid
        ids = []
        for k in keys:
            i = kid.get(k)
            if i is None:
                i = self._key(k)
                if i is None:
                    return None
            ids.append(i)
        self._last = self._row_layout(struct.pack("<%dI" % len(ids), *ids) + bytes(4 * (len(ids) & 1)), len(ids))
        self._last_keys = keys
        return self._last

    def _row_layout(self, idb: bytes, n: int):
        st = self._rows.get(n)
        if st is None:
            # bytes [8, len): type, flags, n (as one u64), step, time, the ids' place (zeroed), the values
            st = self._rows[n] = struct.Struct("<Qdd%dx%dd" % (len(idb), n))
        return (st, st.size + 8, ROW | n << 32, idb, 32 + len(idb))

    def _key(self, name: str) -> Optional[int]:
        """Appends a KEY record to the key region; the new id, or None when the region is full."""
        data = name.encode("utf-8", "surrogatepass")
        length = 24 + (len(data) + 7) // 8 * 8
        pos = self._ktail
        if pos + length + 8 > self._keys_bytes:
            self.problem = ("the crash journal's key region (%d bytes) is full: rows with new metric names are kept "
                            "in memory only" % self._keys_bytes)
            return None
        i = len(self._kid)
        off = self._keys_off + pos
        body = _TEXT.pack(KEY, 0, i, len(data), 0) + data + bytes(-len(data) % 8)
        self._mm[off + 8 : off + length] = body
        # The key region is append-only: past its tail it is all zeros, the terminator included.
        _Q.pack_into(self._mm, off, length | zlib.crc32(body) << 32)
        self._ktail = pos + length
        self._kid[name] = i
        self._knames.append(name)
        return i

    def update(self, kind: str, text) -> bool:
        """Journals a config, summary or console update (JSON text), or a media value (an encoded pb.Media, bytes);
        False when it did not fit."""
        data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
        length = 24 + (len(data) + 7) // 8 * 8
        pos = self._row_slow(length)
        if pos < 0:
            self.problem = "a %s update of %d bytes did not fit the crash journal; it is kept in memory only" % (kind, len(data))
            return False
        off = self._ring_off + pos % self._ring
        body = _TEXT.pack(UPDATE, 0, UPDATE_KINDS[kind], len(data), 0) + data + bytes(-len(data) % 8)
        self._mm[off + 8 : off + length] = body
        self._commit(pos, length, zlib.crc32(body))
        return True

    def seal(self, seq: int, dropped: bool = False) -> None:
        """Closes the records since the previous SEAL as batch `seq` (room for this SEAL was kept when they went in).

        A batch none of whose records is in the journal gets its SEAL (flags 1: nothing of it here) only before the
        next record: the reader labels records after the last SEAL as that SEAL's seq + 1, so the last seq must be
        there before them, but a ring too full to take rows need not take SEALs either."""
        self._marks[self._tail] = self.rows_total
        if self._tail == self._sealed_at or not self._seal(seq, SEAL_DROPPED if dropped else 0):
            self._skip = seq  # (a failed SEAL never happens with the room kept; if it did, the next record carries it)
            self._refresh()

    def _seal(self, seq: int, flags: int) -> bool:
        pos = self._place(16, 8)
        if pos < 0:
            return False
        off = self._ring_off + pos % self._ring
        body = _SEAL.pack(SEAL, flags, seq)
        self._mm[off + 8 : off + 16] = body
        self._commit(pos, 16, zlib.crc32(body))
        self._sealed_at = self._tail
        self._seals.append((seq, self._tail))
        return True

    def _seal_skipped(self) -> bool:
        if not self._seal(self._skip, SEAL_DROPPED):
            return False
        self.skip_end = self._tail
        self._marks[self._tail] = self.rows_total
        self._skip = 0
        self._refresh()
        return True

    def acked(self, seq: int) -> None:
        """The daemon has every batch up to `seq`: `ackedSeq` first, then `head` just past the SEAL of the highest
        sealed seq <= `seq` (a reader seeing the new ackedSeq with the old head only re-reads duplicates)."""
        if seq <= self._acked:
            return
        self._acked = seq
        _Q.pack_into(self._mm, 24, _f64_bits(seq))
        head = -1
        seals = self._seals
        while seals and seals[0][0] <= seq:
            head = seals.popleft()[1]
        if head >= 0:
            _Q.pack_into(self._mm, 16, _f64_bits(head))
            self._head = head
            self._refresh()
            marks = self._marks
            for k in [k for k in marks if k < head]:
                del marks[k]

    def lost(self) -> bool:
        """The file was truncated under the mapping (another process): the guard kept this process alive, and what
        the file held past its new end is gone; what is written now reaches no file (segments.py gives it up)."""
        return self._guard >= 0 and busguard.lost(self._guard)

    def close(self, remove: bool) -> None:
        """Unmaps; `remove` deletes the file (everything in it is acknowledged or in a spill file). Kept, the file is
        the daemon's to read. A forked child never removes its parent's journal."""
        if remove and os.getpid() == self.pid:
            try:
                os.unlink(self.path)
            except OSError:
                pass
        busguard.release(self._guard)
        self._guard = -1
        self._base = 0  # first: the C path never writes to an unmapped address
        try:
            self._mm.close()
        except (OSError, ValueError, BufferError):
            pass


def _f64_bits(x) -> int:
    return _Q.unpack(_F64.pack(x))[0]


def _float(v) -> float:
    try:
        return float(v)
    except OverflowError:
        return float("inf") if v > 0 else float("-inf")
