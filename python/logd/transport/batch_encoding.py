"""A sealed batch's bytes on the wire: the columns of a RecordBatch (little-endian
float64 and uint32 arrays) and the WriteRequest around it, encoded once on the
writer thread and kept as they are until the daemon acknowledges them."""
import sys
from array import array

_BIG_ENDIAN = sys.byteorder == "big"


def _le(a: array) -> bytes:
    if _BIG_ENDIAN:
        a.byteswap()
    return a.tobytes()


def _u32() -> array:
    a = array("I")
    if a.itemsize != 4:
        a = array("L") if array("L").itemsize == 4 else array("H")  # never on Linux x86-64 / arm64
    return a


def _values(vals: list) -> array:
    try:
        return array("d", vals)
    except OverflowError:  # an int beyond float range: stored as +-inf, as JSON would
        return array("d", [_to_float(v) for v in vals])


def _to_float(v) -> float:
    try:
        return float(v)
    except OverflowError:
        return float("inf") if v > 0 else float("-inf")


# RecordBatch's column fields (steps, times, counts, key_ids, values): field number << 3 | 2 (length-delimited).
_COLUMN_TAGS = ((4 << 3 | 2, "steps"), (5 << 3 | 2, "times"), (6 << 3 | 2, "counts"), (7 << 3 | 2, "key_ids"), (8 << 3 | 2, "values"))
_WRITE_REQUEST_BATCH_TAG = 2 << 3 | 2


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_batch(batch) -> bytes:
    """The WriteRequest for one batch, with every empty column written out as an empty field.

    proto3 leaves an empty bytes field off the wire, and the daemon's decoder then
    gives it no byte length: it refuses the batch ("steps column has undefined
    bytes"). That would lose a batch of config/summary updates only (0 rows), one
    that carries just the dropped-rows count, or rows whose values were all None.
    An explicit empty field decodes as empty everywhere."""
    inner = batch.SerializeToString() + bytes(b for tag, name in _COLUMN_TAGS if not getattr(batch, name) for b in (tag, 0))
    return bytes((_WRITE_REQUEST_BATCH_TAG,)) + _varint(len(inner)) + inner
