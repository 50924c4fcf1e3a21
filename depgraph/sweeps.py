"""Run every point of a scenario, in parallel and resumably, into one table.

:func:`sweep` expands a scenario (see :mod:`depgraph.scenario`), hands each
point to a *runner* (by default :func:`depgraph.replay.run_point`) and
returns one tidy table: one row per point, policy and admission, in grid
order and then the runner's row order, whatever the number of workers.

The columns are the point's fields (``key``, ``model``, ``prompt_tokens``,
``link``, ``mfu``, ``timing``, ``workload``, ``variant``), the workload
parameters of the scenario's workloads (``spec_k``, ``batch``, ...; empty
where a workload has none), then ``policy``, ``admission``, ``ttft_s``,
``frontier_max`` and every other column the runner returns, in the order
they first appear. Where the runner returns a point field, the point's value
wins. Column types follow the values: integers stay integers (``Int64``
when some rows have none), floats are exact, booleans stay booleans.

With ``out_dir`` every finished point is saved at once as
``out_dir/.parts/<scenario>/<id>.json`` (written to a temporary name and
renamed, so a part is complete or absent), and a rerun loads those parts
instead of recomputing them. A part's id hashes everything its rows depend
on that depgraph can see: the point's fields, the runner's name, depgraph's
version and the model's config file. A changed grid therefore reuses the
points it still holds and computes only the new ones, while a changed
workload parameter or runner computes afresh. Changed code under the same
version is invisible: pass ``resume=False`` (``depgraph sweep --fresh``).
At the end ``out_dir/<scenario>.csv`` and ``out_dir/<scenario>.parquet`` are
written the same way; :func:`read_sweep` reads either back into exactly the
table :func:`sweep` returned.

Where the points run: by default in local worker processes (one per CPU;
``workers=1`` runs them in this process); with ``client=`` (``depgraph sweep
--scheduler tcp://HOST:PORT``) as tasks on an existing ``dask.distributed``
cluster, which reruns the points of a worker that dies. Either way each
point's part is written by this process the moment its rows come back, the
table is the same, and a stopped sweep resumes from the parts. Parts are
JSON, not Parquet: a part holds the few rows of one point, and JSON gives
back exactly the Python values the runner returned (integers, floats to
the last bit, booleans, gaps), which per-point Parquet files would re-type
column by column; the assembled table is written as Parquet and CSV.

>>> from depgraph.scenario import parse_scenario
>>> from depgraph.sweeps import sweep
>>> sc = parse_scenario('''
... name = "doc"
... [grid]
... models = "qwen3.6-35b-a3b"
... prompt_tokens = 1024
... links = "25g"
... mfus = 1.0
... timings = "handoff"
... [[workloads]]
... workload = "single"
... ''')
>>> df = sweep(sc, workers=1, progress=False)
>>> list(df.columns[:12])
['key', 'model', 'prompt_tokens', 'link', 'mfu', 'timing', 'workload', 'variant', 'policy', 'admission', 'ttft_s', 'frontier_max']
>>> df.key.iloc[0]
'qwen3.6-35b-a3b|1024|25g|1.0|handoff|single|-'
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import hashlib
import io
import json
import math
import multiprocessing
import os
import pickle
import re
import signal
import sys
import threading
import time
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Callable, TextIO

import numpy as np
import pandas as pd

from ._workers import start_method
from .errors import DepgraphError
from .scenario import WORKLOADS, Scenario, expand_scenario, load_scenario

__all__ = ["sweep", "read_sweep", "worker_pool", "SweepInterrupted", "LEAD_COLUMNS", "ROW_COLUMNS",
           "add_sweep_command", "run_sweep_command"]

#: The point's fields, first in every table.
LEAD_COLUMNS: tuple[str, ...] = ("key", "model", "prompt_tokens", "link", "mfu", "timing", "workload", "variant")
#: Columns every runner row must have; they follow the workload parameters.
ROW_COLUMNS: tuple[str, ...] = ("policy", "admission", "ttft_s", "frontier_max")
_PARAM_COLUMNS = tuple(dict.fromkeys(p.name for params in WORKLOADS.values() for p in params))
_STR_COLUMNS = frozenset({"key", "model", "link", "timing", "workload", "variant", "policy", "admission",
                          "hook_scope", "rule"})
_INT64 = (-(2**63), 2**63 - 1)

Runner = Callable[[dict], list]


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`sweep`: ``saved`` of ``total`` points are on disk."""

    def __init__(self, saved: int, total: int, resumable: bool) -> None:
        tail = ", rerun to resume" if resumable else " (no out_dir: nothing kept)"
        super().__init__(f"interrupted; {saved} of {total} points saved{tail}")
        self.saved = saved
        self.total = total


