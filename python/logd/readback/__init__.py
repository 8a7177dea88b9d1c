"""Reading runs back (docs/api.md, "Reading runs back"): the node's runs as a table, a run's full history as a
DataFrame. Not imported by `import logd` (the training path stays light): `logd.Api` loads it on first use.

    api = logd.Api()                                  # the daemon of this node (found, or started, as init() does)
    df = api.runs(project="sweep").to_pandas()        # one row per run: config.* and summary.* columns
    h = api.run("tr…").history(keys=["loss"])         # every stored row, unsampled: _step, _time, loss

Columns travel from the daemon as packed little-endian arrays (ReadHistory's chunks), decoded with numpy; pandas
is needed only for to_pandas()/history() (format="numpy" gives plain arrays), and says what to install when missing.
"""
import json
from datetime import datetime, timezone
from typing import Dict, Iterable, List, Optional

from .._pb import logd_pb2 as pb
from ..connection import SERVICE, CallError, connection_for
from ..discovery import find_daemon

__all__ = ["Api", "RunsList", "RunView"]

_PAGE = 1000


def _need(module: str, what: str):
    try:
        return __import__(module)
    except ImportError:
        raise ImportError("logd: %s needs %s; install it: pip install %s" % (what, module, module)) from None


def _flatten(prefix: str, d, out: Dict[str, object]) -> None:
    for k, v in (d or {}).items():
        if isinstance(v, dict) and v:
            _flatten("%s%s." % (prefix, k), v, out)
        else:
            out[prefix + k] = v


def _number(v):
    """JSON keeps NaN and ±Infinity as strings (src/json.ts): as floats again."""
    if v == "NaN":
        return float("nan")
    if v == "Infinity":
        return float("inf")
    if v == "-Infinity":
        return float("-inf")
    return v


def _time(s: float):
    return datetime.fromtimestamp(s, tz=timezone.utc) if s else None


class RunsList(list):
    """Runs as the daemon lists them (each a RunView); to_pandas() gives one row per run."""

    def records(self) -> List[Dict[str, object]]:
        out = []
        for r in self:
            rec: Dict[str, object] = {
                "id": r.id, "name": r.name, "project": r.project, "group": r.group, "job_type": r.job_type, "rank": r.rank,
                "node": r.node, "state": r.state, "reason": r.state_reason, "exit_code": r.exit_code if r.state not in ("running", "finishing") else None,
                "created": _time(r.created_at), "finished": _time(r.finished_at),
                "duration_s": (r.finished_at - r.created_at) if r.finished_at else None, "rows": r.rows, "tags": list(r.tags),
            }
            _flatten("config.", r.config, rec)
            for k, v in r.summary.items():
                rec["summary." + k] = _number(v)
            out.append(rec)
        return out

    def to_pandas(self):
        pd = _need("pandas", "RunsList.to_pandas()")
        return pd.DataFrame.from_records(self.records())

    def _repr_html_(self):
        try:
            return self.to_pandas()._repr_html_()
        except ImportError:
            return None


class RunView:
    """One run as the daemon knows it: its fields, config, summary, and its history on demand."""

    def __init__(self, api: "Api", info):
        self._api = api
        self.id = info.id
        self.name = info.name
        self.project = info.project
        self.group = info.group
        self.job_type = info.job_type
        self.tags = list(info.tags)
        self.state = info.state
        self.state_reason = info.state_reason
        self.exit_code = info.exit_code
        self.created_at = info.created_at
        self.finished_at = info.finished_at
        self.rows = int(info.history_rows)
        self.config = json.loads(info.config_json or "{}")
        self.summary = json.loads(info.summary_json or "{}")
        self.metadata = json.loads(info.metadata_json or "{}")
        rank = self.metadata.get("rank")
        self.rank = rank.get("rank") if isinstance(rank, dict) and rank.get("rank", -1) >= 0 else None
        self.node = self.metadata.get("node") or self.metadata.get("host")

    @property
    def attempts(self):
        return self.metadata.get("attempts") or []

    @property
    def events(self):
        return (self.metadata.get("health") or {}).get("events") or []

    @property
    def end(self):
        """How its process ended (docs/story.md), or None."""
        return self.metadata.get("end")

    def __repr__(self):
        return "<logd run %s %s/%s %s, %d rows>" % (self.id, self.project, self.name, self.state, self.rows)

    def history(self, keys: Optional[Iterable[str]] = None, superseded: bool = False, format: str = "pandas", timeout: float = 600.0):
        """Every stored row of the run, unsampled, in the order they were stored: columns _step and _time (seconds
        since the epoch) and one per metric (NaN where a row has no value for it; NaN and ±inf logged come back as
        such). keys: only these metrics (a key no row has is an all-NaN column). superseded: also the rows a
        rewind (init(resume_from=...)) superseded, with _attempt and _superseded columns. format: "pandas" (a
        DataFrame) or "numpy" (a dict of arrays)."""
        if format not in ("pandas", "numpy"):
            raise ValueError("logd: format=%r must be 'pandas' or 'numpy'" % (format,))
        cols = self._api._history(self.id, list(keys) if keys is not None else None, superseded, timeout)
        if format == "numpy":
            return cols
        pd = _need("pandas", "history()")
        names = cols.pop("_keys")
        mat = cols.pop("_matrix")
        df = pd.DataFrame(mat, columns=names, copy=False)
        front = ["_step", "_time"] + (["_attempt", "_superseded"] if superseded else [])
        for i, c in enumerate(front):
            df.insert(i, c, cols[c])
        return df


