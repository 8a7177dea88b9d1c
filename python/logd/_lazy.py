"""Modules logd loads when it first uses them, not at `import logd`: grpc, logd's protobuf messages, json and re.

grpcio's import costs about 55 ms (its Cython core and asyncio), protobuf's about 20 ms, json and re together
about 8 ms: more than the rest of `import logd`. A program that imports logd and never logs (a disabled run, a
tool that only reads runs back) pays nothing for them, and one that logs pays inside init(), which waits for the
daemon anyway. `grpc.X`, `pb.X`, `json.X`, `re.X` here are the real modules' attributes, looked up once and then
kept on the stand-in.
"""
import importlib


class _Lazy:
    def __init__(self, name: str):
        object.__setattr__(self, "_name", name)

    def __getattr__(self, attr):
        value = getattr(importlib.import_module(self._name), attr)
        object.__setattr__(self, attr, value)  # later lookups find it without coming here
        return value

    def __repr__(self):
        return "<%s, loaded on first use>" % self._name


grpc = _Lazy("grpc")
pb = _Lazy("logd._pb.logd_pb2")
json = _Lazy("json")
re = _Lazy("re")
