"""A list of runs read back (RunsList): one row per run as records, pandas, Arrow or polars; their histories in one
table; sorting by any of its fields."""
from datetime import datetime
from typing import Dict, Iterable, List, Optional

from . import _group
from ._tables import _arrow_of, _flatten, _need, _number, _time


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