class Api:
    """Reads runs back from this node's daemon (found, or started, as init() finds it; LOGD_SERVICE names one)."""

    def __init__(self, timeout: float = 30.0):
        self._timeout = timeout
        self._conn = connection_for(find_daemon())

    def _stream(self, method: str, req_type, res_type):
        return self._conn.channel.unary_stream(SERVICE + method, request_serializer=req_type.SerializeToString, response_deserializer=res_type.FromString)

    def runs(self, project: str = "", group: str = "", state: str = "", tag: str = "", search: str = "", limit: Optional[int] = None) -> RunsList:
        """The runs of the node's store, newest first, as the daemon lists them (every one, unless limit)."""
        out = RunsList()
        offset = 0
        while True:
            want = _PAGE if limit is None else min(_PAGE, limit - len(out))
            if want <= 0:
                break
            page = self._conn.unary("ListRuns", pb.ListRunsRequest(project=project, group=group, state=state, tag=tag, text=search, limit=want, offset=offset), self._timeout)
            out.extend(RunView(self, r) for r in page.runs)
            if not page.runs or not page.next_offset and len(page.runs) < want:
                break
            offset = page.next_offset or offset + len(page.runs)
            if offset >= page.total:
                break
        return out

    def run(self, run_id: str) -> RunView:
        try:
            return RunView(self, self._conn.unary("GetRun", pb.GetRunRequest(run_id=run_id), self._timeout))
        except CallError as e:
            if e.code.name == "NOT_FOUND":
                raise LookupError("logd: no run %r in this node's store (%s); list them with logd.Api().runs()" % (run_id, e)) from None
            raise

    def group(self, name: str, project: str = "") -> RunsList:
        """The runs of a group (every rank), as runs() lists them."""
        got = self.runs(project=project, group=name)
        got[:] = [r for r in got if r.group == name]
        if not got:
            raise LookupError("logd: no group %r in this node's store; list the runs with logd.Api().runs()" % (name,))
        return got

    def _history(self, run_id: str, keys: Optional[List[str]], superseded: bool, timeout: float) -> Dict[str, object]:
        np = _need("numpy", "history()")
        call = self._stream("ReadHistory", pb.ReadHistoryRequest, pb.HistoryChunk)
        req = pb.ReadHistoryRequest(run_id=run_id, keys=keys or [], all_attempts=superseded)
        names: List[str] = []
        steps, times, counts, ids, vals, attempts, sup = [], [], [], [], [], [], []
        rows = 0
        try:
            for c in call(req, timeout=timeout, metadata=self._conn.metadata):
                names.extend(c.keys)
                steps.append(c.steps)
                times.append(c.times)
                counts.append(c.counts)
                ids.append(c.key_ids)
                vals.append(c.values)
                if superseded:
                    attempts.append(np.full(c.rows, c.attempt, dtype=np.uint32))
                    sup.append(np.full(c.rows, c.superseded, dtype=bool))
                rows += c.rows
        except Exception as e:  # grpc.RpcError
            code = getattr(e, "code", lambda: None)()
            details = getattr(e, "details", lambda: str(e))()
            if code is not None and code.name == "NOT_FOUND":
                raise LookupError("logd: no run %r in this node's store (%s)" % (run_id, details)) from None
            raise CallError(code, "ReadHistory", "ReadHistory of run %s: %s" % (run_id, details)) from None
        step = np.frombuffer(b"".join(steps), dtype="<f8")
        time_ = np.frombuffer(b"".join(times), dtype="<f8")
        cnt = np.frombuffer(b"".join(counts), dtype="<u4")
        kid = np.frombuffer(b"".join(ids), dtype="<u4")
        val = np.frombuffer(b"".join(vals), dtype="<f8")
        # Keys asked for that no row has: an all-NaN column each, in the order asked.
        if keys:
            for k in keys:
                if k not in names:
                    names.append(k)
        mat = np.full((rows, len(names)), np.nan)
        if val.size:
            # Row r's pairs go to mat[r, key]: one flat index per value (the row's offset repeated over its pairs).
            mat.reshape(-1)[np.repeat(np.arange(rows, dtype=np.int64) * len(names), cnt) + kid] = val
        if keys:
            order = [names.index(k) for k in keys]
            mat = mat[:, order]
            names = list(keys)
        out = {"_keys": names, "_matrix": mat, "_step": step.astype(np.int64) if step.size and np.all(step == np.floor(step)) else step, "_time": time_}
        if superseded:
            out["_attempt"] = np.concatenate(attempts) if attempts else np.zeros(0, dtype=np.uint32)
            out["_superseded"] = np.concatenate(sup) if sup else np.zeros(0, dtype=bool)
        for i, k in enumerate(names):
            out.setdefault(k, mat[:, i])
        return out
