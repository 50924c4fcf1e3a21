"""Workload builders. Each returns a typed event graph (see :mod:`depgraph.graph`)."""

from .single import add_request, single_request, TIMINGS

__all__ = ["add_request", "single_request", "TIMINGS"]
