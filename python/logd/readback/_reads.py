"""The Api's streamed reads (ReadHistory): a run's history into one matrix, in pages, or downsampled."""
from typing import Dict, List, Optional

from .._pb import logd_pb2 as pb
from ..transport.connection import CallError
from ._tables import _need


def _read_error(e: Exception, run_id: str, where: str = "this node's store") -> Exception:
    """A ReadHistory stream's failure (a grpc.RpcError) as logd says it: LookupError for an unknown run, else a CallError."""
    code = getattr(e, "code", lambda: None)()
    details = getattr(e, "details", lambda: str(e))()
    if code is not None and code.name == "NOT_FOUND":
        return LookupError("logd: no run %r in %s (%s)" % (run_id, where, details))
    return CallError(code, "ReadHistory", "ReadHistory of run %s: %s" % (run_id, details))


class _Reads:
    """ReadHistory's readers, for Api (which gives _stream, _conn and where)."""

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
        """Reads ReadHistory's chunks straight into one (rows x keys) float64 matrix (_Columns)."""
        cols = _Columns(keys, superseded, rows_hint, known)
        call = self._stream("ReadHistory", pb.ReadHistoryRequest, pb.HistoryChunk)
        req = pb.ReadHistoryRequest(run_id=run_id, keys=keys or [], all_attempts=superseded, system=system)
        try:
            for c in call(req, timeout=timeout, metadata=self._conn.metadata):
                cols.add(c)
        except CallError:
            raise
        except Exception as e:  # grpc.RpcError
            raise _read_error(e, run_id, self.where) from None
        return cols.result()


class _Columns:
    """One run's ReadHistory chunks scattered into one (rows x keys) float64 matrix, NaN where a row has no value:
    each chunk's packed arrays are read in place (numpy views of the message's bytes), so the peak is about the
    matrix and one chunk, not every chunk joined first. `known`: the keys expected (the run's summary keys), so the
    matrix is made once; a key not expected adds a column. result(): _keys, _matrix, _step, _time (and _attempt,
    _superseded with `superseded`), and each key's column."""

    def __init__(self, keys: Optional[List[str]], superseded: bool = False, rows_hint: int = 0, known: Optional[List[str]] = None):
        np = self.np = _need("numpy", "history()")
        self.keys = keys
        self.known = known
        self.superseded = superseded
        self.names: List[str] = list(keys) if keys else list(known or [])
        self.col_of = {k: i for i, k in enumerate(self.names)}
        self.stream_cols: List[int] = []  # the stream's key ids (in the order it names keys) -> columns
        # Rows: the run's count when known (grown by doubling if more come); columns: grown by doubling as keys come.
        cap = rows_hint if rows_hint > 0 else 1024
        self.mat = np.full((cap, max(1, len(self.names))), np.nan)
        self.step = np.empty(cap)
        self.time = np.empty(cap)
        self.attempts = np.zeros(cap if superseded else 0, dtype=np.uint32)
        self.sup = np.zeros(cap if superseded else 0, dtype=bool)
        self.stream_arr = np.zeros(0, dtype=np.int64)
        self.rows = 0

    def add(self, c) -> None:
        np, names, rows = self.np, self.names, self.rows
        if c.keys:
            for k in c.keys:
                col = self.col_of.get(k)
                if col is None and not self.keys:  # with keys asked, a key the daemon names unasked has no column
                    col = self.col_of[k] = len(names)
                    names.append(k)
                self.stream_cols.append(-1 if col is None else col)
            self.stream_arr = np.asarray(self.stream_cols, dtype=np.int64)
        n = c.rows
        mat = self.mat
        if rows + n > mat.shape[0] or len(names) > mat.shape[1]:
            height = mat.shape[0] if rows + n <= mat.shape[0] else max(rows + n, mat.shape[0] * 2)
            width = mat.shape[1] if len(names) <= mat.shape[1] else max(len(names), mat.shape[1] * 2)
            grown = np.full((height, width), np.nan)
            grown[:rows, :mat.shape[1]] = mat[:rows]
            mat = self.mat = grown
            self.step = np.resize(self.step, height)
            self.time = np.resize(self.time, height)
            if self.superseded:
                self.attempts = np.resize(self.attempts, height)
                self.sup = np.resize(self.sup, height)
        self.step[rows:rows + n] = np.frombuffer(c.steps, dtype="<f8")
        self.time[rows:rows + n] = np.frombuffer(c.times, dtype="<f8")
        if self.superseded:
            self.attempts[rows:rows + n] = c.attempt
            self.sup[rows:rows + n] = c.superseded
        vals = np.frombuffer(c.values, dtype="<f8")
        if vals.size:
            cnt = np.frombuffer(c.counts, dtype="<u4")
            cols = self.stream_arr[np.frombuffer(c.key_ids, dtype="<u4")]
            width = mat.shape[1]
            flat = np.repeat(np.arange(rows, rows + n, dtype=np.int64) * width, cnt)
            flat += cols
            keep = cols >= 0
            if keep.all():
                mat.reshape(-1)[flat] = vals
            else:
                mat.reshape(-1)[flat[keep]] = vals[keep]
        self.rows = rows + n

    def result(self) -> Dict[str, object]:
        np, rows, names, keys, known = self.np, self.rows, self.names, self.keys, self.known
        width = len(names)
        mat = self.mat[:rows, :width] if (rows, width) != self.mat.shape else self.mat
        if keys:
            names = list(keys)  # the order asked; a key no row has stays an all-NaN column
        elif known:
            # Expected keys that no row had (a summary key set by hand): not columns.
            seen = [i for i in range(width) if not np.isnan(mat[:, i]).all()] if rows else []
            if len(seen) < width:
                mat = mat[:, seen]
                names = [names[i] for i in seen]
        step = self.step[:rows]
        out = {"_keys": names, "_matrix": mat, "_step": step.astype(np.int64) if step.size and np.all(step == np.floor(step)) else step,
               "_time": self.time[:rows]}
        if self.superseded:
            out["_attempt"] = self.attempts[:rows]
            out["_superseded"] = self.sup[:rows]
        for i, k in enumerate(names):
            out.setdefault(k, mat[:, i])
        return out
