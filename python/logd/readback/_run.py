"""One run read back (RunView): its fields, config, summary and metadata, and its history, system samples, console
lines and media on demand, each read through the Api that listed it."""
import json
from typing import TYPE_CHECKING, Dict, Iterable, List, Optional

from .._pb import logd_pb2 as pb
from ._tables import _columns_as, _need, _number, _time

if TYPE_CHECKING:
    from . import Api


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

    def _known_keys(self) -> Optional[List[str]]:
        """The metrics its history is expected to have (its summary's keys; None when the summary was capped)."""
        return [k for k in self.summary if not k.startswith("_")] if not self.metadata.get("summaryCapped") else None

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
        cols = self._api._history(self.id, asked, superseded, timeout, rows_hint=self.rows, known=self._known_keys())
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
