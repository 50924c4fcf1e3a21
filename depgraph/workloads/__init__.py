"""Workload builders. Each returns a typed event graph (see :mod:`depgraph.core.graph`)."""

from .batching import (ADMISSIONS, HOOK_SCOPES, continuous_batching, continuous_batching_tables,
                       expected_step_admission, stall_s)
from .interleaved import LINK_RULES, interleaved
from .pipeline import pipeline, stage_placement
from .single import TIMINGS, add_request, single_request
from .speculative import speculative

__all__ = ["ADMISSIONS", "HOOK_SCOPES", "LINK_RULES", "TIMINGS", "add_request", "continuous_batching",
           "continuous_batching_tables", "expected_step_admission", "interleaved", "pipeline", "single_request",
           "speculative", "stage_placement", "stall_s"]
