"""One gRPC channel per daemon address and process, the token on every call,
a deadline on every unary call.

Fork safety: a channel is never used across fork(). The pool is keyed by pid;
after a fork the child forgets the parent's channels without closing them
(closing would run gRPC code on state whose threads stayed in the parent) and
keeps them referenced so no finalizer runs them either. A child that logs
dials its own channel."""
import os
import threading
from typing import Dict, List, Tuple


from .._lazy import grpc, pb
from .._version import PROTOCOL_VERSION, __version__
from .trust import verify_daemon_peer

TOKEN_METADATA_KEY = "x-logd-token"
SERVICE = "/logd.v1.Logd/"

_OPTIONS = [
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.enable_retries", 0),
]


def _unary():
    """The unary methods and their message types (a function: the messages load with the first connection)."""
    return {
        "Hello": (pb.HelloRequest, pb.HelloResponse),
        "CreateRun": (pb.CreateRunRequest, pb.RunInfo),
        "AttachRun": (pb.AttachRunRequest, pb.RunInfo),
        "FinishRun": (pb.FinishRunRequest, pb.FinishRunResponse),
        "GetRun": (pb.GetRunRequest, pb.RunInfo),
        "ListRuns": (pb.ListRunsRequest, pb.ListRunsResponse),
        "Status": (pb.StatusRequest, pb.StatusResponse),
        "Alert": (pb.AlertRequest, pb.AlertResponse),
        "SetEnvironment": (pb.SetEnvironmentRequest, pb.SetEnvironmentResponse),
        "ReadConsole": (pb.ReadConsoleRequest, pb.ReadConsoleResponse),
        "ReadMedia": (pb.ReadMediaRequest, pb.ReadMediaResponse),
        "ReadImage": (pb.ReadImageRequest, pb.ReadImageResponse),
    }


class CallError(Exception):
    """A call the daemon answered with an error (or did not answer in time)."""

    def __init__(self, code: "grpc.StatusCode", method: str, message: str):
        super().__init__(message)
        self.code = code
        self.method = method


class ServiceAddress:
    __slots__ = ("target", "token")

    def __init__(self, target: str, token: str):
        self.target = target
        self.token = token

    @staticmethod
    def parse(s: str) -> "ServiceAddress":
        i = s.rfind("#")
        if i <= 0 or i == len(s) - 1:
            shown = s.split("#", 1)[0] + ("#…" if "#" in s else "")
            raise ValueError(
                "LOGD_SERVICE=%r is not of the form unix:/path#token or host:port#token; unset it to let logd find or start its daemon" % shown
            )
        return ServiceAddress(s[:i], s[i + 1 :])

    def format(self) -> str:
        return "%s#%s" % (self.target, self.token)

    def __eq__(self, other) -> bool:
        return isinstance(other, ServiceAddress) and other.target == self.target and other.token == self.token

    def __hash__(self) -> int:
        return hash((self.target, self.token))


class Connection:
    def __init__(self, address: ServiceAddress):
        self.address = address
        self.pid = os.getpid()
        self.channel = grpc.insecure_channel(address.target, options=_OPTIONS)
        # The wire protocol and version go with every call: a daemon of another protocol refuses the call,
        # naming both versions (daemon/grpc/server.ts), rather than mixing silently.
        self.metadata = ((TOKEN_METADATA_KEY, address.token), ("x-logd-protocol", str(PROTOCOL_VERSION)), ("x-logd-version", __version__))
        self._calls = {}
        for name, (req, res) in _unary().items():
            self._calls[name] = self.channel.unary_unary(
                SERVICE + name, request_serializer=req.SerializeToString, response_deserializer=res.FromString
            )
        # Requests go out already encoded (a sealed batch is encoded once, kept, and
        # re-sent as is after a reconnect), so the stream's serializer is the identity.
        self.write = self.channel.stream_stream(
            SERVICE + "Write", request_serializer=lambda b: b, response_deserializer=pb.WriteResponse.FromString
        )

    def unary(self, method: str, request, timeout_s: float):
        try:
            return self._calls[method](request, timeout=timeout_s, metadata=self.metadata)
        except grpc.RpcError as e:
            code = e.code()
            hint = ""
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                hint = " (no answer within %d ms; is the daemon at %s overloaded or stopped?)" % (timeout_s * 1000, self.address.target)
            raise CallError(code, method, "%s: %s%s" % (method, e.details(), hint)) from None


_lock = threading.Lock()
_pool: Dict[Tuple[int, str, str], Connection] = {}
# Channels inherited over fork(): kept referenced, never closed or collected here.
_inherited: List[object] = []
_grpc_used = False  # this process (or an ancestor it was forked from) opened a channel
_grpc_in_parent = False  # ... and it was an ancestor: gRPC is unusable in this process


def connection_for(address: ServiceAddress) -> Connection:
    key = (os.getpid(), address.target, address.token)
    if _grpc_in_parent:
        raise RuntimeError("logd: gRPC cannot be used in a process forked after logd had connected (this is a bug in logd: it should have used its relay)")
    with _lock:
        c = _pool.get(key)
        if c is None:
            # Before anything reaches the daemon (not even the token): it must run as this user.
            verify_daemon_peer(address.target)
            global _grpc_used
            _grpc_used = True
            c = Connection(address)
            _pool[key] = c
        return c


def forked_after_grpc() -> bool:
    """True in a process forked from one that had opened gRPC channels: gRPC is unusable here."""
    return _grpc_in_parent


def drop_connection(c: Connection) -> None:
    with _lock:
        _pool.pop((c.pid, c.address.target, c.address.token), None)


def keep_forever(obj) -> None:
    """Makes obj immortal in this process: no finalizer of a gRPC object inherited over
    fork() may run here, not even at interpreter shutdown, when module globals are cleared."""
    try:
        import ctypes

        ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))
    except Exception:
        pass
    _inherited.append(obj)


def _after_fork_in_child() -> None:
    global _lock, _grpc_in_parent
    _grpc_in_parent = _grpc_used
    _lock = threading.Lock()  # the parent's may have been held by a thread the child lacks
    for c in _pool.values():
        keep_forever(c)
    _pool.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