# ------------------------------------------------------------------ runners


def _single_runner(point: dict) -> list[dict]:
    """The ``single`` workload under every readiness policy (admission
    ``none``): what :func:`depgraph.study.single_request_sweep` computes."""
    from .hardware import load_link
    from .models import load_model
    from .policies import POLICY_NAMES
    from .scheduler import schedule
    from .workloads.single import single_request

    if point["workload"] != "single":
        raise DepgraphError(f"workload {point['workload']!r} needs depgraph.replay.run_point, "
                            "which this installation lacks; only 'single' runs without it")
    G = single_request(load_model(point["model"]), prompt_tokens=point["prompt_tokens"],
                       link=load_link(point["link"]), mfu=point["mfu"], timing=point["timing"])
    rows = []
    for policy in POLICY_NAMES:
        S = schedule(G, policy=policy)
        parts = S.breakdown()
        rows.append({
            "policy": policy, "admission": "none", "ttft_s": S.ttft_s,
            "frontier_max": int(S.frontier(kinds=("decode",))["width"].max()),
            "frontier_max_data": int(S.frontier(admitted=False, kinds=("decode",))["width"].max()),
            "prefill_s": parts["prefill_s"], "transfer_s": parts["transfer_s"], "wait_s": parts["wait_s"],
            "decode_s": parts["decode_s"],
        })
    return rows


def _default_runner() -> Runner:
    """:func:`depgraph.replay.run_point` where it exists, else the
    single-request runner."""
    try:
        from .replay import run_point
    except ModuleNotFoundError as exc:
        if exc.name != f"{__package__}.replay":
            raise
        return _single_runner
    return run_point


def _runner_id(runner: Any) -> str:
    if isinstance(runner, functools.partial):
        return f"{_runner_id(runner.func)}(*{runner.args!r}, **{runner.keywords!r})"
    module = getattr(runner, "__module__", None)
    name = getattr(runner, "__qualname__", None)
    if module is None or name is None:
        module, name = type(runner).__module__, type(runner).__qualname__
    return f"{module}.{name}"


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


def _check_rows(rows: Any, key: str) -> list[dict]:
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


_GC_LOCK = threading.Lock()
_gc_holds = 0  # points running with the collector paused (threads of one process)
_gc_was_enabled = True


@contextlib.contextmanager
def _collector_paused():
    """The cyclic garbage collector off while a point runs: a point builds
    tens of thousands of short-lived, acyclic objects (freed as they go), and
    the collector's passes over them cost about a seventh of a replay
    point's time. Anything cyclic is collected after the point. Safe with
    points running in several threads of one process."""
    global _gc_holds, _gc_was_enabled
    with _GC_LOCK:
        if _gc_holds == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_holds += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _gc_holds -= 1
            if _gc_holds == 0 and _gc_was_enabled:
                gc.enable()


def _run_point(runner: Runner, point: dict) -> str:
    """Run one point (in a worker); its rows as JSON (exact floats, typed)."""
    with _collector_paused():
        rows = runner({k: v for k, v in point.items() if k != "key"})
    return json.dumps(_check_rows(rows, point["key"]))


def _ignore_sigint() -> None:
    # Ctrl-C reaches the whole process group; only the parent acts on it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def worker_pool(workers: int | None = None) -> ProcessPoolExecutor:
    """Local worker processes as :func:`sweep` starts them (``forkserver``, else ``spawn``; Ctrl-C
    left to this process), to share between several sweeps and other tasks:
    ``with worker_pool() as pool: sweep(a, executor=pool); sweep(b, executor=pool)``
    starts the interpreters once. ``workers`` defaults to one per available CPU."""
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise DepgraphError(f"workers: expected an integer >= 1 or None, got {workers!r}")
    return ProcessPoolExecutor(max_workers=workers or _cpu_count(), mp_context=start_method(),
                               initializer=_ignore_sigint)


