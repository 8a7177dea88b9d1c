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
from datetime import datetime, timezone
from typing import Dict, Iterable, List, Optional

from .._pb import logd_pb2 as pb
from ..transport.connection import SERVICE, CallError, connection_for
from ..transport.discovery import find_daemon
from . import _group

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


def _arrow_of(df):
    """A pyarrow Table of a DataFrame; a column of mixed types (an object column Arrow refuses) goes as text."""
    pa = _need("pyarrow", "to_arrow()")
    try:
        return pa.Table.from_pandas(df, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        fixed = df.copy()
        for c in fixed.columns:
            if fixed[c].dtype == object:
                try:
                    pa.array(fixed[c], from_pandas=True)
                except (pa.ArrowInvalid, pa.ArrowTypeError):
                    fixed[c] = fixed[c].map(lambda v: None if v is None else str(v))
        return pa.Table.from_pandas(fixed, preserve_index=False)


def _columns_as(fmt: str, names: List[str], columns: Dict[str, object]):
    """Columns (name -> numpy array, in order) as a pyarrow Table or a polars DataFrame."""
    if fmt == "arrow":
        pa = _need("pyarrow", 'format="arrow"')
        return pa.table({n: columns[n] for n in names})
    pl = _need("polars", 'format="polars"')
    return pl.DataFrame({n: columns[n] for n in names})


def _read_error(e: Exception, run_id: str, where: str = "this node's store") -> Exception:
    """A ReadHistory stream's failure (a grpc.RpcError) as logd says it: LookupError for an unknown run, else a CallError."""
    code = getattr(e, "code", lambda: None)()
    details = getattr(e, "details", lambda: str(e))()
    if code is not None and code.name == "NOT_FOUND":
        return LookupError("logd: no run %r in %s (%s)" % (run_id, where, details))
    return CallError(code, "ReadHistory", "ReadHistory of run %s: %s" % (run_id, details))


_UNKNOWN = object()
_HEAD = None


def _rank_and_node(text: str):
    """A run's rank object and node, read from the head and tail of its metadata JSON without parsing the rest (a
    table of runs would spend most of its time parsing metadata it never shows). Daemons write metadata as
    {"host":…,"pid":…,"rank":null or {…flat…},…}, and the shared store adds "node" as the last key. Exact where
    the text has that shape; (_UNKNOWN, None) otherwise, and the caller parses it all."""
    global _HEAD
    if _HEAD is None:
        import re

        string = r'"(?:[^"\\\x00-\x1f]|\\.)*"'
        _HEAD = (re.compile(r'\{"host":(%s),"pid":-?\d+,"rank":(null|\{[^{}"]*(?:"[a-zA-Z]+"[^{}"]*)*\})' % string),
                 re.compile(r',"node":(%s)\}' % string))
    m = _HEAD[0].match(text)
    if m is None:
        return _UNKNOWN, None
    rank = None if m.group(2) == "null" else json.loads(m.group(2))
    host = json.loads(m.group(1))
    at = text.rfind(',"node":')
    if at >= 0:
        t = _HEAD[1].match(text, at)
        if t is not None and t.end() == len(text):
            return rank, json.loads(t.group(1)) or host
    if '"node":' in text:
        return _UNKNOWN, None  # a node named somewhere else than as the last key: read it all
    return rank, host


def _time(s: float):
    return datetime.fromtimestamp(s, tz=timezone.utc) if s else None


def _ordered(runs, order: str):
    """The runs sorted by one field of RunsList.records() ("-" first: descending); a run without it, or with a
    value that does not compare with the others', comes last."""
    desc = order.startswith("-")
    field = order[1:] if desc else order
    recs = runs.records()
    if recs and field not in set().union(*(r.keys() for r in recs)) and field not in ("created", "finished"):
        raise ValueError("logd: order=%r: no run has a field %r (fields: id, name, state, created, finished, duration_s, rows, "
                         "rank, config.KEY, summary.KEY)" % (order, field))

    def key(i):
        v = recs[i].get(field)
        if v is None or isinstance(v, (list, dict)) or (isinstance(v, float) and v != v):
            return (2, 0, "")
        if isinstance(v, bool):
            v = int(v)
        if isinstance(v, (int, float)):
            return (0, -v if desc else v, "")
        if isinstance(v, datetime):
            t = v.timestamp()
            return (0, -t if desc else t, "")
        return (1, 0, str(v))
    idx = sorted(range(len(recs)), key=key)
    if desc:  # text descending: reverse the text block only, keeping numbers first and missing last
        text = [i for i in idx if key(i)[0] == 1][::-1]
        idx = [i for i in idx if key(i)[0] == 0] + text + [i for i in idx if key(i)[0] == 2]
    return RunsList(runs[i] for i in idx)


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

    def to_arrow(self):
        """The table of to_pandas() as a pyarrow Table (a config or summary column whose values are of several
        types, a number in some runs and text in others, becomes text)."""
        return _arrow_of(self.to_pandas())

    def to_polars(self):
        """The table of to_pandas() as a polars DataFrame (through Arrow)."""
        pl = _need("polars", "RunsList.to_polars()")
        return pl.from_arrow(self.to_arrow())

    def history(self, keys: Optional[Iterable[str]] = None, agg: Optional[str] = None):
        """The histories of these runs (a group's ranks, say) in one DataFrame. agg=None: long form, every run's
        rows with its run_id and rank columns first; agg="mean", "min" or "max": one row per step, each metric
        aggregated across the runs that logged it at that step (NaN where none did)."""
        if agg not in (None, "mean", "min", "max"):
            raise ValueError("logd: agg=%r must be None, 'mean', 'min' or 'max'" % (agg,))
        asked = list(dict.fromkeys(keys)) if keys is not None else None  # a key named twice is one column
        long = _group.histories(list(self), asked, _need)
        if len(long.columns) == 0:
            return long
        if agg is None:
            return long
        metrics = [c for c in long.columns if c not in ("run_id", "rank", "_step", "_time")]
        out = long.groupby("_step", sort=True)[metrics].agg(agg)
        out.insert(0, "runs", long.groupby("_step", sort=True)["run_id"].nunique())
        return out.reset_index()

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
        self._metadata_json = info.metadata_json or "{}"
        self._metadata = None
        rank, node = _rank_and_node(self._metadata_json)
        if rank is _UNKNOWN:
            rank, node = self.metadata.get("rank"), self.metadata.get("node") or self.metadata.get("host")
        self.rank = rank.get("rank") if isinstance(rank, dict) and isinstance(rank.get("rank", -1), int) and rank.get("rank", -1) >= 0 else None
        self.node = node

    @property
    def metadata(self) -> Dict[str, object]:
        """The run's metadata (host, pid, rank, writers, environment, attempts, health, end, ...), parsed on first use:
        a table of 10 000 runs need not parse 10 000 of them."""
        if self._metadata is None:
            self._metadata = json.loads(self._metadata_json)
        return self._metadata

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

    def history(self, keys: Optional[Iterable[str]] = None, superseded: bool = False, format: str = "pandas", timeout: float = 600.0,
                x: str = "step", min_step: Optional[float] = None, max_step: Optional[float] = None, samples: Optional[int] = None):
        """Every stored row of the run, unsampled, in the order they were stored: columns _step and _time (seconds
        since the epoch) and one per metric (NaN where a row has no value for it; NaN and ±inf logged come back as
        such). keys: only these metrics (a key no row has is an all-NaN column). superseded: also the rows a
        rewind (init(resume_from=...)) superseded, with _attempt and _superseded columns. format: "pandas" (a
        DataFrame), "numpy" (a dict of arrays), "arrow" (a pyarrow Table) or "polars" (a polars DataFrame).
        x: the column that comes first, the x axis: "step" (_step), "time" (_time) or "relative" (a _relative
        column: seconds since the run was created). min_step, max_step: only rows with min_step <= step <
        max_step. samples=N: not every row but the daemon's downsampling, about N buckets per metric that keep
        spikes: a long table (metric, _step, _time, value: the bucket's mean, min, max), pandas only."""
        if format not in ("pandas", "numpy", "arrow", "polars"):
            raise ValueError("logd: format=%r must be 'pandas', 'numpy', 'arrow' or 'polars'" % (format,))
        if x not in ("step", "time", "relative"):
            raise ValueError("logd: x=%r must be 'step', 'time' or 'relative'" % (x,))
        for name, v in (("min_step", min_step), ("max_step", max_step)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                raise ValueError("logd: %s=%r must be a number" % (name, v))
        asked = list(dict.fromkeys(keys)) if keys is not None else None  # a key named twice is one column
        if samples is not None:
            if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
                raise ValueError("logd: samples=%r must be a positive whole number" % (samples,))
            if format != "pandas" or superseded:
                raise ValueError("logd: samples= gives a pandas DataFrame of the latest timeline; leave format and superseded as they are")
            return self._api._sampled(self.id, asked, samples, timeout, min_step, max_step)
        summary_keys = [k for k in self.summary if not k.startswith("_")] if not self.metadata.get("summaryCapped") else None
        cols = self._api._history(self.id, asked, superseded, timeout, rows_hint=self.rows, known=summary_keys)
        front = ["_step", "_time"] + (["_attempt", "_superseded"] if superseded else [])
        if min_step is not None or max_step is not None:
            st = cols["_step"]
            keep = (st >= (min_step if min_step is not None else -float("inf"))) & (st < (max_step if max_step is not None else float("inf")))
            if not keep.all():
                cols["_matrix"] = cols["_matrix"][keep]
                for c in front:
                    cols[c] = cols[c][keep]
                for i, k in enumerate(cols["_keys"]):
                    cols[k] = cols["_matrix"][:, i]
        if x == "relative":
            cols["_relative"] = cols["_time"] - self.created_at
            front.append("_relative")
        if x != "step":
            lead = "_time" if x == "time" else "_relative"
            front = [lead] + [c for c in front if c != lead]
        if format == "numpy":
            return cols
        names = cols.pop("_keys")
        mat = cols.pop("_matrix")
        if format in ("arrow", "polars"):
            return _columns_as(format, front + names, cols)
        pd = _need("pandas", "history()")
        df = pd.DataFrame(mat, columns=names, copy=False)
        for i, c in enumerate(front):
            df.insert(i, c, cols[c])
        return df

    def scan_history(self, keys: Optional[Iterable[str]] = None, page_rows: int = 100_000, format: str = "pandas", timeout: float = 3600.0,
                     min_step: Optional[float] = None, max_step: Optional[float] = None):
        """history() in pages of at most page_rows rows, for a history larger than memory: an iterator of
        DataFrames (or dicts of arrays with format="numpy"), in the order the rows were stored; each page has
        _step, _time and the metrics named so far (keys: exactly those). Memory stays about one page and one
        message of the daemon's, whatever the run's length. min_step, max_step: only rows with min_step <= step <
        max_step (a page may then hold fewer rows)."""
        if format not in ("pandas", "numpy"):
            raise ValueError("logd: format=%r must be 'pandas' or 'numpy'" % (format,))
        if not isinstance(page_rows, int) or page_rows < 1:
            raise ValueError("logd: page_rows=%r must be a positive whole number" % (page_rows,))
        asked = list(dict.fromkeys(keys)) if keys is not None else None
        pd = _need("pandas", "scan_history()") if format == "pandas" else None
        lo = min_step if min_step is not None else -float("inf")
        hi = max_step if max_step is not None else float("inf")
        for cols in self._api._scan(self.id, asked, page_rows, timeout):
            if min_step is not None or max_step is not None:
                keep = (cols["_step"] >= lo) & (cols["_step"] < hi)
                if not keep.any():
                    continue
                if not keep.all():
                    for c in ("_matrix", "_step", "_time"):
                        cols[c] = cols[c][keep]
            if pd is None:
                yield cols
                continue
            names = cols.pop("_keys")
            df = pd.DataFrame(cols.pop("_matrix"), columns=names, copy=False)
            df.insert(0, "_step", cols["_step"])
            df.insert(1, "_time", cols["_time"])
            yield df

    def system(self, keys: Optional[Iterable[str]] = None, format: str = "pandas", timeout: float = 600.0):
        """The node's system metrics over the run's life (docs/system-metrics.md names them: cpu, mem.*, gpu.N.*,
        and its own process's proc.*): a column _time (seconds since the epoch) and one per metric, a row per
        sample. keys: only these. format: "pandas" or "numpy"."""
        if format not in ("pandas", "numpy"):
            raise ValueError("logd: format=%r must be 'pandas' or 'numpy'" % (format,))
        asked = list(dict.fromkeys(keys)) if keys is not None else None
        cols = self._api._history(self.id, asked, False, timeout, system=True)
        cols.pop("_step", None)
        if format == "numpy":
            return cols
        pd = _need("pandas", "system()")
        names = cols.pop("_keys")
        df = pd.DataFrame(cols.pop("_matrix"), columns=names, copy=False)
        df.insert(0, "_time", cols["_time"])
        return df

    def logs(self, rank: Optional[int] = None, stream: Optional[str] = None, grep: Optional[str] = None, format: str = "pandas"):
        """The run's console output (what its processes printed, when captured), in the order it was stored:
        columns time (UTC), stream ("out" or "err"), rank, writer and line (as printed, colour codes included).
        rank, stream: only those; grep: lines holding this text (any case). format: "pandas" or "records"."""
        if format not in ("pandas", "records"):
            raise ValueError("logd: format=%r must be 'pandas' or 'records'" % (format,))
        if stream not in (None, "out", "err"):
            raise ValueError("logd: stream=%r must be 'out' or 'err'" % (stream,))
        needle = grep.lower() if grep else None
        rows = []
        # Entries are pieces of output as they were written: whole lines are cut out of each writer's stream, a
        # piece without its newline waits for the rest (the time is the piece's that ended the line).
        partial: Dict[tuple, str] = {}

        def emit(e, line):
            if needle is None or needle in line.lower():
                rows.append({"time": _time(e.get("t", 0)), "stream": e.get("s"), "rank": e.get("rank"), "writer": e.get("w"), "line": line})

        last = {}
        for e in self._api._pages("ReadConsole", lambda after: pb.ReadConsoleRequest(run_id=self.id, after_offset=after)):
            if (rank is not None and e.get("rank") != rank) or (stream is not None and e.get("s") != stream):
                continue
            k = (e.get("w"), e.get("s"))
            pieces = (partial.pop(k, "") + e.get("l", "")).split("\n")
            for line in pieces[:-1]:
                emit(e, line)
            if pieces[-1]:
                partial[k] = pieces[-1]
                last[k] = e
        for k, rest in partial.items():
            emit(last[k], rest)
        if format == "records":
            return rows
        pd = _need("pandas", "logs()")
        return pd.DataFrame.from_records(rows, columns=["time", "stream", "rank", "writer", "line"])

    def media(self, kind: Optional[str] = None, key: Optional[str] = None) -> List[Dict[str, object]]:
        """The run's histograms, images and text in the order they were stored, each a dict: key, step, t, kind,
        rank, writer; a histogram's counts and edges (numpy arrays where numpy is installed), an image's sha256,
        format, width, height and caption (its bytes: image(sha256)), a text's text. kind: "histogram", "image" or
        "text"; key: only that key."""
        if kind not in (None, "histogram", "image", "text"):
            raise ValueError("logd: kind=%r must be 'histogram', 'image' or 'text'" % (kind,))
        try:
            import numpy as np
        except ImportError:
            np = None
        out = []
        for e in self._api._pages("ReadMedia", lambda after: pb.ReadMediaRequest(run_id=self.id, after_offset=after, kind=kind or "", key=key or "")):
            e["writer"] = e.pop("w", None)
            if np is not None and e.get("kind") == "histogram":
                e["counts"] = np.asarray(e.get("counts") or [], dtype=np.float64)
                e["edges"] = np.asarray([_number(x) for x in e.get("edges") or []], dtype=np.float64)
            out.append(e)
        return out

    def image(self, sha256: str, pil: bool = False):
        """An image of the run (its sha256, from media()): its PNG or JPEG bytes, or a PIL image with pil=True."""
        res = self._api._unary("ReadImage", pb.ReadImageRequest(run_id=self.id, sha256=sha256))
        if not pil:
            return bytes(res.data)
        Image = _need("PIL", "image(pil=True)").Image
        import io

        return Image.open(io.BytesIO(bytes(res.data)))


class Api:
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

    def _sampled(self, run_id: str, keys: Optional[List[str]], samples: int, timeout: float, min_step=None, max_step=None):
        """The daemon's downsampled history (ReadHistory with points): per metric about `samples` buckets, each its
        mean, min and max, in step order; as a long DataFrame. df.attrs["stored_points"]: every metric's stored
        points (more than its buckets where it was downsampled)."""
        np = _need("numpy", "history(samples=)")
        pd = _need("pandas", "history(samples=)")
        call = self._stream("ReadHistory", pb.ReadHistoryRequest, pb.HistoryChunk)
        names: List[str] = []
        metric, steps, times, vals, mins, maxs = [], [], [], [], [], []
        stored: Dict[str, int] = {}
        try:
            for c in call(pb.ReadHistoryRequest(run_id=run_id, keys=keys or [], points=samples), timeout=timeout, metadata=self._conn.metadata):
                names.extend(c.keys)
                if not c.rows:
                    continue
                ids = np.frombuffer(c.key_ids, dtype="<u4")
                metric.append(ids)
                steps.append(np.frombuffer(c.steps, dtype="<f8"))
                times.append(np.frombuffer(c.times, dtype="<f8"))
                vals.append(np.frombuffer(c.values, dtype="<f8"))
                mins.append(np.frombuffer(c.mins, dtype="<f8") if c.mins else np.frombuffer(c.values, dtype="<f8"))
                maxs.append(np.frombuffer(c.maxs, dtype="<f8") if c.maxs else np.frombuffer(c.values, dtype="<f8"))
                if ids.size:
                    stored[names[int(ids[0])]] = int(c.stored_points) or int(ids.size)
        except CallError:
            raise
        except Exception as e:  # grpc.RpcError
            raise _read_error(e, run_id, self.where) from None
        cat = lambda xs, dt: np.concatenate(xs) if xs else np.zeros(0, dtype=dt)
        ids = cat(metric, np.uint32)
        st = cat(steps, np.float64)
        df = pd.DataFrame({"metric": np.asarray(names, dtype=object)[ids] if ids.size else np.zeros(0, dtype=object),
                           "_step": st.astype(np.int64) if st.size and np.all(st == np.floor(st)) else st, "_time": cat(times, np.float64),
                           "value": cat(vals, np.float64), "min": cat(mins, np.float64), "max": cat(maxs, np.float64)})
        if min_step is not None:
            df = df[df["_step"] >= min_step]
        if max_step is not None:
            df = df[df["_step"] < max_step]
        df = df.reset_index(drop=True)
        df.attrs["stored_points"] = stored
        return df

    def _scan(self, run_id: str, keys: Optional[List[str]], page_rows: int, timeout: float):
        """ReadHistory's chunks in pages of page_rows rows: each page a dict as _history() gives (_keys, _matrix,
        _step, _time), its matrix as wide as the keys named so far."""
        np = _need("numpy", "scan_history()")
        call = self._stream("ReadHistory", pb.ReadHistoryRequest, pb.HistoryChunk)
        names: List[str] = list(keys) if keys else []
        col_of = {k: i for i, k in enumerate(names)}
        stream_arr = np.zeros(0, dtype=np.int64)
        stream_cols: List[int] = []
        page = np.full((page_rows, max(1, len(names))), np.nan)
        step = np.empty(page_rows)
        time_ = np.empty(page_rows)
        filled = 0

        def out(rows):
            st = step[:rows].copy()
            return {"_keys": list(names), "_matrix": page[:rows, :len(names)].copy(),
                    "_step": st.astype(np.int64) if st.size and np.all(st == np.floor(st)) else st, "_time": time_[:rows].copy()}

        try:
            for c in call(pb.ReadHistoryRequest(run_id=run_id, keys=keys or []), timeout=timeout, metadata=self._conn.metadata):
                if c.keys:
                    for k in c.keys:
                        col = col_of.get(k)
                        if col is None and not keys:
                            col = col_of[k] = len(names)
                            names.append(k)
                        stream_cols.append(-1 if col is None else col)
                    stream_arr = np.asarray(stream_cols, dtype=np.int64)
                    if len(names) > page.shape[1]:
                        wider = np.full((page_rows, max(len(names), page.shape[1] * 2)), np.nan)
                        wider[:filled, :page.shape[1]] = page[:filled]
                        page = wider
                n = c.rows
                steps = np.frombuffer(c.steps, dtype="<f8")
                times = np.frombuffer(c.times, dtype="<f8")
                vals = np.frombuffer(c.values, dtype="<f8")
                cnt = np.frombuffer(c.counts, dtype="<u4") if vals.size else np.zeros(n, dtype=np.uint32)
                cols = stream_arr[np.frombuffer(c.key_ids, dtype="<u4")] if vals.size else np.zeros(0, dtype=np.int64)
                row_of = np.repeat(np.arange(n, dtype=np.int64), cnt)
                done = 0
                while done < n:  # a chunk may straddle pages
                    take = min(n - done, page_rows - filled)
                    step[filled:filled + take] = steps[done:done + take]
                    time_[filled:filled + take] = times[done:done + take]
                    if vals.size:
                        sel = (row_of >= done) & (row_of < done + take) & (cols >= 0)
                        page[filled + row_of[sel] - done, cols[sel]] = vals[sel]
                    filled += take
                    done += take
                    if filled == page_rows:
                        yield out(filled)
                        page[:] = np.nan
                        filled = 0
            if filled:
                yield out(filled)
        except CallError:
            raise
        except Exception as e:  # grpc.RpcError
            raise _read_error(e, run_id, self.where) from None

    def _history(self, run_id: str, keys: Optional[List[str]], superseded: bool, timeout: float, rows_hint: int = 0,
                 known: Optional[List[str]] = None, system: bool = False) -> Dict[str, object]:
        """Reads ReadHistory's chunks straight into one (rows x keys) float64 matrix, NaN where a row has no value:
        each chunk's packed arrays are read in place (numpy views of the message's bytes) and scattered, so the
        peak is about the matrix and one chunk, not every chunk joined first. `known`: the keys expected (the
        run's summary keys), so the matrix is made once; a key not expected adds a column."""
        np = _need("numpy", "history()")
        call = self._stream("ReadHistory", pb.ReadHistoryRequest, pb.HistoryChunk)
        req = pb.ReadHistoryRequest(run_id=run_id, keys=keys or [], all_attempts=superseded, system=system)
        names: List[str] = list(keys) if keys else list(known or [])
        col_of = {k: i for i, k in enumerate(names)}
        stream_cols: List[int] = []  # the stream's key ids (in the order it names keys) -> columns
        # Rows: the run's count when known (grown by doubling if more come); columns: grown by doubling as keys come.
        cap = rows_hint if rows_hint > 0 else 1024
        mat = np.full((cap, max(1, len(names))), np.nan)
        step = np.empty(cap)
        time_ = np.empty(cap)
        attempts = np.zeros(cap if superseded else 0, dtype=np.uint32)
        sup = np.zeros(cap if superseded else 0, dtype=bool)
        stream_arr = np.zeros(0, dtype=np.int64)
        rows = 0
        try:
            for c in call(req, timeout=timeout, metadata=self._conn.metadata):
                if c.keys:
                    for k in c.keys:
                        col = col_of.get(k)
                        if col is None and not keys:  # with keys asked, a key the daemon names unasked has no column
                            col = col_of[k] = len(names)
                            names.append(k)
                        stream_cols.append(-1 if col is None else col)
                    stream_arr = np.asarray(stream_cols, dtype=np.int64)
                n = c.rows
                if rows + n > mat.shape[0] or len(names) > mat.shape[1]:
                    height = mat.shape[0] if rows + n <= mat.shape[0] else max(rows + n, mat.shape[0] * 2)
                    width = mat.shape[1] if len(names) <= mat.shape[1] else max(len(names), mat.shape[1] * 2)
                    grown = np.full((height, width), np.nan)
                    grown[:rows, :mat.shape[1]] = mat[:rows]
                    mat = grown
                    step = np.resize(step, height)
                    time_ = np.resize(time_, height)
                    if superseded:
                        attempts = np.resize(attempts, height)
                        sup = np.resize(sup, height)
                step[rows:rows + n] = np.frombuffer(c.steps, dtype="<f8")
                time_[rows:rows + n] = np.frombuffer(c.times, dtype="<f8")
                if superseded:
                    attempts[rows:rows + n] = c.attempt
                    sup[rows:rows + n] = c.superseded
                vals = np.frombuffer(c.values, dtype="<f8")
                if vals.size:
                    cnt = np.frombuffer(c.counts, dtype="<u4")
                    cols = stream_arr[np.frombuffer(c.key_ids, dtype="<u4")]
                    width = mat.shape[1]
                    flat = np.repeat(np.arange(rows, rows + n, dtype=np.int64) * width, cnt)
                    flat += cols
                    keep = cols >= 0
                    if keep.all():
                        mat.reshape(-1)[flat] = vals
                    else:
                        mat.reshape(-1)[flat[keep]] = vals[keep]
                rows += n
        except CallError:
            raise
        except Exception as e:  # grpc.RpcError
            raise _read_error(e, run_id, self.where) from None
        width = len(names)
        mat = mat[:rows, :width] if (rows, width) != mat.shape else mat
        if keys:
            names = list(keys)  # the order asked; a key no row has stays an all-NaN column
        elif known:
            # Expected keys that no row had (a summary key set by hand): not columns.
            seen = [i for i in range(width) if not np.isnan(mat[:, i]).all()] if rows else []
            if len(seen) < width:
                mat = mat[:, seen]
                names = [names[i] for i in seen]
        step = step[:rows]
        out = {"_keys": names, "_matrix": mat, "_step": step.astype(np.int64) if step.size and np.all(step == np.floor(step)) else step, "_time": time_[:rows]}
        if superseded:
            out["_attempt"] = attempts[:rows]
            out["_superseded"] = sup[:rows]
        for i, k in enumerate(names):
            out.setdefault(k, mat[:, i])
        return out
