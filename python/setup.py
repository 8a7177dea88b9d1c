# The package is described in pyproject.toml; this file only adds its two C parts, each optional=True: without a C
# compiler (or Python's headers) the package installs without them.
# - logd/spool/_busguard.c: the crash journal's SIGBUS guard, a plain C library that logd/spool/busguard.py loads
#   with ctypes; without it a journal truncated by another process still ends the process.
# - logd/hot/_hot.c: log()'s hot path (issue 39), a CPython extension on the stable ABI (3.8+); without it log() runs
#   the pure-Python path, which is the reference (logd/hot/ says which is in use: logd.hot_path).
from setuptools import Extension, setup

setup(ext_modules=[
    Extension("logd.spool._busguard", sources=["logd/spool/_busguard.c"], optional=True),
    Extension("logd.hot._hot", sources=["logd/hot/_hot.c"], optional=True, py_limited_api=True,
              define_macros=[("Py_LIMITED_API", "0x03080000")]),
])