# ------------------------------------------------------------------ parts


def _model_digest(model: str) -> str:
    from .models import catalog

    path = Path(catalog().get(model, model))
    if path.is_dir():
        path = path / "config.json"
    try:
        return hashlib.sha1(path.read_bytes()).hexdigest()
    except OSError:
        return "unreadable"


def _part_id(point: dict, runner_id: str, model_digest: str) -> str:
    from . import __version__

    ident = {"point": point, "runner": runner_id, "depgraph": __version__, "model_sha1": model_digest}
    return hashlib.sha1(json.dumps(ident, sort_keys=True).encode()).hexdigest()


def _load_part(path: Path, part_id: str) -> list[dict] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("id") != part_id or not isinstance(data.get("rows"), list):
        return None
    return data["rows"]


def _part_text(part_id: str, point: dict, rows: list[dict]) -> str:
    # compact: without indent json uses its C encoder, and a sweep writes hundreds of parts
    part = {"id": part_id, "key": point["key"], "point": point, "rows": rows}
    return json.dumps(part, separators=(",", ":")) + "\n"


# ------------------------------------------------------------------ the table


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


def _table(points: list[dict], results: list[list[dict]]) -> pd.DataFrame:
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


def read_sweep(path: str | Path) -> pd.DataFrame:
    """Read a sweep's ``.csv`` or ``.parquet`` file back into the table
    :func:`sweep` returned (same column types, exact floats).

    A plain ``pandas.read_csv`` gives the same values, but types integer and
    boolean columns with gaps as floats and objects (and before pandas 3 its
    default float parser may miss the last bit).
    """
    path = Path(path)
    if path.suffix == ".parquet":
        raw = pd.read_parquet(path)
        columns = {c: [None if _missing(v) else v for v in raw[c].tolist()] for c in raw.columns}
    elif path.suffix == ".csv":
        raw = pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False)
        columns = {c: _from_text(raw[c].tolist(), as_str=c in _STR_COLUMNS) for c in raw.columns}
    else:
        raise DepgraphError(f"{path}: expected a sweep's .csv or .parquet file")
    return _frame(columns)


def _write_outputs(table: pd.DataFrame, out: Path, name: str) -> tuple[Path, Path]:
    from .report import _atomic_write_bytes, _atomic_write_text

    csv_path, parquet_path = out / f"{name}.csv", out / f"{name}.parquet"
    _atomic_write_text(csv_path, table.to_csv(index=False, lineterminator="\n"))
    buf = io.BytesIO()
    table.to_parquet(buf, index=False)
    _atomic_write_bytes(parquet_path, buf.getvalue())
    return csv_path, parquet_path


def _require_pyarrow() -> None:
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise DepgraphError("out_dir: writing the Parquet table needs pyarrow (pip install pyarrow)") from None


# ------------------------------------------------------------------ progress


class _Progress:
    """A progress bar on stderr: redrawn in place on a terminal, one line
    per tenth of the points otherwise."""

    def __init__(self, label: str, total: int, done: int, *, enabled: bool, stream: TextIO | None = None) -> None:
        self.label, self.total, self.done = label, total, done
        self.enabled = enabled and total > 0
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = time.monotonic()
        self.last_draw = 0.0
        self.decile = done * 10 // max(total, 1)

    def say(self, text: str) -> None:
        if self.enabled:
            print(f"{self.label}: {text}", file=self.stream, flush=True)

    def advance(self) -> None:
        self.done += 1
        if not self.enabled:
            return
        now = time.monotonic()
        if self.tty:
            if now - self.last_draw >= 0.1 or self.done == self.total:
                self.draw(now)
        else:
            decile = self.done * 10 // self.total
            if decile > self.decile:
                self.decile = decile
                self.say(f"{self.done}/{self.total} points ({100 * self.done // self.total}%), "
                         f"{now - self.start:.0f} s")

    def draw(self, now: float) -> None:
        width = 30
        filled = width * self.done // self.total
        bar = "#" * filled + "." * (width - filled)
        self.stream.write(f"\r{self.label} [{bar}] {self.done}/{self.total} "
                          f"({100 * self.done // self.total}%) {now - self.start:.0f} s")
        self.stream.flush()
        self.last_draw = now

    def close(self) -> None:
        if self.enabled and self.tty and self.last_draw:
            self.stream.write("\n")
            self.stream.flush()
            self.last_draw = 0.0


