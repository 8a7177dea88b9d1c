"""Which hot path this process uses for log() (issue 39): the C one (_hot.c, built by `pip install` where a C
compiler is found and shipped in the wheel), or the pure-Python one, which is the reference and handles every case
the C one hands back. LOGD_PURE_PYTHON=1 keeps the C one off (the test suite runs the Python client both ways).
`logd.hot_path` says which is in use, and why when it is Python."""
import os

try:
    if os.environ.get("LOGD_PURE_PYTHON", "") not in ("", "0"):
        raise ImportError("LOGD_PURE_PYTHON is set")
    from . import _hot

    console = _hot.console
    tee = _hot.tee
    RingBase = _hot.Ring
    TeeBase = _hot.TeeBase
    RunBase = _hot.RunBase  # run.py's Run: its log() and the fields it reads, in C
    WriterBase = _hot.WriterBase  # spool/segments.py's OpenSegments: the fields log() reads
    CaptureBase = _hot.CaptureBase  # console's ConsoleCapture: the fields a captured write reads
    name = "c"
except ImportError as e:  # no compiled module for this platform or Python, or turned off
    console = None
    tee = None

    class RingBase:  # journal.py's base: plain attributes
        pass

    TeeBase = object  # console.py's _Tee then has its Python write()
    RunBase = object  # Run.log is then Run._log_slow
    WriterBase = object
    CaptureBase = object

    name = "python (%s)" % (str(e).split("\n")[0] or "no compiled hot path")


def address_of(mm) -> int:
    """A mapping's address, for the C path's writes (0 when it is not in use). No export is kept, so the mapping can
    be closed later; journal.py sets _base to 0 before it does."""
    if console is None:
        return 0
    import ctypes

    view = ctypes.c_char.from_buffer(mm)
    try:
        return ctypes.addressof(view)
    finally:
        del view
