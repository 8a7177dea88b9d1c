"""The SIGBUS guard of the crash journal (_busguard.c, loaded with ctypes).

A journal is a file mapped MAP_SHARED; truncated by another process, every
access past its new end is a SIGBUS, which would kill the trainer. With the
guard, the fault is repaired (anonymous memory in place of the lost pages),
the journal is marked lost, and the writer gives it up and says so
(segments.py). Without the library (a build without a C compiler: `pip
install ./python` compiles it when it can), journals work as before and such
a truncation still ends the process; unavailable() says why.
"""
import os

_lib = None  # None: not loaded yet; False: not available
_why = ""


def _load():
    global _lib, _why
    if _lib is None:
        _lib = False
        here = os.path.dirname(os.path.abspath(__file__))
        names = sorted(n for n in os.listdir(here) if n.startswith("_busguard") and n.endswith(".so"))
        if not names:
            _why = "no _busguard*.so in %s (built by `pip install` where a C compiler is found)" % here
            return None
        import ctypes

        try:
            lib = ctypes.CDLL(os.path.join(here, names[0]))
            lib.logd_bus_guard.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
            lib.logd_bus_guard.restype = ctypes.c_int
            lib.logd_bus_lost.argtypes = [ctypes.c_int]
            lib.logd_bus_lost.restype = ctypes.c_int
            lib.logd_bus_release.argtypes = [ctypes.c_int]
            lib.logd_bus_release.restype = None
        except (OSError, AttributeError) as e:
            _why = "%s could not be loaded: %s" % (names[0], e)
            return None
        _lib = lib
    return _lib or None


def unavailable() -> str:
    """Why there is no guard ('' when there is one)."""
    _load()
    return _why


def guard(mm, length: int) -> int:
    """Guards a mapping (an mmap.mmap): its slot, or -1 (no guard)."""
    lib = _load()
    if lib is None:
        return -1
    import ctypes

    view = ctypes.c_char.from_buffer(mm)  # its address; the export ends with `view`, so mm can be closed later
    try:
        return lib.logd_bus_guard(ctypes.addressof(view), length)
    finally:
        del view


def lost(slot: int) -> bool:
    """True once a fault in the guarded mapping was repaired: its file was truncated under it."""
    return slot >= 0 and bool(_lib.logd_bus_lost(slot))


def release(slot: int) -> None:
    if slot >= 0:
        _lib.logd_bus_release(slot)
