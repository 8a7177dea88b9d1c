"""The relay process of a forked child (see relay.py): started as `python -m logd.forks._relay_main`,
it reads batches from the child over a pipe and carries them to the daemon on a connection of its
own, under the seqs the child gave them (the child's crash journal holds them under the same
seqs), and passes the daemon's acknowledgements back. It sits above both relay.py (the pipe's
protocol) and run.py (the run it writes into)."""
import json
import os
import signal
import sys
import threading

from logd import _warn
from logd._pb import logd_pb2 as pb
from logd.transport.connection import ServiceAddress
from logd.paths import tunables
from logd.forks.relay import _recv, _remove, _send, relay_marker
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


def _first(first, out: _Out):
    """The run this relay carries rows for: an inherited one ("open"), or one it creates ("init") or attaches to
    ("attach") for its forked child (forked.py). Returns the run, or None when it answered with an error."""
    import grpc

    import logd
    from logd.transport.reach import with_daemon

    flush_s = tunables().flush_interval_s

    def factory(run_id, run_token, spool_dir):
        def make(addr, wid, relay=False, deferred=None):
            # No journal here: the child journals its rows itself, under this writer id.
            return Writer(addr, run_id, run_token, wid, client, flush_s, _warn, tunables().max_buffer_bytes,
                          spool_dir or None, journal_mb=0, on_acked=out.acked, deferred=deferred)
        return make

    kind = first[0]
    if kind == "open":
        _, service, run_id, run_token, writer_id, client_bytes, spool_dir = first
        client = pb.ClientInfo.FromString(client_bytes)
        client.pid = os.getpid()  # the daemon watches the process that holds the stream
        make = factory(run_id, run_token, spool_dir)
        run = Run(pb.RunInfo(id=run_id), make(ServiceAddress.parse(service), writer_id), run_token, False, _warn, make)
        run._writer.connect()
        run._writer.wait_opened(10.0)
        _remove(relay_marker(run_id, writer_id))
        return run
    try:
        if kind == "init":
            _, req_bytes, on_error = first
            req = pb.CreateRunRequest.FromString(req_bytes)
            req.client.pid = os.getpid()  # the owner the daemon watches: this relay, which outlives the child if need be
            client = req.client
            run = logd.create_run(req, on_error, factory)
        else:
            _, service, run_id, run_token, writer_id, client_bytes = first
            client = pb.ClientInfo.FromString(client_bytes)
            client.pid = os.getpid()
            areq = pb.AttachRunRequest(client=client, run_id=run_id, run_token=run_token, writer_id=writer_id)
            info, address = with_daemon("attach", lambda c, timeout_s: c.unary("AttachRun", areq, timeout_s),
                                        ServiceAddress.parse(service))
            make = factory(info.id, run_token, info.spool_dir)
            run = Run(info, make(address, writer_id), run_token, False, _warn, make)
    except Exception as e:
        code = e.code.name if isinstance(e, logd.CallError) and isinstance(e.code, grpc.StatusCode) else None
        out.say(("error", type(e).__name__, str(e), code))
        return None
    w = run._writer
    info = pb.RunInfo(id=run.id, name=run.name, project=run.project, group=run.group, run_token=run._token,
                      owner_writer_id=w.writer_id if run.is_owner else "", spool_dir=w.spool_dir,
                      config_json=json.dumps(dict(run.config)))
    address = w.conn.address if w.conn is not None else run._address
    out.say(("created", info.SerializeToString(), address.format(), w.last_problem if w.deferred else None))
    if not w.deferred:
        w.connect()
    logd.transport.keepalive.ensure(logd.client_info, tunables().keepalive_s, logd.live_runs)
    return run


def main() -> None:
    # Ctrl-C reaches the whole process group; this relay ends when its child does (the pipe closes), delivering.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    inp = sys.stdin.buffer
    out = _Out(sys.stdout.buffer)
    first = _recv(inp)
    if not first or first[0] not in ("open", "init", "attach"):
        sys.exit(2)
    run = _first(first, out)
    if run is None:
        return
    w = run._writer
    said = False
    bye_code = None
    while True:
        msg = _recv(inp)
        if msg is None:
            # The child is gone: deliver, then detach, or, for a run it created, finish it with its code.
            code = (0 if bye_code is None else bye_code) if said else 1
            run.finish(exit_code=code, timeout=10.0)
            return
        kind = msg[0]
        if kind == "batches":
            for seq, rows, updates in msg[1]:
                w.add_segment(seq, rows, updates)
            w.kick()
        elif kind == "bye":
            said, bye_code = True, msg[1]
        elif kind == "sync":
            ok = w.wait_acked(msg[1])
            out.say(("ok", ok, w.last_problem, w.acked_seq))
        elif kind == "finish":
            res = run.finish(exit_code=msg[1], timeout=msg[2])
            out.say(("finished", res.state, res.message, res.timed_out, w.acked_seq))
            return


if __name__ == "__main__":
    main()
