"""depgraph: how long the decode side of a disaggregated handoff waits, and on what.

>>> import depgraph as dg
>>> G = dg.single_request("qwen3.6-35b-a3b", prompt_tokens=1024, link="25g", mfu=0.4)
>>> S = dg.schedule(G, policy="layer")
>>> round(S.ttft_s * 1e3, 1)
54.0
"""

import importlib
from pathlib import Path

# imported now: importing the submodule ``depgraph.draw`` would otherwise set
# the package's ``draw`` to that module instead of the function
from .draw import draw, gantt, plot_frontier

#: Where each public name lives: imported on first use (PEP 562), so that
#: ``import depgraph`` and the command line start fast.
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(("Anomaly", "find_anomalies"), "anomalies"),
    **dict.fromkeys(("CostModel",), "cost"),
    **dict.fromkeys(("ConfigError", "CycleError", "DepgraphError", "GraphError"), "errors"),
    **dict.fromkeys(("EDGE_KINDS", "NODE_KINDS", "validate_graph"), "graph"),
    **dict.fromkeys(("GPU", "Link", "load_gpu", "load_link"), "hardware"),
    **dict.fromkeys(("read_graph", "write_graph"), "io"),
    **dict.fromkeys(("LoadModel", "LoadResult", "loadtest"), "load"),
    **dict.fromkeys(("COMPONENTS", "LayerSpec", "ModelSpec", "catalog", "handoff_bytes", "load_model",
                     "model_from_config"), "models"),
    **dict.fromkeys(("to_perfetto", "trace_events"), "perfetto"),
    **dict.fromkeys(("POLICIES", "POLICY_NAMES", "Policy", "get_policy"), "policies"),
    **dict.fromkeys(("plot_loadtest", "plot_pushpull_sweep"), "pushpull_plots"),
    **dict.fromkeys(("Scenario", "expand_scenario", "load_scenario"), "scenario"),
    **dict.fromkeys(("CompiledGraph", "EventTable", "Schedule", "breakdown", "compile_graph", "critical_path",
                     "frontier", "frontier_width_max", "schedule"), "scheduler"),
    **dict.fromkeys(("read_sweep", "sweep"), "sweeps"),
    **dict.fromkeys(("ADMISSIONS", "HOOK_SCOPES", "LINK_RULES", "TIMINGS", "continuous_batching",
                     "expected_step_admission", "interleaved", "pipeline", "single_request", "speculative",
                     "stall_s"), "workloads"),
    **dict.fromkeys(("batching_trace", "trace_ttft_s"), "workloads.trace"),
}

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


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        here = Path(__file__).parent
        if name.startswith("_") or not ((here / f"{name}.py").is_file() or (here / name / "__init__.py").is_file()):
            raise AttributeError(f"module 'depgraph' has no attribute {name!r}")
        return importlib.import_module(f"{__name__}.{name}")  # a submodule, as after an eager import
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
