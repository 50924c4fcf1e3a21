"""One replay point: a workload built, run under every policy and admission.

:func:`run_point` is what a sweep calls for each grid point. Its rows carry
``policy``, ``admission`` (``step`` or ``async`` for continuous batching,
``none`` elsewhere), ``ttft_s`` and the analyses. How each workload's
``ttft_s`` is defined:

``single``, ``speculative``, ``pipeline``
    the request's first token (for speculative decoding, the end of the
    first verification).
``batch``
    the new request's first token; for ``step`` admission its expectation
    over a uniform arrival phase, computed exactly
    (:func:`~depgraph.workloads.expected_step_admission`), as the study's
    "D_c/2 + D_c" reasoning does. ``stall_s`` is the extra delay imposed on
    the running requests when the request is admitted under batch-scope
    hooks (expected the same way); ``step_s`` is ``D_c``. ``frontier_max``
    is read off the realised graph at phase 0.5.
``interleaved``
    the mean first-token time over the ``K`` requests; ``ttft_target_s`` is
    the target's, the last request's.

Every row also has ``ttft_target_s``, the target request's first token
(``Schedule.ttft_s``; for ``batch`` the same expectation as ``ttft_s``).
``ttft_s`` means the same in ``depgraph ttft`` (where ``ttft_mean_s``
repeats it under the name that says which), the sweeps, the report and the
plots: the mean over the workload's requests.
``loadtest``
    one row (policy ``-``) with the push/pull load test's summary; ``ttft_s``
    is the mean over requests (:func:`depgraph.serving.simulator.loadtest`).

>>> from depgraph.sweeps.points import run_point
>>> rows = run_point({"model": "qwen3.6-35b-a3b", "prompt_tokens": 1024, "link": "25g", "gpu": "h100-sxm", "mfu": 1.0,
...                   "timing": "handoff", "workload": "speculative", "variant": "k=3", "spec_k": 3})
>>> [(r["policy"], r["admission"]) for r in rows][:2]
[('compute-then-move', 'none'), ('global', 'none')]
"""

from __future__ import annotations

import math

from functools import lru_cache
from typing import Any, Sequence

import numpy as np

from ..specs.cost import CostModel, calibrated_fields
from ..specs.models import load_model
from ..core.policies import POLICY_NAMES, get_policy
from ..errors import ConfigError
from ..core.scheduler import Schedule, frontier_width_max, schedule
from ..workloads.batching import continuous_batching_tables, step_admission_expectation
from ..workloads.registry import get_workload

__all__ = ["run_point", "build", "with_fitted_sides"]


@lru_cache(maxsize=32)
def _model(name: str):
    return load_model(name)


def build(point: dict[str, Any], *, policy: str = "layer", admission: str = "step", phase: float = 0.5,
          hook_scope: str | None = None, cost: CostModel | None = None, as_table: bool = False):
    """The event graph of one point (for continuous batching, of one policy,
    admission and phase); an :class:`~depgraph.EventTable` with ``as_table``.
    The point's workload and its parameters are read through the registry
    (:mod:`depgraph.workloads.registry`); parameters it lacks take their
    defaults. Used by :func:`run_point`, the CLI and notebooks."""
    w = get_workload(point.get("workload", "single"))
    if not w.builds_graph:
        raise ConfigError(f"workload: {w.name!r} runs on the serving engine and builds no event graph")
    model, common = _model_and_common(point, cost)
    if not w.applies_policy:
        return w.build(model, **common, **w.keywords(point), as_table=as_table)
    # continuous batching: one admission, phase and policy (the builder applies it)
    values = {**point, "admission": admission, "phase": phase, "hook_scope": hook_scope or point.get("hook_scope")}
    kwargs = w.keywords({k: v for k, v in values.items() if v is not None})
    if not as_table:
        return w.build(model, **common, **kwargs, policy=policy)
    return next(iter(continuous_batching_tables(model, **common, **kwargs, policies=(policy,)).values()))


def with_fitted_sides(point: dict[str, Any], cost: CostModel, *, given: Sequence[str] = ()) -> dict[str, Any]:
    """``point`` with a calibrated cost model's sides: the fitted ``prefill_tp`` and ``decode_tp``
    (:meth:`~depgraph.specs.cost.CostModel.from_calibration`) where the point has the side and the
    caller ``given`` none of its own; an uncalibrated cost model leaves the point as it is."""
    if cost.calibration is None:
        return point
    return {**point, **{side: getattr(cost, side) for side in ("prefill_tp", "decode_tp")
                        if side in point and side not in given}}


