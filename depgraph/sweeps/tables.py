"""A sweep's table: typed columns from runner rows, and back from CSV or Parquet.

Rows come back from a runner as dicts of scalars; :func:`check_rows` checks
them, :func:`sweep_table` assembles them in grid order with typed columns
(integers stay integers, ``Int64`` with gaps; floats exact; booleans stay
booleans), and :func:`read_sweep` reads a written table back into exactly
the same frame.
"""

from __future__ import annotations

import io
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._files import checked_path, read_limited, shown_path
from .._memory import check_memory
from ..errors import ConfigError, DepgraphError
from ..io.atomic import atomic_write_bytes, atomic_write_text
from ..workloads.registry import WORKLOADS

__all__ = ["LEAD_COLUMNS", "ROW_COLUMNS", "check_rows", "read_sweep", "require_pyarrow", "sweep_table",
           "write_outputs"]

#: The point's fields, first in every table.
LEAD_COLUMNS: tuple[str, ...] = ("key", "model", "prompt_tokens", "link", "gpu", "mfu", "timing", "workload",
                                 "variant")
#: Columns every runner row must have; they follow the workload parameters.
ROW_COLUMNS: tuple[str, ...] = ("policy", "admission", "ttft_s", "frontier_max")
_PARAM_COLUMNS = tuple(dict.fromkeys(p.name for w in WORKLOADS.values() for p in w.params if p.sweepable))
_STR_COLUMNS = frozenset({"key", "model", "link", "gpu", "timing", "workload", "variant", "policy", "admission",
                          "steady_state_failed",
                          *(p.name for w in WORKLOADS.values() for p in w.params if p.kind == "choice")})
_INT64 = (-(2**63), 2**63 - 1)


def _scalar(value: Any, key: str, column: str) -> Any:
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise DepgraphError(f"point {key}: column {column!r}: integer {value} does not fit in 64 bits")
        return int(value)
    if isinstance(value, float):
        return float(value)
    raise DepgraphError(f"point {key}: column {column!r}: expected a number, string, boolean or None from the "
                        f"runner, got {type(value).__name__}")


def check_rows(rows: Any, key: str) -> list[dict]:
    if isinstance(rows, pd.DataFrame):
        rows = rows.to_dict("records")
    if not isinstance(rows, (list, tuple)) or not rows or not all(isinstance(r, dict) for r in rows):
        raise DepgraphError(f"point {key}: the runner must return a non-empty list of dicts (one per policy and "
                            f"admission), got {type(rows).__name__}")
    out = []
    for row in rows:
        missing = [c for c in ROW_COLUMNS if c not in row]
        if missing:
            raise DepgraphError(f"point {key}: a runner row lacks {', '.join(missing)} "
                                f"(every row needs {', '.join(ROW_COLUMNS)})")
        bad = [c for c in row if not isinstance(c, str)]
        if bad:
            raise DepgraphError(f"point {key}: column names must be strings, got {bad[0]!r}")
        out.append({c: _scalar(v, key, c) for c, v in row.items()})
    return out


def _missing(v: Any) -> bool:
    return v is None or v is pd.NA or (isinstance(v, str) and not v) or (isinstance(v, float) and math.isnan(v))


def _column(values: list, *, as_str: bool = False):
    """A column typed by its values: int64 (Int64 with gaps), float64, bool
    (boolean with gaps) or strings; a column mixing kinds becomes strings."""
    present = [v for v in values if not _missing(v)]
    gaps = len(present) < len(values)
    kinds = {type(v) for v in present}
    if not present and not as_str:
        return np.full(len(values), np.nan)
    if not as_str and kinds == {bool}:
        return pd.array([None if _missing(v) else v for v in values], dtype="boolean") if gaps \
            else np.array(values, dtype=bool)
    if not as_str and kinds == {int}:
        return pd.array([None if _missing(v) else v for v in values], dtype="Int64") if gaps \
            else np.array(values, dtype=np.int64)
    if not as_str and kinds <= {int, float}:
        return np.array([np.nan if _missing(v) else float(v) for v in values], dtype=np.float64)
    return pd.Series([None if _missing(v) else str(v) for v in values]).array


def _column_order(records: list[dict]) -> list[str]:
    seen = dict.fromkeys(c for r in records for c in r)
    first = [c for c in LEAD_COLUMNS + _PARAM_COLUMNS + ROW_COLUMNS if c in seen]
    return first + [c for c in seen if c not in first]


