"""Run every point of a scenario, in parallel and resumably, into one table.

:func:`sweep` expands a scenario (see :mod:`depgraph.sweeps.scenario`), hands each
point to a *runner* (by default :func:`depgraph.sweeps.points.run_point`) and
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
version, code and data files (hardware, shipped models, cost defaults) and
the model's config file (:mod:`depgraph.sweeps.parts`). A changed grid
therefore reuses the points it still holds and computes only the new ones,
while a changed workload parameter, runner, data file or module computes
afresh. A part is used only if it verifies (checksum, this point, the
table's schema); the others are named on standard error and computed
again. ``resume=False`` (``depgraph sweep --fresh``) recomputes everything.
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

>>> from depgraph.sweeps.scenario import parse_scenario
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
['key', 'model', 'prompt_tokens', 'link', 'gpu', 'mfu', 'timing', 'workload', 'variant', 'prefill_tp', 'decode_tp', 'prefill_pp']
>>> df.key.iloc[0]
'qwen3.6-35b-a3b|1024|25g|h100-sxm|1.0|handoff|single|-'
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from concurrent.futures import BrokenExecutor, Executor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import pandas as pd

from .._validate import boolean
from ..errors import DepgraphError
from ..io.atomic import atomic_write_text
from .execute import Runner, picklable, point_error, run_dask, run_on, run_point_json, runner_id
from .parts import in_the_way, load_part, model_digest, move_aside, part_id, part_text
from .points import run_point
from .progress import Progress
from .scenario import Scenario, expand_scenario, load_scenario
from .tables import require_pyarrow, sweep_table, write_outputs
from .workers import cpu_count, how_workers_died, stop_pool, worker_pool

__all__ = ["SweepInterrupted", "WorkerDied", "sweep"]


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`sweep`: ``saved`` of ``total`` points are on disk."""

    def __init__(self, saved: int, total: int, resumable: bool) -> None:
        tail = ", rerun to resume" if resumable else " (no out_dir: nothing kept)"
        super().__init__(f"interrupted; {saved} of {total} points saved{tail}")
        self.saved = saved
        self.total = total


