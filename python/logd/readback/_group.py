"""Many runs' histories in one table (a group's ranks, a sweep): the runs are read side by side, several calls in
flight on the one connection, and the DataFrame is built once from their columns, not run by run and joined."""
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, List, Optional

# Reads in flight at once. A group's runs are many and small (1 024 ranks of a few hundred rows): what each costs
# is mostly the round trip and the store's query, which the daemon and the reads-server answer side by side.
_READERS = 8


def histories(runs: List[object], keys: Optional[List[str]], need: Callable[[str, str], object]):
    """The long form of RunsList.history(): run_id, rank, _step, _time and the metrics (`keys`, or every metric
    any run logged, in the order first seen), each run's rows in the list's order."""
    np = need("numpy", "history()")
    pd = need("pandas", "history()")
    if not runs:
        return pd.DataFrame()

    def one(r):
        return r.history(keys=keys, format="numpy")

    if len(runs) == 1:
        parts = [one(runs[0])]
    else:
        with ThreadPoolExecutor(max_workers=min(_READERS, len(runs)), thread_name_prefix="logd-read") as pool:
            parts = list(pool.map(one, runs))  # in order; the first failure is raised here
    names = list(keys) if keys is not None else list(dict.fromkeys(k for p in parts for k in p["_keys"]))
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
