"""Many runs' histories in one table (a group's ranks, a sweep): the runs are read side by side, several calls in
flight on the one connection, and the DataFrame is built once from their columns, not run by run and joined."""
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Dict, List, Optional

from .._pb import logd_pb2 as pb
from ..transport.connection import CallError
from ._reads import _Columns, _read_error

# Reads in flight at once. A group's runs are many and small (1 024 ranks of a few hundred rows): what each costs
# is mostly the round trip and the store's query, which the daemon and the reads-server answer side by side.
_READERS = 8
# Runs per ReadHistories call (the reader takes at most 4096).
_TOGETHER = 1024


def histories(runs: List[object], keys: Optional[List[str]], need: Callable[[str, str], object]):
    """The long form of RunsList.history(): run_id, rank, _step, _time and the metrics (`keys`, or every metric
    any run logged, in the order first seen), each run's rows in the list's order."""
    np = need("numpy", "history()")
    pd = need("pandas", "history()")
    if not runs:
        return pd.DataFrame()

    def one(r):
        return r.history(keys=keys, format="numpy")

    together = _together(runs, keys) if len(runs) > 1 else None
    if together is not None:
        parts = [together[r.id] if r.id in together else one(r) for r in runs]  # one the answer lacked: read alone
    elif len(runs) == 1:
        parts = [one(runs[0])]
    else:
        with ThreadPoolExecutor(max_workers=min(_READERS, len(runs)), thread_name_prefix="logd-read") as pool:
            parts = list(pool.map(one, runs))  # in order; the first failure is raised here
    names = list(keys) if keys is not None else list(dict.fromkeys(k for p in parts for k in p["_keys"]))
    taken = [k for k in names if k in ("run_id", "rank", "_step", "_time")]
    if taken:  # a metric of that name would silently replace the table's own column
        raise ValueError("logd: a metric named %r would stand where the group table's own %r column is; read it run by run "
                         "(run.history()), or name the other metrics with keys=" % (taken[0], taken[0]))
    sizes = [len(p["_step"]) for p in parts]
    filled = [i for i, n in enumerate(sizes) if n]  # a run without rows adds none (nor its empty columns' dtype)
    ranks = [r.rank for r in runs]
    rank_type = np.int64 if all(isinstance(x, int) for x in ranks) else object
    cols = {
        "run_id": np.repeat(np.array([r.id for r in runs], dtype=object), sizes),
        "rank": np.repeat(np.array(ranks, dtype=rank_type), sizes),
    }
    for c in ("_step", "_time"):
        cols[c] = np.concatenate([parts[i][c] for i in filled]) if filled else np.zeros(0)
    where = [{k: j for j, k in enumerate(p["_keys"])} for p in parts]
    for k in names:
        pieces = []
        for i in filled:
            j = where[i].get(k)
            pieces.append(parts[i]["_matrix"][:, j] if j is not None else np.full(sizes[i], np.nan))
        cols[k] = np.concatenate(pieces) if pieces else np.zeros(0)
    return pd.DataFrame(cols, copy=False)


def _together(runs: List[object], keys: Optional[List[str]]) -> Optional[Dict[str, Dict[str, object]]]:
    """The runs' columns by ReadHistories, a call per 1 024 runs, where the reader serves it (the shared store's
    `logd reads-server`: a few statements for a batch of runs instead of a few per run); None where it does not
    (the node's daemon reads run by run, side by side). A run the answer lacks is not in the dict."""
    api = runs[0]._api
    if getattr(api, "_shared", None) is None or any(r._api is not api for r in runs):
        return None
    call = api._stream("ReadHistories", pb.ReadHistoriesRequest, pb.HistoryChunk)
    out: Dict[str, object] = {}
    for i in range(0, len(runs), _TOGETHER):
        part = {r.id: r for r in runs[i:i + _TOGETHER]}
        try:
            for c in call(pb.ReadHistoriesRequest(run_ids=list(part), keys=keys or []), timeout=600.0, metadata=api._conn.metadata):
                cols = out.get(c.run_id)
                if cols is None:
                    r = part.get(c.run_id)
                    if r is None:
                        continue
                    cols = out[c.run_id] = _Columns(keys, False, r.rows, r._known_keys())
                cols.add(c)
        except CallError:
            raise
        except Exception as e:  # grpc.RpcError
            code = getattr(e, "code", lambda: None)()
            if code is not None and code.name == "UNIMPLEMENTED" and i == 0:
                return None  # an older reader: run by run
            raise _read_error(e, "(%d runs)" % len(part), api.where) from None
    return {k: v.result() for k, v in out.items()}
