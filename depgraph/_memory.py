"""The memory budget: work whose estimated peak memory exceeds it is refused before it starts.

Every builder, loader and simulation that can grow with its input estimates
the peak memory it needs (each estimate is a measured cost per unit, see the
constant beside it, checked within 2x of the measured peak by
``tests/test_memory.py``) and calls :func:`check_memory` before allocating.

The budget is :data:`DEFAULT_SHARE` of this machine's memory (the smaller of
the physical memory and a cgroup limit), or what the environment variable
``DEPGRAPH_MEMORY_BUDGET`` says, in GB (``depgraph --memory-budget GB``
sets it for one command and the worker processes it starts).
"""

from __future__ import annotations

import math
import os

from .errors import ConfigError

__all__ = ["DEFAULT_SHARE", "ENV", "budget_bytes", "check_memory", "machine_memory_bytes"]

#: The environment variable that sets the budget, in GB.
ENV = "DEPGRAPH_MEMORY_BUDGET"
#: The share of the machine's memory one command may plan to use by default.
DEFAULT_SHARE = 0.5


def machine_memory_bytes() -> int | None:
    """Physical memory, or the cgroup's limit where that is lower; ``None`` where neither is known."""
    sizes = []
    try:
        sizes.append(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        pass
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path, encoding="ascii") as f:
                text = f.read(64).strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 1 << 60:
            sizes.append(int(text))
    return min(sizes) if sizes else None


def budget_bytes() -> float:
    """The memory one command may plan to use, in bytes."""
    text = os.environ.get(ENV)
    if text is not None:
        try:
            gb = float(text)
        except ValueError:
            gb = math.nan
        if not (math.isfinite(gb) and gb > 0):
            raise ConfigError(f"{ENV}: expected a memory budget in GB (a number > 0), got {text!r}")
        return gb * 1e9
    total = machine_memory_bytes()
    return DEFAULT_SHARE * total if total else math.inf


def _size(nbytes: float) -> str:
    return f"{nbytes / 1e9:,.1f} GB" if nbytes >= 1e9 else f"{nbytes / 1e6:,.0f} MB"


def check_memory(field: str, estimate_bytes: float, what: str) -> None:
    """Refuse ``what`` (named by ``field``) if its estimated peak exceeds the budget.

    >>> import os
    >>> os.environ[ENV] = "0.5"
    >>> check_memory("requests", 2e9, "2,000 requests")
    Traceback (most recent call last):
    ...
    depgraph.errors.ConfigError: requests: 2,000 requests would need about 2.0 GB of memory (estimated), more than the memory budget of 500 MB (set by DEPGRAPH_MEMORY_BUDGET); raise it with --memory-budget GB or DEPGRAPH_MEMORY_BUDGET
    >>> del os.environ[ENV]
    """
    budget = budget_bytes()
    if estimate_bytes > budget:
        source = (f"set by {ENV}" if os.environ.get(ENV) is not None
                  else f"{DEFAULT_SHARE:.0%} of this machine's {_size(machine_memory_bytes())}")
        raise ConfigError(f"{field}: {what} would need about {_size(estimate_bytes)} of memory (estimated), "
                          f"more than the memory budget of {_size(budget)} ({source}); "
                          f"raise it with --memory-budget GB or {ENV}")