# ------------------------------------------------------------------ the sweep


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return os.cpu_count() or 1


def _point_error(exc: BaseException, key: str) -> BaseException:
    if isinstance(exc, DepgraphError):
        if str(exc).startswith(f"point {key}:"):
            return exc
        err = DepgraphError(f"point {key}: {exc}")
        err.__cause__ = exc
        return err
    exc.add_note(f"while running point {key}")
    return exc


def sweep(
    scenario_or_path: Scenario | str | Path,
    *,
    out_dir: str | Path | None = None,
    workers: int | None = None,
    runner: Runner | None = None,
    progress: bool = True,
    resume: bool = True,
    client: Any = None,
    executor: Executor | None = None,
) -> pd.DataFrame:
    """Run every point of a scenario and return the tidy table.

    Parameters
    ----------
    scenario_or_path
        A :class:`~depgraph.scenario.Scenario` or the path of a scenario file.
    out_dir
        Folder for the per-point parts (resume) and the final
        ``<name>.csv`` and ``<name>.parquet``; ``None`` keeps everything in
        memory.
    workers
        Worker processes; default one per available CPU (never more than
        the points left). ``1`` runs in this process. The table does not
        depend on it.
    runner
        ``runner(point) -> list[dict]``, one dict per policy and admission
        with at least :data:`ROW_COLUMNS` and scalar values; ``point`` is
        the grid point without its ``key``. Default
        :func:`depgraph.replay.run_point`, or a single-request runner where
        that module is absent. Worker processes import it by name, so it
        must be a module-level function of an importable module; with the
        default ``workers`` any other runner (a lambda, a closure) runs in
        this process. Parts are saved under the runner's name, so two
        runners of the same name share them.
    progress
        Show a progress bar on standard error.
    resume
        Load the parts a previous run saved in ``out_dir`` instead of
        recomputing them.
    client
        A ``dask.distributed.Client``: run the points on its cluster
        instead of local worker processes (``workers`` must then be left
        out). Each point is one task; its part is saved here as soon as it
        comes back, so an interrupted sweep resumes as above, and a point
        whose worker dies is recomputed by Dask on another worker. The
        table is the same as with local workers. Needs the ``dask`` extra.
    executor
        A ``concurrent.futures`` executor to run the points on, left open
        afterwards (for example a :func:`worker_pool` shared by several
        sweeps, so their workers start once); ``workers`` and ``client`` must
        then be left out. The table is the same.

    Returns
    -------
    pandas.DataFrame
        One row per point, policy and admission (see the module docstring);
        the same table :func:`read_sweep` reads back from ``out_dir``.

    Raises :class:`SweepInterrupted` (a ``KeyboardInterrupt``) on Ctrl-C,
    after stopping the workers; every point finished by then is saved. A
    runner's :class:`~depgraph.DepgraphError` stops the sweep the same way
    and comes back as one naming the point's key.

    Without ``client``, workers are local processes forked from a clean
    fork server (``forkserver``, on Linux) or fresh interpreters (``spawn``,
    elsewhere), never from this process, so that results never depend on
    state inherited by ``fork``; a script that calls :func:`sweep` with
    several workers needs the usual ``if __name__ == "__main__":`` guard.
    """
    scenario = scenario_or_path if isinstance(scenario_or_path, Scenario) else load_scenario(scenario_or_path)
    points = expand_scenario(scenario)
    if runner is None:
        run = _default_runner()
        if run is _single_runner:
            others = sorted({w.workload for w in scenario.workloads} - {"single"})
            if others:
                raise DepgraphError(f"{scenario.source}: workload{'s' * (len(others) > 1)} {', '.join(others)} "
                                    f"need{'s' * (len(others) == 1)} depgraph.replay.run_point, which this "
                                    "installation lacks; only 'single' runs without it")
    elif callable(runner):
        run = runner
    else:
        raise DepgraphError(f"runner: expected a callable runner(point) -> list of dicts, got {runner!r}")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise DepgraphError(f"workers: expected an integer >= 1 or None, got {workers!r}")
    if executor is not None:
        if workers is not None or client is not None:
            raise DepgraphError("executor: runs the points itself; leave workers and client out")
        if not callable(getattr(executor, "submit", None)):
            raise DepgraphError(f"executor: expected a concurrent.futures executor, got {type(executor).__name__}")
        if not _picklable(run):
            raise DepgraphError(f"runner: {_runner_id(run)} cannot be sent to worker processes; define it at "
                                "module level or leave executor out")
    if client is not None:
        if workers is not None:
            raise DepgraphError("workers: a sweep on a Dask client uses the cluster's workers; leave workers out")
        if not callable(getattr(client, "submit", None)):
            raise DepgraphError(f"client: expected a dask.distributed.Client, got {type(client).__name__}")
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        _require_pyarrow()
    runner_id = _runner_id(run)
    digests = {m: _model_digest(m) for m in scenario.grid["models"]}
    ids = [_part_id(p, runner_id, digests[p["model"]]) for p in points]
    parts_dir = out / ".parts" / scenario.name if out is not None else None

    results: list[list[dict] | None] = [None] * len(points)
    if parts_dir is not None and resume:
        for i, part_id in enumerate(ids):
            results[i] = _load_part(parts_dir / f"{part_id}.json", part_id)
    pending = [i for i, r in enumerate(results) if r is None]
    resumed = len(points) - len(pending)
    if client is not None:
        n_workers = len(getattr(client, "scheduler_info", lambda: {})().get("workers", {})) or 1
    elif executor is not None:
        n_workers = getattr(executor, "_max_workers", 0) or 1
    elif workers is None:
        n_workers = min(_cpu_count() if _picklable(run) else 1, len(pending))
    else:
        n_workers = min(workers, len(pending))
        if n_workers > 1 and not _picklable(run):
            raise DepgraphError(f"runner: {_runner_id(run)} cannot be sent to worker processes; define it at "
                                "module level or pass workers=1")

    bar = _Progress(f"sweep {scenario.name}", len(points), resumed, enabled=progress)
    bar.say(f"{len(points)} points" + (f", {resumed} loaded from {parts_dir}" if resumed else "")
            + (f", {n_workers} worker{'s' if n_workers != 1 else ''}" if pending else "")
            + (" on Dask" if client is not None and pending else ""))

    from .report import _atomic_write_text

    def record(i: int, text: str) -> None:
        rows = json.loads(text)
        if parts_dir is not None:
            _atomic_write_text(parts_dir / f"{ids[i]}.json", _part_text(ids[i], points[i], rows))
        results[i] = rows
        bar.advance()

    try:
        if client is not None:
            if pending:
                _run_dask(client, run, points, pending, record)
        elif executor is not None:
            _run_on(executor, run, points, pending, record)
        elif n_workers <= 1:
            for i in pending:
                try:
                    text = _run_point(run, points[i])
                except Exception as exc:
                    raise _point_error(exc, points[i]["key"])
                record(i, text)
        elif pending:
            _run_pool(run, points, pending, n_workers, record)
    except KeyboardInterrupt:
        bar.close()
        saved = sum(r is not None for r in results) if parts_dir is not None else 0
        raise SweepInterrupted(saved, len(points), parts_dir is not None) from None
    finally:
        bar.close()
    table = _table(points, results)
    if out is not None:
        _write_outputs(table, out, scenario.name)
    return table


