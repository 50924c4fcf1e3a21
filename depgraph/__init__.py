"""depgraph: how long the decode side of a disaggregated handoff waits, and on what.

>>> import depgraph as dg
>>> G = dg.single_request("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=0.4, gpu="study-effective")
>>> S = dg.schedule(G, policy="layer")
>>> round(S.ttft_s * 1e3, 1)
54.0
"""

import importlib

from . import _moved
from ._version import __version__
from .io.draw import draw, gantt, plot_frontier

# the modules of depgraph's first, flat layout stay importable under their old names
_moved.install(__name__)

#: Where each public name lives: imported on first use (PEP 562), so that
#: ``import depgraph`` and the command line start fast.
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(("Anomaly", "find_anomalies"), "anomalies"),
    **dict.fromkeys(("ConfigError", "CycleError", "DepgraphError", "GraphError", "MemoryFitError"), "errors"),
    # core: the event graph, policies, the scheduler
    **dict.fromkeys(("EDGE_KINDS", "NODE_KINDS"), "core.graph"),
    **dict.fromkeys(("POLICIES", "POLICY_NAMES", "Policy", "get_policy"), "core.policies"),
    **dict.fromkeys(("CompiledGraph", "Schedule", "breakdown", "compile_graph", "critical_path", "frontier",
                     "frontier_events", "frontier_peak", "frontier_width_max", "schedule", "validate_graph"),
                    "core.scheduler"),
    **dict.fromkeys(("WAIT_CAUSES", "waits"), "core.waits"),
    **dict.fromkeys(("EventTable",), "core.table"),
    # specs: models, hardware, costs
    **dict.fromkeys(("CostModel",), "specs.cost"),
    **dict.fromkeys(("GPU", "Link", "load_gpu", "load_link"), "specs.hardware"),
    **dict.fromkeys(("COMPONENTS", "LayerSpec", "ModelSpec", "SUPPORTED_FAMILIES", "catalog", "handoff_bytes",
                     "handoff_bytes_per_rank", "load_model", "model_from_config"), "specs.models"),
    # workloads, the serving engine, sweeps
    **dict.fromkeys(("ADMISSIONS", "HOOK_SCOPES", "LINK_RULES", "TIMINGS", "continuous_batching",
                     "expected_step_admission", "interleaved", "pipeline", "single_request", "speculative",
                     "stall_s"), "workloads"),
    **dict.fromkeys(("batching_trace", "trace_ttft_s"), "workloads.trace"),
    **dict.fromkeys(("LoadModel", "LoadResult", "loadtest"), "serving.simulator"),
    **dict.fromkeys(("plot_loadtest", "plot_pushpull_sweep"), "serving.plots"),
    **dict.fromkeys(("Scenario", "expand_scenario", "load_scenario"), "sweeps.scenario"),
    **dict.fromkeys(("read_sweep", "sweep"), "sweeps"),
    **dict.fromkeys(("plan",), "sweeps.plan"),
    **dict.fromkeys(("explore",), "explorer"),
    # files and pictures
    **dict.fromkeys(("read_graph", "write_graph"), "io.graphfile"),
    **dict.fromkeys(("to_perfetto", "trace_events"), "io.perfetto"),
}

__all__ = [
    # models, hardware, the cost model
    "COMPONENTS", "CostModel", "GPU", "LayerSpec", "Link", "ModelSpec", "catalog", "handoff_bytes", "load_gpu",
    "load_link", "load_model", "model_from_config",
    # the event graph, policies, the scheduler and its analyses
    "CompiledGraph", "EDGE_KINDS", "EventTable", "NODE_KINDS", "POLICIES", "POLICY_NAMES", "Policy", "Schedule",
    "breakdown", "compile_graph", "critical_path", "frontier", "frontier_events", "frontier_peak",
    "frontier_width_max", "get_policy", "read_graph", "schedule", "WAIT_CAUSES", "waits",
    "validate_graph", "write_graph",
    # workloads
    "ADMISSIONS", "HOOK_SCOPES", "LINK_RULES", "TIMINGS", "batching_trace", "continuous_batching",
    "expected_step_admission", "interleaved", "pipeline", "single_request", "speculative", "stall_s", "trace_ttft_s",
    # sweeps, load tests, anomalies
    "Anomaly", "LoadModel", "LoadResult", "Scenario", "expand_scenario", "find_anomalies", "load_scenario",
    "loadtest", "plan", "read_sweep", "sweep",
    # seeing it
    "draw", "explore", "gantt", "plot_frontier", "plot_loadtest", "plot_pushpull_sweep", "to_perfetto",
    "trace_events",
    # errors
    "ConfigError", "CycleError", "DepgraphError", "GraphError", "MemoryFitError",
]

def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        if name.startswith("_") or not _moved.is_submodule(__name__, name):
            raise AttributeError(f"module 'depgraph' has no attribute {name!r}")
        return importlib.import_module(f"{__name__}.{name}")  # a submodule, as after an eager import
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
