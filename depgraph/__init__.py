"""depgraph: how long the decode side of a disaggregated handoff waits, and on what.

>>> import depgraph as dg
>>> G = dg.single_request("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=0.4)
>>> S = dg.schedule(G, policy="layer")
>>> round(S.ttft_s * 1e3, 1)
54.0
"""

from .anomalies import Anomaly, find_anomalies
from .cost import CostModel
from .draw import draw, gantt, plot_frontier
from .perfetto import to_perfetto, trace_events
from .pushpull_plots import plot_loadtest, plot_pushpull_sweep
from .errors import ConfigError, CycleError, DepgraphError, GraphError
from .graph import EDGE_KINDS, NODE_KINDS, validate_graph
from .hardware import GPU, Link, load_gpu, load_link
from .io import read_graph, write_graph
from .loadtest import LoadModel, LoadResult, loadtest
from .models import COMPONENTS, LayerSpec, ModelSpec, catalog, handoff_bytes, load_model, model_from_config
from .policies import POLICIES, POLICY_NAMES, Policy, get_policy
from .scenario import Scenario, expand_scenario, load_scenario
from .sweep import read_sweep, sweep
from .workloads.trace import batching_trace, trace_ttft_s
from .scheduler import EventTable
from .scheduler import CompiledGraph, Schedule, breakdown, compile_graph, critical_path, frontier, schedule
from .workloads import (ADMISSIONS, HOOK_SCOPES, LINK_RULES, TIMINGS, continuous_batching, interleaved, pipeline,
                        single_request, speculative, stall_s, expected_step_admission)

__all__ = [
    "Anomaly", "find_anomalies", "COMPONENTS", "CompiledGraph", "ConfigError", "CostModel", "CycleError", "DepgraphError", "EDGE_KINDS", "GPU",
    "GraphError", "LayerSpec", "Link", "ModelSpec", "NODE_KINDS", "POLICIES", "POLICY_NAMES", "Policy", "Schedule",
    "TIMINGS", "ADMISSIONS", "HOOK_SCOPES", "LINK_RULES", "continuous_batching", "expected_step_admission", "interleaved", "pipeline",
    "speculative", "stall_s", "breakdown", "catalog", "compile_graph", "critical_path", "draw", "gantt", "plot_frontier", "to_perfetto", "trace_events", "plot_loadtest", "plot_pushpull_sweep", "frontier", "get_policy", "handoff_bytes",
    "LoadModel", "LoadResult", "loadtest", "read_graph", "write_graph", "load_gpu", "load_link", "load_model", "model_from_config", "schedule", "single_request", "sweep", "EventTable", "batching_trace", "trace_ttft_s", "read_sweep", "Scenario", "expand_scenario",
    "load_scenario", "validate_graph",
]

__version__ = "0.1.0"