def _model_and_common(point: dict[str, Any], cost: CostModel | None) -> tuple[Any, dict[str, Any]]:
    """The point's model (catalog names loaded once) and the arguments every builder takes."""
    model = _model(point["model"]) if isinstance(point["model"], str) else point["model"]
    cal = point.get("calibration")
    if cal and cost is None:  # the fitted values, as every command applies them (the point's own TP and GPU)
        kw = calibrated_fields({"values": cal, "setup": point.get("calibration_setup") or {}}, target="cost",
                               model=model, gpu=point.get("gpu"))
        for name in ("gpu", "prefill_tp", "decode_tp"):
            kw.pop(name, None)
        cost = CostModel(gpu=point.get("gpu") or CostModel().gpu, **{"mfu": point["mfu"], **kw})
    if point.get("cost"):  # the scenario's [cost] assumptions
        base = cost if cost is not None else CostModel(gpu=point.get("gpu") or CostModel().gpu, mfu=point["mfu"])
        cost = base.replace(**point["cost"])
    return model, dict(prompt_tokens=point["prompt_tokens"], link=point["link"], mfu=point["mfu"],
                       gpu=point.get("gpu"), timing=point.get("timing", "handoff"), cost=cost)


def _analyses(S: Schedule) -> dict[str, float]:
    by_request = S.ttft_by_request
    values = [v for r, v in by_request.items() if r != "batch"]
    return {
        "ttft_s": float(np.mean(values)),  # one meaning everywhere: the mean over the workload's requests
        "ttft_target_s": S.ttft_s,  # the target request's (interleaved: the last request's)
        "frontier_max": frontier_width_max(S),  # the one frontier: decode operators ready at once
        "frontier_max_data": frontier_width_max(S, admitted=False),
    }


def _milestones(S: Schedule, model) -> dict[str, float]:
    """When request 0's prefill ends (its last layer, with its all-reduces where it has ranks) and,
    where the graph has a first token distinct from its TTFT (speculative decoding), when the target's
    own first pass ends: what the studies' other readings of a gain measure from. Without the token
    edge a decode pass may end before the prefill does (a last layer with no handoff state, as in
    Nemotron, does not wait for its prefill)."""
    from ..core.graph import layer_tag

    finish = S.finish_s
    last = f"r0:prefill:{layer_tag(model.num_layers - 1)}"
    end = finish.get(f"{last}:allreduce", finish.get(last, float("nan")))
    first_pass = finish.get("r0:decode:head", float("nan")) if "r0:decode:verify" in finish else float("nan")
    return {"prefill_end_s": float(end), "target_pass_s": float(first_pass)}


def _breakdown(S: Schedule) -> dict[str, float]:
    parts = S.breakdown()
    return {k: parts[k] for k in ("prefill_s", "transfer_s", "wait_s", "decode_s")}


