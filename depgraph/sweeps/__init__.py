"""Sweeps: run any registered workload over a scenario file's grid.

- :mod:`~depgraph.sweeps.scenario`: scenario files (TOML), validated and expanded into points.
- :mod:`~depgraph.sweeps.points`: the point runner, the one function that turns a point into rows.
- :mod:`~depgraph.sweeps.runner`: :func:`sweep`, resumable and parallel, into one tidy table.
- :mod:`~depgraph.sweeps.tables`, :mod:`~depgraph.sweeps.parts`: the table's columns, saved points.
- :mod:`~depgraph.sweeps.execute`, :mod:`~depgraph.sweeps.workers`: where points run.

The names below are imported on first use (PEP 562), so that the command
line can reach :mod:`~depgraph.sweeps.workers` and start the workers before it
loads pandas and the builders.
"""

import importlib

#: Where each name lives.
_EXPORTS = {
    **dict.fromkeys(("SweepInterrupted", "sweep"), "runner"),
    **dict.fromkeys(("LEAD_COLUMNS", "ROW_COLUMNS", "read_sweep"), "tables"),
    **dict.fromkeys(("cpu_count", "stop_pool", "worker_pool"), "workers"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
