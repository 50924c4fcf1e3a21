"""Sweeps: run any registered workload over a scenario file's grid.

- :mod:`~depgraph.sweeps.scenario`: scenario files (TOML), validated and expanded into points.
- :mod:`~depgraph.sweeps.points`: the point runner, the one function that turns a point into rows.
- :mod:`~depgraph.sweeps.runner`: :func:`sweep`, resumable and parallel, into one tidy table.
- :mod:`~depgraph.sweeps.tables`, :mod:`~depgraph.sweeps.parts`: the table's columns, saved points.
- :mod:`~depgraph.sweeps.execute`, :mod:`~depgraph.sweeps.workers`: where points run.
"""

from .runner import SweepInterrupted, sweep
from .tables import LEAD_COLUMNS, ROW_COLUMNS, read_sweep
from .workers import cpu_count, stop_pool, worker_pool

__all__ = ["LEAD_COLUMNS", "ROW_COLUMNS", "SweepInterrupted", "cpu_count", "read_sweep", "stop_pool", "sweep",
           "worker_pool"]
