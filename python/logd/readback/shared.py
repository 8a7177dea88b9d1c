"""The shared store's reader for logd.Api(store=URL): a child process, `logd reads-server`, serves the shared
PostgreSQL store's reads on a private socket (daemon/shared-reads), and Api reads through it with the calls it
makes to the node's daemon. The node's daemon is not involved: a large read of the shared store costs the
trainers on this node nothing.

The URL travels in the child's environment (LOGD_STORE_URL), never on its command line, which every local user
can read. The child ends when this process closes its standard input (Api.close(), or this process ending,
however it ends), or after 30 minutes without a call.
"""
import json
import os
import select
import subprocess
import time

from ..transport.connection import ServiceAddress
from ..transport.discovery import daemon_command

START_DEADLINE_S = 30.0


class SharedReader:
    def __init__(self, url: str, deadline_s: float = START_DEADLINE_S):
        env = dict(os.environ, LOGD_STORE_URL=url)
        env.pop("LOGD_SERVICE", None)
        self.proc = subprocess.Popen(daemon_command() + ["reads-server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env, close_fds=True)
        line = self._first_line(deadline_s)
        try:
            said = json.loads(line)
            self.address = ServiceAddress(said["target"], said["token"])
            self.where = said.get("where", "the shared store")
        except (ValueError, KeyError, TypeError):
            err = self._stderr()
            self.close()
            raise ConnectionError("logd: could not open the shared store: %s" % (err or "the reader said %r" % line[:200])) from None

    def _first_line(self, deadline_s: float) -> str:
        end = time.monotonic() + deadline_s
        buf = b""
        fd = self.proc.stdout.fileno()
        while b"\n" not in buf:
            left = end - time.monotonic()
            if left <= 0:
                self.close()
                raise TimeoutError("logd: the shared store's reader did not answer within %d s (is the store reachable?)" % deadline_s)
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(fd, 4096)
            if not chunk:  # it ended: its stderr says why (a bad URL, a store that refuses, no such database)
                err = self._stderr()
                self.close()
                raise ConnectionError("logd: could not open the shared store: %s" % (err or "the reader ended at once (exit %s)" % self.proc.poll()))
            buf += chunk
        return buf.split(b"\n", 1)[0].decode("utf-8", "replace")

    def _stderr(self) -> str:
        try:
            self.proc.wait(timeout=5)
            data = self.proc.stderr.read() or b""
        except (subprocess.TimeoutExpired, OSError, ValueError):
            return ""
        text = data.decode("utf-8", "replace").strip()
        return text[4:] if text.startswith("logd: ") else text

    def close(self) -> None:
        p = self.proc
        if p.poll() is None:
            try:
                p.stdin.close()  # it ends itself, closing its store connections
                p.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                p.kill()
                p.wait(timeout=5)
        for f in (p.stdin, p.stdout, p.stderr):
            try:
                f.close()
            except OSError:
                pass
