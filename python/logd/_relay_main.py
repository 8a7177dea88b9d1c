"""The relay process of a forked child (see relay.py): started as `python -m logd._relay_main`,
it reads rows from the child over a pipe and carries them to the daemon on a connection of its
own. It sits above both relay.py (the pipe's protocol) and run.py (the run it writes into)."""
import os
import sys

from logd import _warn
from logd._pb import logd_pb2 as pb
from logd.connection import ServiceAddress
from logd.paths import tunables
from logd.relay import _recv, _remove, _send, relay_marker
from logd.run import Run
from logd.writer import Writer


def main() -> None:
    inp = sys.stdin.buffer
    out = sys.stdout.buffer
    first = _recv(inp)
    if not first or first[0] != "open":
        sys.exit(2)
    _, service, run_id, run_token, writer_id, client_bytes, spool_dir = first
    flush_s = tunables().flush_interval_s
    client = pb.ClientInfo.FromString(client_bytes)
    client.pid = os.getpid()  # the daemon watches the process that holds the stream

    def make(addr, wid, relay=False):
        return Writer(addr, run_id, run_token, wid, client, flush_s, _warn, tunables().max_buffer_bytes, spool_dir or None)

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
        if kind == "rows":
            for row in msg[1]:
                w.add(*row)
            for kind2, text in msg[2]:
                w.update(kind2, text)
            w.kick()
        elif kind == "sync":
            ok = w.wait_acked(msg[1])
            _send(out, ("ok", ok, w.last_problem))
        elif kind == "finish":
            res = run.finish(exit_code=msg[1], timeout=msg[2])
            _send(out, ("finished", res.state, res.message, res.timed_out))
            return


if __name__ == "__main__":
    main()