def _picklable(run: Runner) -> bool:
    try:
        pickle.dumps(run)
    except Exception:
        return False
    return True


def _run_pool(run: Runner, points: list[dict], pending: list[int], n_workers: int,
              record: Callable[[int, str], None]) -> None:
    pool = worker_pool(n_workers)
    try:
        _run_on(pool, run, points, pending, record)
    except BaseException:
        _stop(pool)
        raise
    pool.shutdown(wait=True)


def _run_on(executor: Executor, run: Runner, points: list[dict], pending: list[int],
            record: Callable[[int, str], None]) -> None:
    """Run the pending points on ``executor``; record each as it finishes. On
    an error or Ctrl-C the points not started are cancelled."""
    futures = {executor.submit(_run_point, run, points[i]): i for i in pending}
    try:
        for fut in as_completed(futures):
            i = futures[fut]
            exc = fut.exception()
            if exc is not None:
                raise _point_error(exc, points[i]["key"])
            record(i, fut.result())
    except BaseException:
        for fut in futures:
            fut.cancel()
        raise


def _run_dask(client: Any, run: Runner, points: list[dict], pending: list[int],
              record: Callable[[int, str], None]) -> None:
    """Run the pending points as tasks on a Dask cluster; record each as it
    finishes. Dask itself reruns a task whose worker died."""
    try:
        from distributed import as_completed as dask_as_completed
    except ImportError:  # pragma: no cover - the client came from somewhere
        raise DepgraphError("client: running a sweep on Dask needs dask.distributed "
                            "(pip install 'depgraph[dask]')") from None
    futures = {client.submit(_run_point, run, points[i], pure=False): i for i in pending}
    try:
        for fut in dask_as_completed(list(futures)):
            i = futures.pop(fut)
            if fut.status == "error":
                raise _point_error(fut.exception(), points[i]["key"])
            text = fut.result()
            fut.release()
            record(i, text)
    except BaseException:
        client.cancel(list(futures))
        raise


