"""Running a sweep's pending points: here, on local worker processes, on an
executor, or on a Dask cluster; each point's rows come back as JSON.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import pickle
import threading
from concurrent.futures import Executor, as_completed
from typing import Any, Callable

from ..errors import DepgraphError
from .tables import check_rows
from .workers import stop_pool, worker_pool

__all__ = ["Runner", "collector_paused", "picklable", "point_error", "run_dask", "run_on", "run_point_json",
           "runner_id"]

Runner = Callable[[dict], list]


def runner_id(runner: Any) -> str:
    """The runner's importable name (saved parts are keyed on it), arguments of a partial included."""
    if isinstance(runner, functools.partial):
        return f"{runner_id(runner.func)}(*{runner.args!r}, **{runner.keywords!r})"
    module = getattr(runner, "__module__", None)
    name = getattr(runner, "__qualname__", None)
    if module is None or name is None:
        module, name = type(runner).__module__, type(runner).__qualname__
    return f"{module}.{name}"


_GC_LOCK = threading.Lock()
_gc_holds = 0  # points running with the collector paused (threads of one process)
_gc_was_enabled = True


@contextlib.contextmanager
def collector_paused():
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


def run_point_json(runner: Runner, point: dict) -> str:
    """Run one point (in a worker); its rows as JSON (exact floats, typed)."""
    with collector_paused():
        rows = runner({k: v for k, v in point.items() if k != "key"})
    return json.dumps(check_rows(rows, point["key"]))


def point_error(exc: BaseException, key: str) -> BaseException:
    if isinstance(exc, DepgraphError):
        if str(exc).startswith(f"point {key}:"):
            return exc
        err = DepgraphError(f"point {key}: {exc}")
        err.__cause__ = exc
        return err
    exc.add_note(f"while running point {key}")
    return exc


def picklable(run: Runner) -> bool:
    try:
        pickle.dumps(run)
    except Exception:
        return False
    return True


def run_on(executor: Executor, run: Runner, points: list[dict], pending: list[int],
            record: Callable[[int, str], None]) -> None:
    """Run the pending points on ``executor``; record each as it finishes. On
    an error or Ctrl-C the points not started are cancelled."""
    futures = {executor.submit(run_point_json, run, points[i]): i for i in pending}
    try:
        for fut in as_completed(futures):
            i = futures[fut]
            exc = fut.exception()
            if exc is not None:
                raise point_error(exc, points[i]["key"])
            record(i, fut.result())
    except BaseException:
        for fut in futures:
            fut.cancel()
        raise


def run_dask(client: Any, run: Runner, points: list[dict], pending: list[int],
              record: Callable[[int, str], None]) -> None:
    """Run the pending points as tasks on a Dask cluster; record each as it
    finishes. Dask itself reruns a task whose worker died."""
    try:
        from distributed import as_completed as dask_as_completed
    except ImportError:  # pragma: no cover - the client came from somewhere
        raise DepgraphError("client: running a sweep on Dask needs dask.distributed "
                            "(pip install 'depgraph[dask]')") from None
    futures = {client.submit(run_point_json, run, points[i], pure=False): i for i in pending}
    try:
        for fut in dask_as_completed(list(futures)):
            i = futures.pop(fut)
            if fut.status == "error":
                raise point_error(fut.exception(), points[i]["key"])
            text = fut.result()
            fut.release()
            record(i, text)
    except BaseException:
        client.cancel(list(futures))
        raise
