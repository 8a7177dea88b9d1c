"""Past the memory bound (LOGD_MAX_BUFFER_MB), sealed batches wait in a private
file instead of RAM (<spool>/<run>--<writer>.overflow, in the spool the daemon named), as in the
TypeScript client: training never blocks and nothing is dropped while the
daemon is stopped or slow. Only when this disk is full too are rows dropped,
and counted (Writer._drop); what is left of such a batch (its seq, names,
updates and the count, a few bytes) is kept in memory in its place in the
queue (keep()). They are read back in order as acknowledgements free memory."""
import os
from typing import List, Optional, Tuple


class Overflow:
    def __init__(self, path: str):
        self.path = path
        self._fd = None
        self._end = 0
        self._queue: List[Tuple[int, int, int, Optional[bytes]]] = []  # (seq, offset, length, bytes kept in memory)
        self.bytes = 0

    @property
    def count(self) -> int:
        return len(self._queue)

    def push(self, seq: int, data: bytes) -> Optional[OSError]:
        """Keeps a batch on disk. Returns the I/O error (ENOSPC, EACCES, ...) when it cannot: never raises."""
        try:
            if self._fd is None:
                os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
                self._end = 0
            view = memoryview(data)
            offset = self._end
            while view:
                n = os.pwrite(self._fd, view, offset)
                view = view[n:]
                offset += n
        except OSError as e:
            if not self._queue:
                self.clear()  # nothing kept: no file left behind
                try:
                    os.unlink(self.path)
                except OSError:
                    pass
            return e
        self._queue.append((seq, self._end, len(data), None))
        self._end += len(data)
        self.bytes += len(data)
        return None

    def keep(self, seq: int, data: bytes) -> None:
        """Queues a small batch in memory, behind those on disk (a dropped batch's remains: the disk is full)."""
        self._queue.append((seq, -1, len(data), data))
        self.bytes += len(data)

    def take(self, max_bytes: float) -> List[Tuple[int, bytes]]:
        """Batches from the front, up to max_bytes (at least one)."""
        out = []
        taken = 0
        while self._queue and (not out or taken + self._queue[0][2] <= max_bytes):
            seq, offset, length, kept = self._queue.pop(0)
            out.append((seq, kept if kept is not None else os.pread(self._fd, length, offset)))
            taken += length
            self.bytes -= length
        if not self._queue:
            self.clear()
        return out

    def all(self) -> List[Tuple[int, bytes]]:
        return self.take(float("inf")) if self._queue else []

    def clear(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            try:
                os.unlink(self.path)
            except OSError:
                pass
        self._queue = []
        self.bytes = 0
