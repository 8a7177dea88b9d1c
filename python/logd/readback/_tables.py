"""The small conversions readback's tables share: optional packages named when missing, nested dicts as dotted
columns, JSON's spelled-out numbers, columns as Arrow or polars."""
from datetime import datetime, timezone
from typing import Dict, List


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


def _time(s: float):
    return datetime.fromtimestamp(s, tz=timezone.utc) if s else None