class WorkerDied(BrokenProcessPool):
    """A worker process of :func:`sweep` died (killed by the out-of-memory
    killer, say): ``saved`` of ``total`` points are on disk, and the same
    sweep run again resumes from them. A ``BrokenProcessPool``, as the
    pool's own error is."""

    def __init__(self, name: str, how: str | None, saved: int, total: int, parts_dir: Path | None) -> None:
        kept = (f"{saved} of {total} points saved in {parts_dir}; rerun the same command to resume"
                if parts_dir is not None else "no out_dir: nothing kept")
        super().__init__(f"sweep {name}: a worker process died ({how or 'it ended abruptly'}); {kept}")
        self.how = how
        self.saved = saved
        self.total = total


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
        A :class:`~depgraph.sweeps.scenario.Scenario` or the path of a scenario file.
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
        :func:`depgraph.sweeps.points.run_point`. Worker processes import it by name, so it
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
    and comes back as one naming the point's key. A worker process that
    dies (the out-of-memory killer's SIGKILL) stops it as :class:`WorkerDied`,
    the points finished by then saved.

    Without ``client``, workers are local processes forked from a clean
    fork server (``forkserver``, on Linux) or fresh interpreters (``spawn``,
    elsewhere), never from this process, so that results never depend on
    state inherited by ``fork``; a script that calls :func:`sweep` with
    several workers needs the usual ``if __name__ == "__main__":`` guard.
    """
    progress, resume = boolean("progress", progress), boolean("resume", resume)
    scenario = scenario_or_path if isinstance(scenario_or_path, Scenario) else load_scenario(scenario_or_path)
    points = expand_scenario(scenario)
    run = _check_options(runner, workers, executor, client)
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        require_pyarrow()
    name = runner_id(run)
    digests = {m: model_digest(m) for m in scenario.grid["models"]}
    ids = [part_id(p, name, digests[p["model"]]) for p in points]
    parts_dir = out / ".parts" / scenario.name if out is not None else None

    results: list[list[dict] | None] = [None] * len(points)
    if parts_dir is not None and resume:
        results = _load_parts(parts_dir, ids, points, scenario.name)
    pending = [i for i, r in enumerate(results) if r is None]
    resumed = len(points) - len(pending)
    n_workers = _worker_count(run, len(pending), workers, executor, client)

    bar = Progress(f"sweep {scenario.name}", len(points), resumed, enabled=progress)
    bar.say(f"{len(points)} points" + (f", {resumed} loaded from {parts_dir}" if resumed else "")
            + (f", {n_workers} worker{'s' if n_workers != 1 else ''}" if pending else "")
            + (" on Dask" if client is not None and pending else ""))

    def record(i: int, text: str) -> None:
        rows = json.loads(text)
        if parts_dir is not None:
            _save_part(parts_dir / f"{ids[i]}.json", part_text(ids[i], points[i], rows), scenario.name)
        results[i] = rows
        bar.advance()

    how: str | None = None  # how a worker died, read from its pool before the others are stopped
    try:
        if client is not None:
            if pending:
                try:
                    run_dask(client, run, points, pending, record)
                except Exception as exc:
                    if type(exc).__name__ != "KilledWorker":  # Dask gave up: each worker running the point died
                        raise
                    how = "the Dask workers that ran one point all died"
                    raise BrokenProcessPool(how) from exc
        elif executor is not None:
            try:
                run_on(executor, run, points, pending, record)
            except BrokenExecutor:
                how = how_workers_died(executor)
                raise
        elif n_workers <= 1:
            for i in pending:
                try:
                    text = run_point_json(run, points[i])
                except Exception as exc:
                    raise point_error(exc, points[i]["key"])
                record(i, text)
        elif pending:
            pool = worker_pool(n_workers)
            try:
                run_on(pool, run, points, pending, record)
            except BaseException as exc:
                if isinstance(exc, BrokenExecutor):
                    how = how_workers_died(pool)
                stop_pool(pool)
                raise
            pool.shutdown(wait=True)
    except KeyboardInterrupt:
        bar.close()
        saved = sum(r is not None for r in results) if parts_dir is not None else 0
        raise SweepInterrupted(saved, len(points), parts_dir is not None) from None
    except BrokenExecutor as exc:  # a worker killed (out of memory, kill -9): the environment, not the sweep
        bar.close()
        saved = sum(r is not None for r in results) if parts_dir is not None else 0
        raise WorkerDied(scenario.name, how, saved, len(points), parts_dir) from exc
    finally:
        bar.close()
    table = sweep_table(points, results)
    if out is not None:
        write_outputs(table, out, scenario.name)
    return table


def _load_parts(parts_dir: Path, ids: list[str], points: list[dict], name: str) -> list[list[dict] | None]:
    """The saved rows of each point, ``None`` where there are none or they do
    not verify; one line on standard error counts the ones that did not."""
    results: list[list[dict] | None] = []
    rejected: Counter[str] = Counter()
    for ident, point in zip(ids, points):
        rows, why = load_part(parts_dir / f"{ident}.json", ident, point)
        results.append(rows)
        if why is not None:
            rejected[why] += 1  # a directory (or a FIFO, a symlink) there is moved aside when the part is saved
    if rejected:
        n = sum(rejected.values())
        reasons = ", ".join(f"{why}: {k}" for why, k in sorted(rejected.items()))
        print(f"depgraph: sweep {name}: {n} saved point{'s' * (n != 1)} in {parts_dir} did not verify ({reasons}); "
              "computing them again", file=sys.stderr)
    return results


def _clear_the_way(path: Path, name: str) -> None:
    """Move aside what stands where ``path``'s part is to be written and is
    not a file a sweep wrote (a directory, a FIFO, a symlink), saying so in
    one line; nothing is deleted."""
    kind = in_the_way(path)
    if kind is not None:
        moved = move_aside(path)
        print(f"depgraph: sweep {name}: {kind} stood where a saved point belongs; moved {path} aside to {moved.name}",
              file=sys.stderr)


def _save_part(path: Path, text: str, name: str) -> None:
    """A part written whole to ``path``; something not a file standing there
    (left since the parts were loaded, or with ``resume=False``, where they
    are not) is moved aside first rather than replaced."""
    _clear_the_way(path, name)  # one lstat: nothing next to computing a point
    atomic_write_text(path, text)


def _check_options(runner: Runner | None, workers: int | None, executor: Executor | None, client: Any) -> Runner:
    """The runner to use, once :func:`sweep`'s options are known to fit together."""
    if runner is None:
        run: Runner = run_point
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
        if not picklable(run):
            raise DepgraphError(f"runner: {runner_id(run)} cannot be sent to worker processes; define it at "
                                "module level or leave executor out")
    if client is not None:
        if workers is not None:
            raise DepgraphError("workers: a sweep on a Dask client uses the cluster's workers; leave workers out")
        if not callable(getattr(client, "submit", None)):
            raise DepgraphError(f"client: expected a dask.distributed.Client, got {type(client).__name__}")
    return run


def _worker_count(run: Runner, pending: int, workers: int | None, executor: Executor | None, client: Any) -> int:
    if client is not None:
        return len(getattr(client, "scheduler_info", lambda: {})().get("workers", {})) or 1
    if executor is not None:
        return getattr(executor, "_max_workers", 0) or 1
    if workers is None:
        return min(cpu_count() if picklable(run) else 1, pending)
    if min(workers, pending) > 1 and not picklable(run):
        raise DepgraphError(f"runner: {runner_id(run)} cannot be sent to worker processes; define it at "
                            "module level or pass workers=1")
    return min(workers, pending)
