"""While this process has runs open, it tells their daemons it lives: a Hello every LOGD_KEEPALIVE_MS (15 s) from a
daemon thread, costing log() nothing. A daemon on another host cannot watch this process by pid; silence past its
lease (LOGD_OWNER_LEASE_MS, 60 s) means the owner is gone and its run is crashed. The same as the TypeScript client
(client/index.ts). A forked child starts its own when it makes a run of its own."""
import os
import threading
import time

from .._lazy import pb
from .connection import connection_for

_lock = threading.Lock()
_started_in = -1  # the pid whose thread runs; a forked child has none


def ensure(client_info, interval_s: float, live_runs) -> None:
    global _started_in
    if interval_s <= 0:
        return
    with _lock:
        if _started_in == os.getpid():
            return
        _started_in = os.getpid()
    threading.Thread(target=_loop, args=(client_info, interval_s, live_runs), name="logd-keepalive", daemon=True).start()


def _loop(client_info, interval_s: float, live_runs) -> None:
    global _started_in
    pid = os.getpid()
    while True:
        time.sleep(interval_s)
        if os.getpid() != pid:
            return
        runs = live_runs()
        if not runs:
            with _lock:
                if _started_in == pid:
                    _started_in = -1
            return
        told = set()
        for r in runs:
            conn = getattr(getattr(r, "_writer", None), "conn", None)
            if conn is None or id(conn) in told:
                continue  # a forked child's relay writer: its relay process speaks for it
            told.add(id(conn))
            try:
                conn.unary("Hello", pb.HelloRequest(protocol_version=1, client=client_info()), min(interval_s, 10.0))
            except Exception:
                pass  # the daemon is away or restarting: the writers find it again; the next tick tries anew
