"""The one exceptions module of depgraph.

Every error depgraph raises on purpose is a :class:`DepgraphError`, which is a
``ValueError`` so that callers who only know the standard library can still
catch it. The message names the field, the value and what is allowed.
"""

from __future__ import annotations

__all__ = ["DepgraphError", "ConfigError", "MemoryFitError", "GraphError", "CycleError"]


class DepgraphError(ValueError):
    """Base class of every error depgraph raises on purpose."""


class ConfigError(DepgraphError):
    """A model, link, GPU, parameter or file failed validation."""


class MemoryFitError(ConfigError):
    """A deployment's GPUs cannot hold what it must: the model's weights, or one request's KV and state
    beside them. The capacity planner reads it as a memory-bound candidate (caught by type)."""


class GraphError(DepgraphError):
    """An event graph is malformed (bad duration, unknown attribute)."""


class CycleError(GraphError):
    """An event graph has a cycle; ``cycle`` lists nodes on it."""

    def __init__(self, message: str, cycle: list | None = None) -> None:
        super().__init__(message)
        self.cycle = list(cycle or [])