def _loadtest_row(point: dict[str, Any]) -> dict[str, Any]:
    """One row for a push/pull load-test point: its summary (``frontier_max``
    is the largest decode batch the loop ran)."""
    from ..serving.simulator import loadtest

    optional = ("prefill_tp", "decode_tp", "prefill_pp", "decode_pp", "deployment", "burstiness",
                "max_num_batched_tokens", "max_concurrency", "slo_ttft_s", "slo_tpot_s", "hbm_efficiency",
                "decode_step_overhead_s", "max_num_seqs")
    defaults = {"range_ratio": 0.0, "chunked_prefill": True, "router": "round-robin", "memory": True,
                "collectives": True, "fitted_defaults": True}
    if point.get("calibration"):  # a calibrated point runs as its fit was made: all-reduces, fitted terms
        from ..specs.calibration import made_with

        point = {**point, **made_with(point.get("calibration_setup") or {})}
    r = loadtest(point["model"], handoff=point.get("handoff"), qps=point["qps"], prompt_tokens=point["prompt_tokens"],
                 out_tokens=point["out_tokens"], num_prompts=point["num_prompts"],
                 seed=point["seed"], link=point["link"], tp=point["tp"],
                 prefill_mfu=point["mfu"], **({"gpu": point["gpu"]} if point.get("gpu") else {}),
                 **{k: point[k] for k in optional if point.get(k) is not None},
                 **{k: point[k] for k in defaults if point.get(k, defaults[k]) != defaults[k]},
                 **{k: v for k, v in calibrated_fields({"values": point.get("calibration") or {}}, target="load").items()
                    if k != "prefill_mfu"})  # the point's mfu is the fitted one
    s = r.summary
    keep = ("ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p50_s", "tpot_p90_s", "tpot_p99_s", "throughput_rps",
            "goodput_rps", "goodput_per_gpu", "slo_attainment", "gpus", "preemptions", "itl_p50_s", "itl_p99_s",
            "e2e_p50_s", "e2e_p99_s")
    push_pull = ("slots_held_mean", "waiting_peak", "waiting_mean", "loop_posting_share", "time_in_slot_mean_s")
    running = int(r.timeline_running_max) if r.kind != "colocated" else int(r.timeline.running.max())
    steady = s.get("steady_state")  # a table column: "yes", "no" or "not tested"
    return {"policy": "-", "admission": "none", "ttft_s": s["ttft_mean_s"], "frontier_max": running,
            **{k: s[k] for k in keep}, **{k: math.nan if s[k] is None else s[k] for k in push_pull},
            "steady_state": "not tested" if steady is None else "yes" if steady else "no",
            # the evidence beside the verdict: the capacity bound, the offered share of it, what said no
            "capacity_rps": s["capacity_rps"], "load_share": s["load_share"],
            "steady_state_failed": "+".join(s["steady_state_failed"]) or "-"}


def run_point(point: dict[str, Any], *, cost: CostModel | None = None, policies: Sequence[str] = POLICY_NAMES,
              breakdown: bool = False) -> list[dict[str, Any]]:
    """Rows for one grid point: one per policy (of ``policies``, by name) and admission
    mode. With ``breakdown`` each row also carries the TTFT breakdown along
    the critical path (``prefill_s``, ``transfer_s``, ``wait_s``,
    ``decode_s``; not for continuous batching, whose TTFT is an expectation)."""
    w = get_workload(point.get("workload", "single"))
    if not w.builds_graph:
        return [_loadtest_row(point)]
    policies = tuple(get_policy(p).name for p in policies)
    rows = []
    if not w.applies_policy:
        table = build(point, cost=cost, as_table=True)  # built once, scheduled under every policy
        model = _model(point["model"]) if isinstance(point["model"], str) else point["model"]
        for policy in policies:
            S = schedule(table, policy=policy)
            rows.append({"policy": policy, "admission": "none", **_analyses(S), "stall_s": float("nan"),
                         "step_s": float("nan"), "join_step": float("nan"), **_milestones(S, model),
                         **(_breakdown(S) if breakdown else {})})
        return rows
    scope = point.get("hook_scope", w.param("hook_scope").default)
    model, common = _model_and_common(point, cost)
    for admission in ("step", "async"):
        tables = continuous_batching_tables(
            model, **common, **w.keywords({**point, "admission": admission, "hook_scope": scope, "phase": 0.5}),
            policies=tuple(policies))
        for policy in policies:
            S = schedule(tables[policy])  # the same graph build(point, policy=policy, admission=admission) gives
            row = {"policy": policy, "admission": admission, **_analyses(S)}
            attrs = S.graph_attrs
            if admission == "step":
                e = step_admission_expectation(attrs)
                row.update(ttft_s=e["ttft_request_s"] if scope == "request" else e["ttft_batch_s"],
                           ttft_target_s=e["ttft_request_s"] if scope == "request" else e["ttft_batch_s"],
                           stall_s=e["stall_batch_s"], step_s=e["step_s"], join_step=float(attrs["join_step"]),
                           # what a fixed arrival phase needs (depgraph.studies.replay.phase_distribution)
                           admit_request_s=attrs["admit_after_s"]["request"],
                           admit_batch_s=attrs["admit_after_s"]["batch"], join_step_s=e["join_step_s"])
            else:
                row.update(stall_s=0.0, step_s=attrs["step_s"], join_step=float("nan"))
            rows.append(row)
    return rows