def _stop(pool: ProcessPoolExecutor) -> None:
    """Cancel what has not started and end the workers now."""
    if hasattr(pool, "terminate_workers"):  # Python 3.14+
        pool.terminate_workers()
        return
    processes = list((getattr(pool, "_processes", None) or {}).values())
    manager = getattr(pool, "_executor_manager_thread", None)
    pool.shutdown(wait=False, cancel_futures=True)
    for p in processes:
        if p.is_alive():
            p.terminate()
    # The pool's manager thread sees the workers die and reaps them; joining
    # them here as well would race it for their exit status.
    if manager is not None:
        manager.join(timeout=30)


# ------------------------------------------------------------------ command line


def _workers_arg(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def add_sweep_command(subparsers) -> argparse.ArgumentParser:
    """Add ``depgraph sweep SCENARIO [-o OUT] [--workers N | --scheduler ADDRESS] [--fresh] [--quiet]``."""
    p = subparsers.add_parser("sweep", help="run a scenario file's grid into one table (CSV and Parquet), resumably")
    p.add_argument("scenario", help="scenario TOML file, e.g. workloads/replay.toml")
    p.add_argument("-o", "--out", default="results",
                   help="output folder (default results): <name>.csv, <name>.parquet, and .parts/ to resume from")
    p.add_argument("--workers", type=_workers_arg, default=None, metavar="N",
                   help="worker processes (default: one per CPU; 1 runs in this process)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="run the points on an existing Dask cluster, e.g. tcp://10.0.0.5:8786 "
                        "(needs depgraph[dask]; default: local worker processes)")
    p.add_argument("--fresh", action="store_true", help="recompute every point instead of resuming")
    p.add_argument("--quiet", action="store_true", help="no progress on standard error")
    return p


def run_sweep_command(args: argparse.Namespace) -> int:
    """Run ``depgraph sweep``; 130 and one line when interrupted."""
    scenario = load_scenario(args.scenario)
    out = Path(args.out)
    address = getattr(args, "scheduler", None)
    client = _connect(address, args.workers) if address else None
    try:
        table = sweep(scenario, out_dir=out, workers=args.workers, progress=not args.quiet, resume=not args.fresh,
                      client=client)
    except SweepInterrupted as exc:
        print(f"depgraph: {exc}", file=sys.stderr)
        return 130
    finally:
        if client is not None:
            client.close()
    print(f"wrote {out / (scenario.name + '.csv')} and {out / (scenario.name + '.parquet')} "
          f"({scenario.num_points} points, {len(table)} rows)")
    return 0


def _connect(address: str, workers: int | None) -> Any:
    """A Dask client of the cluster at ``address``, or a DepgraphError that says why not."""
    if workers is not None:
        raise DepgraphError("--workers: not with --scheduler (the cluster's workers run the points)")
    try:
        from distributed import Client
    except ImportError:
        raise DepgraphError("--scheduler: needs dask.distributed (pip install 'depgraph[dask]')") from None
    try:
        return Client(address, timeout="10s")
    except (OSError, TimeoutError) as exc:
        raise DepgraphError(f"--scheduler: cannot reach a Dask scheduler at {address} ({exc})") from None
