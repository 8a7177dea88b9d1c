"""The relay process of a forked child (see relay.py): started as `python -m logd._relay_main`,
it reads batches from the child over a pipe and carries them to the daemon on a connection of its
own, under the seqs the child gave them (the child's crash journal holds them under the same
seqs), and passes the daemon's acknowledgements back. It sits above both relay.py (the pipe's
protocol) and run.py (the run it writes into)."""
import os
import sys
import threading

from logd import _warn
from logd._pb import logd_pb2 as pb
from logd.connection import ServiceAddress
from logd.paths import tunables
from logd.relay import _recv, _remove, _send, relay_marker
from logd.run import Run
from logd.writer import Writer


class _Out:
    """The pipe to the child: answers from the main thread, acknowledgements from a thread of their own (the
    writer calls on_acked holding its lock, which must never wait on a child that does not read)."""

    def __init__(self, f):
        self._f = f
        self._lock = threading.Lock()
        self._cv = threading.Condition()
        self._acked = 0
        threading.Thread(target=self._pass_acks, name="logd-relay-acks", daemon=True).start()

    def say(self, msg) -> bool:
        with self._lock:
            try:
                _send(self._f, msg)
                return True
            except (OSError, ValueError):  # the child is gone
                return False

    def acked(self, seq: int) -> None:
        with self._cv:
            if seq > self._acked:
                self._acked = seq
                self._cv.notify()

    def _pass_acks(self) -> None:
        sent = 0
        while True:
            with self._cv:
                while self._acked == sent:
                    self._cv.wait()
                sent = self._acked
            if not self.say(("acked", sent)):
                return


def main() -> None:
    inp = sys.stdin.buffer
    out = _Out(sys.stdout.buffer)
    first = _recv(inp)
    if not first or first[0] != "open":
        sys.exit(2)
    _, service, run_id, run_token, writer_id, client_bytes, spool_dir = first
    flush_s = tunables().flush_interval_s
    client = pb.ClientInfo.FromString(client_bytes)
    client.pid = os.getpid()  # the daemon watches the process that holds the stream

    def make(addr, wid, relay=False):
        # No journal here: the child journals its rows itself, under this writer id.
        return Writer(addr, run_id, run_token, wid, client, flush_s, _warn, tunables().max_buffer_bytes, spool_dir or None,
                      journal_mb=0, on_acked=out.acked)

    run = Run(pb.RunInfo(id=run_id), make(ServiceAddress.parse(service), writer_id), run_token, False, _warn, make)
    w = run._writer
    w.connect()
    w.wait_opened(10.0)
    _remove(relay_marker(run_id, writer_id))
    while True:
        msg = _recv(inp)
        if msg is None:
            run.finish(timeout=10.0)  # the child is gone: deliver, detach, leave
            return
        kind = msg[0]
        if kind == "batches":
            for seq, rows, updates in msg[1]:
                w.add_segment(seq, rows, updates)
            w.kick()
        elif kind == "sync":
            ok = w.wait_acked(msg[1])
            out.say(("ok", ok, w.last_problem, w.acked_seq))
        elif kind == "finish":
            res = run.finish(exit_code=msg[1], timeout=msg[2])
            out.say(("finished", res.state, res.message, res.timed_out, w.acked_seq))
            return


if __name__ == "__main__":
    main()
