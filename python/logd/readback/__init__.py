"""Reading runs back (docs/api.md, "Reading runs back"): the node's runs as a table, a run's full history as a
DataFrame. Not imported by `import logd` (the training path stays light): `logd.Api` loads it on first use.

    api = logd.Api()                                  # the daemon of this node (found, or started, as init() does)
    df = api.runs(project="sweep").to_pandas()        # one row per run: config.* and summary.* columns
    h = api.run("tr…").history(keys=["loss"])         # every stored row, unsampled: _step, _time, loss

Columns travel from the daemon as packed little-endian arrays (ReadHistory's chunks), decoded with numpy; pandas
is needed only for to_pandas()/history() (format="numpy" gives plain arrays), and says what to install when missing.
"""
import json
import os
from typing import Iterable, Optional

from .._pb import logd_pb2 as pb
from ..transport.connection import SERVICE, CallError, connection_for
from ..transport.discovery import find_daemon
from ._reads import _Reads
from ._run import RunView, _rank_and_node, _UNKNOWN  # noqa: F401  (_rank_and_node: its tests read it here)
from ._runs import RunsList, _ordered

__all__ = ["Api", "RunsList", "RunView"]

_PAGE = 1000


class Api(_Reads):
    """Reads runs back: from this node's daemon (found, or started, as init() finds it; LOGD_SERVICE names one), or,
    with store="postgresql://..." (or LOGD_STORE_URL), from the shared store that every node uploads to, through
    a reader process of its own (readback/shared.py); close() ends it (so does this process ending)."""

    def __init__(self, timeout: float = 30.0, store: Optional[str] = None):
        self._timeout = timeout
        self._shared = None
        url = store if store is not None else os.environ.get("LOGD_STORE_URL", "")
        if url:
            from .shared import SharedReader

            self._shared = SharedReader(url)
            self.where = self._shared.where
            self._conn = connection_for(self._shared.address)
        else:
            self.where = "this node's store"
            self._conn = connection_for(find_daemon())

    def close(self) -> None:
        """Ends the shared store's reader (nothing to do for the node's store)."""
        if self._shared is not None:
            self._shared.close()

    def __enter__(self) -> "Api":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        s = getattr(self, "_shared", None)
        if s is not None and s.proc.poll() is None:
            try:
                s.proc.stdin.close()
            except (OSError, ValueError):
                pass

    def _unary(self, method: str, req):
        """A call; a daemon that went away since (stopped, restarted) is looked for once more, as init() would."""
        try:
            return self._conn.unary(method, req, self._timeout)
        except CallError as e:
            if self._shared is not None or e.code is None or e.code.name not in ("UNAVAILABLE", "UNAUTHENTICATED"):
                raise
        os.environ.pop("LOGD_SERVICE", None)
        self._conn = connection_for(find_daemon(ignore_env=True))
        return self._conn.unary(method, req, self._timeout)

    def _pages(self, method: str, request):
        """Every entry of a paged read (ReadConsole, ReadMedia), decoded: request(after_offset) makes each call."""
        after = 0
        while True:
            res = self._unary(method, request(after))
            for text in res.entries_json:
                yield json.loads(text)
            if not res.next_offset:
                return
            after = res.next_offset

    def _stream(self, method: str, req_type, res_type):
        return self._conn.channel.unary_stream(SERVICE + method, request_serializer=req_type.SerializeToString, response_deserializer=res_type.FromString)

    def runs(self, project: str = "", group: str = "", state: str = "", tag: str = "", search: str = "", limit: Optional[int] = None,
             filter: str = "", tags: Optional[Iterable[str]] = None, order: str = "") -> RunsList:
        """The runs of the node's store, newest first, as the daemon lists them (every one, unless limit). filter:
        only runs where every term holds, as `logd runs --filter` reads it ("lr < 0.01; state = crashed": config
        and summary keys, summary.KEY.min/.max/.best, run fields); a term that does not parse raises ValueError.
        tags: only runs that have every one of these tags (tag: one). order: sorted by a field of to_pandas()'s
        table ("created", "name", "rows", "duration_s", "config.lr", "summary.loss", ...), "-" first for
        descending; runs without it come last; limit then keeps the first ones."""
        if isinstance(tags, str):
            raise ValueError("logd: tags=%r must be a list of tags (tag= takes one)" % (tags,))
        want_tags = [t for t in ([tag] if tag else []) + list(tags or []) if t]
        if order and not isinstance(order, str):
            raise ValueError("logd: order=%r must be a field name, '-' first for descending" % (order,))
        whole = bool(order) or len(want_tags) > 1  # sorted or filtered here: every match first, then the limit
        out = self._list(project, group, state, want_tags[0] if want_tags else "", search, None if whole else limit, filter)
        if len(want_tags) > 1:
            out[:] = [r for r in out if all(t in r.tags for t in want_tags)]
        if order:
            out = _ordered(out, order)
        if whole and limit is not None:
            del out[limit:]
        return out

    def _list(self, project: str, group: str, state: str, tag: str, search: str, limit: Optional[int], filter: str) -> RunsList:
        out = RunsList()
        offset = 0
        while True:
            want = _PAGE if limit is None else min(_PAGE, limit - len(out))
            if want <= 0:
                break
            try:
                page = self._unary("ListRuns", pb.ListRunsRequest(project=project, group=group, state=state, tag=tag, text=search, limit=want,
                                                                  offset=offset, filter=filter))
            except CallError as e:
                if filter and e.code is not None and e.code.name == "INVALID_ARGUMENT":
                    raise ValueError("logd: %s" % e) from None
                raise
            out.extend(RunView(self, r) for r in page.runs)
            if not page.runs or not page.next_offset and len(page.runs) < want:
                break
            offset = page.next_offset or offset + len(page.runs)
            if offset >= page.total:
                break
        return out

    def run(self, run_id: str) -> RunView:
        try:
            return RunView(self, self._unary("GetRun", pb.GetRunRequest(run_id=run_id)))
        except CallError as e:
            if e.code.name == "NOT_FOUND":
                raise LookupError("logd: no run %r in %s (%s); list them with Api.runs()" % (run_id, self.where, e)) from None
            raise

    def group(self, name: str, project: str = "") -> RunsList:
        """The runs of a group (every rank), as runs() lists them."""
        got = self.runs(project=project, group=name)
        got[:] = [r for r in got if r.group == name]
        if not got:
            raise LookupError("logd: no group %r in %s; list the runs with Api.runs()" % (name, self.where))
        return got
