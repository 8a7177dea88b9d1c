"""Spill files, in the format the daemon ingests (src/spill.ts, src/frames.ts):
<spool>/<run>--<writer>.spill, in the spool of the daemon that owns the run
(RunInfo.spool_dir, whatever this process's own HOME or LOGD_DIR), holds length-prefixed, checksummed frames

    u32 LE payload length | u32 LE crc32(type byte + payload) | u8 type | payload

a SPILL_HEADER frame (JSON) and then one SPILL_BATCH frame per batch, each an
encoded logd.v1.WriteRequest exactly as the stream would have carried it."""
import os
import struct
import zlib
from typing import List, Optional

from .._lazy import json


SPILL_HEADER = 1
SPILL_BATCH = 2


def frame(kind: int, payload: bytes) -> bytes:
    t = bytes((kind,))
    return struct.pack("<II", len(payload), zlib.crc32(payload, zlib.crc32(t)) & 0xFFFFFFFF) + t + payload


def spill_file_name(run_id: str, writer_id: str) -> str:
    return "%s--%s.spill" % (run_id, writer_id)


def deferred_spill_file_name(run_id: str, writer_id: str) -> str:
    """A deferred run's spill file (its header carries the create request): a running daemon's periodic scan picks
    it up too (src/spill.ts's deferredSpillFileName)."""
    return "%s--%s.deferred.spill" % (run_id, writer_id)


def write_spill(spool: str, run_id: str, writer_id: str, header: dict, batches: List[bytes], name: Optional[str] = None) -> str:
    """Writes the spill file (`name`, default <run>--<writer>.spill) into `spool` (the owning daemon's) and returns
    its path; raises OSError, leaving no half-written temp file behind, when it cannot."""
    path = os.path.join(spool, name or spill_file_name(run_id, writer_id))
    tmp = "%s.%d.tmp" % (path, os.getpid())
    data = [frame(SPILL_HEADER, json.dumps(header, separators=(",", ":")).encode())]
    data.extend(frame(SPILL_BATCH, b) for b in batches)
    try:
        os.makedirs(spool, mode=0o700, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(b"".join(data))
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def fallback_for(spool: str) -> Optional[str]:
    """The other place a spill can go when `spool` refuses it (a full disk): the user's private fallback for this data
    dir (deferred.fallback_dir, which the daemon of that data dir reads); None when `spool` is that already."""
    from ..deferred import fallback_dir  # not at import: deferred imports this module's users
    from ..paths import resolve_paths

    other = fallback_dir(resolve_paths().data_dir)
    return None if os.path.abspath(other) == os.path.abspath(spool) else other
