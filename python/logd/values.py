"""Turning a log() dict into flat (key, number) lists on the training thread.

Nested dicts flatten to "a/b". Ints and floats go through as they are; bools
become 1/0; numpy and torch scalars (anything 0-d with .item()) become their
Python number; anything else that float() takes as a number (Fraction,
Decimal, an object with __float__) becomes that float; None is skipped like
an absent value. Anything else is a TypeError, raised before anything of the
row is kept. (A row with the same names as the last one takes Run.log()'s
short path, array("d", values), which takes exactly the same numbers.)"""
import math
from numbers import Real

from ._lazy import json

MAX_KEY_BYTES = 256
# Names exports use for a row's own columns (src/names.ts): a metric by one of these names would give a row two
# `_step` keys (and a CSV two `_step` columns), so it is refused.
RESERVED_KEYS = ("_step", "_time", "_writer")


def check_key(key) -> None:
    if not isinstance(key, str):
        raise TypeError("logd: metric name %r is a %s; metric names are strings" % (key, type(key).__name__))
    if not key:
        raise TypeError("logd: metric name is empty")
    try:
        n = len(key.encode("utf-8"))
    except UnicodeEncodeError:
        raise TypeError("logd: metric name %r is not valid UTF-8 (a lone surrogate)" % key[:40]) from None
    if n > MAX_KEY_BYTES:
        raise TypeError("logd: metric name %r is longer than %d bytes" % (key[:40] + "…", MAX_KEY_BYTES))
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in key):
        raise TypeError("logd: metric name %r contains a control character" % key[:40])
    if key in RESERVED_KEYS:
        raise TypeError(
            "logd: metric name %r is reserved: exports use _step, _time and _writer for the row's own step, time and "
            "writer; log it under another name (for example %r), or pass the step as log(data, step=...)" % (key, key[1:]))


def duplicate_key_message(key: str) -> str:
    """A row's names after flattening ({"a": {"b": 1}} is "a/b") must differ, or one value would shadow the other."""
    return ("logd: metric name %r appears twice in one row (a name with \"/\" and a nested dict flatten to the same "
            "name); rename one of them" % key[:80])


def scalar(key: str, v):
    """The float of one non-plain value, None to skip it; TypeError when it is not a number."""
    if v is None:
        return None
    if isinstance(v, bool):
        return 1.0 if v else 0.0
    if isinstance(v, Real):  # numpy float64/int64 register here, as do Fraction and Decimal-like types
        return float(v)
    item = getattr(v, "item", None)
    if item is not None and _is_scalar_array(v):
        x = item()  # a torch tensor on a GPU synchronises here, as .item() would in the user's code
        if isinstance(x, bool):
            return 1.0 if x else 0.0
        if isinstance(x, Real):
            return float(x)
    if not isinstance(v, (str, bytes, bytearray)) and (hasattr(type(v), "__float__") or hasattr(type(v), "__index__")):
        try:
            return float(v)  # what array("d", ...) on log()'s short path takes too
        except Exception:
            pass  # a tensor of several elements, say: not a number
    what = type(v).__name__
    if isinstance(v, (list, tuple)):
        what = "list"
    elif isinstance(v, str):
        what = "string"
    raise TypeError("logd: %r is a %s; log() takes numbers, bools, nested dicts of them, and logd.Histogram, logd.Image "
                    "and logd.Text (wrap a string in logd.Text(s), an array in logd.Histogram(a))" % (key, what))


def _is_scalar_array(v) -> bool:
    numel = getattr(v, "numel", None)  # torch.Tensor
    if callable(numel):
        return numel() == 1
    size = getattr(v, "size", None)  # numpy.ndarray / numpy scalar
    return size == 1


def to_json(value) -> str:
    """JSON that keeps non-finite numbers, as the strings "NaN", "Infinity", "-Infinity"."""
    return json.dumps(_jsonable(value), allow_nan=False, separators=(",", ":"))


def _jsonable(v):
    if isinstance(v, float):
        if math.isfinite(v):
            return v
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    if v is None or isinstance(v, (str, bool, int)):
        return v
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, Real):
        return _jsonable(float(v) if not isinstance(v, int) else int(v))
    item = getattr(v, "item", None)
    if item is not None and _is_scalar_array(v):
        return _jsonable(item())
    tolist = getattr(v, "tolist", None)
    if callable(tolist):
        return _jsonable(tolist())
    return str(v)