def _frame(columns: dict[str, list]) -> pd.DataFrame:
    return pd.DataFrame({c: _column(v, as_str=c in _STR_COLUMNS) for c, v in columns.items()})


def sweep_table(points: list[dict], results: list[list[dict]]) -> pd.DataFrame:
    records = []
    for point, rows in zip(points, results):
        for row in rows:
            records.append({**{c: v for c, v in row.items() if c not in point}, **point})
    order = _column_order(records)
    return _frame({c: [r.get(c) for r in records] for c in order})


_INT_TEXT = re.compile(r"^-?[0-9]+$")
_FLOAT_TEXT = re.compile(r"^-?(?:[0-9]+\.?[0-9]*(?:e[+-]?[0-9]+)?|\.[0-9]+(?:e[+-]?[0-9]+)?|inf)$", re.IGNORECASE)


def _from_text(cells: list[str], *, as_str: bool) -> list:
    present = [c for c in cells if c != ""]
    if as_str or not present:
        return [c or None for c in cells]
    if all(_INT_TEXT.match(c) for c in present):
        return [int(c) if c else None for c in cells]
    if all(_FLOAT_TEXT.match(c) for c in present):
        return [float(c) if c else None for c in cells]
    if all(c in ("True", "False") for c in present):
        return [c == "True" if c else None for c in cells]
    return [c or None for c in cells]


#: The largest sweep table read back (a 100,000-point sweep's CSV is about 100 MB).
MAX_SWEEP_TABLE_BYTES = 1 << 30
#: Peak memory of reading a table back, per byte of its file: the bytes, pandas' frame and the typed
#: columns. Measured with tracemalloc on the replay study's 3,168-row table: 5.7 per CSV byte, 71 per
#: (compressed) Parquet byte; about twice that is asked of the memory budget.
SWEEP_TABLE_PEAK_PER_BYTE = {".csv": 12, ".parquet": 150}


def read_sweep(path: str | Path) -> pd.DataFrame:
    """Read a sweep's ``.csv`` or ``.parquet`` file back into the table
    :func:`sweep` returned (same column types, exact floats).

    A plain ``pandas.read_csv`` gives the same values, but types integer and
    boolean columns with gaps as floats and objects (and before pandas 3 its
    default float parser may miss the last bit).
    """
    path = checked_path(path, "path")
    if path.suffix not in (".parquet", ".csv"):
        raise ConfigError(f"{shown_path(path)}: expected a sweep's .csv or .parquet file")
    data = read_limited(path, what="sweep table", max_bytes=MAX_SWEEP_TABLE_BYTES,
                        cap="depgraph.sweeps.tables.MAX_SWEEP_TABLE_BYTES")
    check_memory(shown_path(path), len(data) * SWEEP_TABLE_PEAK_PER_BYTE[path.suffix], what="reading the sweep table")
    try:
        if path.suffix == ".parquet":
            raw = pd.read_parquet(io.BytesIO(data))
            columns = {c: [None if _missing(v) else v for v in raw[c].tolist()] for c in raw.columns}
        else:
            raw = pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False, na_filter=False)
            columns = {c: _from_text(raw[c].tolist(), as_str=c in _STR_COLUMNS) for c in raw.columns}
    except (ValueError, OSError, ImportError, pd.errors.ParserError) as exc:  # pyarrow's errors are ValueErrors
        if isinstance(exc, DepgraphError):
            raise
        reason = (str(exc).splitlines() or [type(exc).__name__])[0][:120]
        raise ConfigError(f"{shown_path(path)}: not a sweep table depgraph can read ({reason})") from None
    return _frame(columns)


def write_outputs(table: pd.DataFrame, out: Path, name: str) -> tuple[Path, Path]:
    csv_path, parquet_path = out / f"{name}.csv", out / f"{name}.parquet"
    atomic_write_text(csv_path, table.to_csv(index=False, lineterminator="\n"))
    buf = io.BytesIO()
    table.to_parquet(buf, index=False)
    atomic_write_bytes(parquet_path, buf.getvalue())
    return csv_path, parquet_path


def require_pyarrow() -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise DepgraphError("out_dir: writing the Parquet table needs pyarrow (pip install pyarrow)") from None
