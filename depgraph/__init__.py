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
from .errors import ConfigError, CycleError, DepgraphError, GraphError
from .graph import EDGE_KINDS, NODE_KINDS, validate_graph
from .hardware import GPU, Link, load_gpu, load_link
from .io import read_graph, write_graph
from .load import LoadModel, LoadResult, loadtest
from .models import COMPONENTS, LayerSpec, ModelSpec, catalog, handoff_bytes, load_model, model_from_config
from .perfetto import to_perfetto, trace_events
from .policies import POLICIES, POLICY_NAMES, Policy, get_policy
from .pushpull_plots import plot_loadtest, plot_pushpull_sweep
from .scenario import Scenario, expand_scenario, load_scenario
from .scheduler import (CompiledGraph, EventTable, Schedule, breakdown, compile_graph, critical_path, frontier,
                        frontier_width_max, schedule)
from .sweeps import read_sweep, sweep
from .workloads import (ADMISSIONS, HOOK_SCOPES, LINK_RULES, TIMINGS, continuous_batching, expected_step_admission,
                        interleaved, pipeline, single_request, speculative, stall_s)
from .workloads.trace import batching_trace, trace_ttft_s

__all__ = [
    # models, hardware, the cost model
    "COMPONENTS", "CostModel", "GPU", "LayerSpec", "Link", "ModelSpec", "catalog", "handoff_bytes", "load_gpu",
    "load_link", "load_model", "model_from_config",
    # the event graph, policies, the scheduler and its analyses
    "CompiledGraph", "EDGE_KINDS", "EventTable", "NODE_KINDS", "POLICIES", "POLICY_NAMES", "Policy", "Schedule",
    "breakdown", "compile_graph", "critical_path", "frontier", "frontier_width_max", "get_policy", "read_graph",
    "schedule",
    "validate_graph", "write_graph",
    # workloads
    "ADMISSIONS", "HOOK_SCOPES", "LINK_RULES", "TIMINGS", "batching_trace", "continuous_batching",
    "expected_step_admission", "interleaved", "pipeline", "single_request", "speculative", "stall_s", "trace_ttft_s",
    # sweeps, load tests, anomalies
    "Anomaly", "LoadModel", "LoadResult", "Scenario", "expand_scenario", "find_anomalies", "load_scenario",
    "loadtest", "read_sweep", "sweep",
    # seeing it
    "draw", "gantt", "plot_frontier", "plot_loadtest", "plot_pushpull_sweep", "to_perfetto", "trace_events",
    # errors
    "ConfigError", "CycleError", "DepgraphError", "GraphError",
]

__version__ = "0.1.0"
