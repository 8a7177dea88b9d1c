# The package is described in pyproject.toml; this file only adds the crash journal's SIGBUS guard
# (logd/_busguard.c, a plain C library that logd/busguard.py loads with ctypes). optional=True: without a C
# compiler the package installs without it, and a journal truncated by another process still ends the process.
from setuptools import Extension, setup

setup(ext_modules=[Extension("logd._busguard", sources=["logd/_busguard.c"], optional=True)])
