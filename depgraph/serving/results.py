"""What a load test returns: :class:`LoadResult` and its latency summary.

Every deployment's run (the study's load model, ``<P>P<D>D``, colocated)
comes back as one :class:`LoadResult` (:func:`~depgraph.serving.steady.steady_state` says whether
it kept up with its load); :func:`meets_slos` is the one SLO predicate the
summary's goodput, the plots and the planner use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd

from .._validate import positive_number
from ..errors import ConfigError

__all__ = ["LoadResult", "SUMMARY_FIELDS", "INTERVAL_FIELDS", "complete_summary", "meets_slos", "check_slos", "latency_summary", "kv_used", "step_series", "time_average"]


@dataclass
class LoadResult:
    """Per-request table, summary, and the loop's timeline."""

    requests: pd.DataFrame
    summary: dict[str, Any]
    timeline: pd.DataFrame
    #: the run's inputs (``model``, ``qps``, ``seed``, ``arrival``, ``slo``, ``calibration``), with ``cost``, the
    #: :class:`~depgraph.specs.cost.CostModel` every step was charged with, and ``serving``, the resolved
    #: :class:`~depgraph.serving.config.ServingConfig` (step overhead, handoff's posting and relay costs)
    config: dict[str, Any] = field(default_factory=dict)
    _trace: dict[str, Any] = field(default_factory=dict, repr=False)
    #: ``"colocated"`` (prefill and decode on the same servers) or ``"disaggregated"`` (the study's load
    #: model and every ``<P>P<D>D`` deployment): what a printer or a plot tells results apart by
    kind: str = "disaggregated"

    @property
    def decode_steps(self) -> pd.DataFrame:
        """Every decode-loop step of a disaggregated run, server by server: ``server``, ``iteration``,
        ``start_s``, ``end_s``, ``running`` (its batch) and, with memory, ``kv_used`` (the share of the
        server's KV and state memory in use as it ran, on its fullest stage). Built when asked for."""
        its = self._trace.get("iterations")
        if its is None:
            raise ConfigError("decode_steps: a colocated run's steps are in its timeline")
        out = pd.DataFrame({"server": [it["server"] for it in its], "iteration": [it["iteration"] for it in its],
                            "start_s": [it["start_s"] for it in its], "end_s": [it["end_s"] for it in its],
                            "running": [it["running"] for it in its]})
        pools = self._trace.get("pool_bytes")
        if pools:
            out["kv_used"] = kv_used(np.array([it["free_bytes"] for it in its], dtype=np.float64)
                                      .reshape(len(its), len(pools)), pools)
        return out

    @property
    def timeline_running_max(self) -> int:
        """The largest decode batch the loop ran."""
        return max((it["running"] for it in self._trace.get("iterations", ())), default=0)

    def graph(self) -> nx.DiGraph:
        """The realised run as an event graph (see :func:`run_graph`, and
        :func:`~depgraph.serving.engine.colocated_graph` for a colocated run)."""
        from .graphs import colocated_graph, run_graph

        if self.kind == "colocated":
            return colocated_graph(self._trace["colocated"])
        return run_graph(self)


#: Every key of every load test's summary, in words, with its unit; a key that does not apply to a kind of
#: deployment is ``None`` there (said after "null"). Each kind keeps the order it has always written its own
#: keys in; the keys it lacked follow, in this table's order (:func:`complete_summary`).
SUMMARY_FIELDS: dict[str, str] = {
    "deployment": "colocated, colocated:N, <P>P<D>D, or the study's model in words (one decode server, an "
                  "unbounded prefill pool)",
    "handoff": "push, pull or pull-thread; null colocated (no handoff)",
    "requests": "requests run",
    "servers": "colocated servers; null disaggregated (prefill_servers and decode_servers count them)",
    "prefill_servers": "prefill servers (0: an unbounded pool); null colocated",
    "decode_servers": "decode servers; null colocated",
    "max_num_seqs": "running requests per server at most (decode slots, disaggregated)",
    "max_num_batched_tokens": "an engine step's token budget (colocated; disaggregated, the batching prefill "
                              "servers'); null for prefill servers of whole prompts",
    "chunked_prefill": "whether a prompt may be split over steps; null disaggregated",
    "router": "how the proxy picks a server: round-robin or least-outstanding",
    "max_concurrency": "requests in flight at most (null: an open loop)",
    "gpu": "the GPU", "link": "the link of one GPU",
    "tp": "tensor-parallel size", "prefill_tp": "the prefill side's TP", "decode_tp": "the decode side's TP",
    "prefill_pp": "the prefill side's pipeline stages (1 colocated)", "decode_pp": "the decode side's stages (1 colocated)",
    "collectives": "whether the cost model's all-reduces are added to every step",
    "prefill_mfu": "prefill model FLOPs utilisation (fraction)",
    "hbm_efficiency": "decode HBM bandwidth efficiency (fraction)",
    "step_overhead_s": "fixed time per engine or decode step, seconds",
    "expert_routing": "how a MoE model's tokens spread over its experts",
    "cost_model": "the cost model every step was charged with, in words: the GPU, efficiencies, fixed costs "
                  "and the dataset they were fitted to (CostModel.describe)",
    "memory_max_num_seqs": "requests of the run's longest context a decode server's HBM holds beside the "
                           "weights; null colocated (its engine holds blocks, not slots)",
    "memory_fits": "whether max_num_seqs fits in decode memory; null colocated",
    **{f"{m}_{q}_s": f"{what}, {label}, seconds" for m, what in (
        ("ttft", "time to first token from the request's send"), ("tpot", "time per output token after the first"),
        ("itl", "inter-token latency"), ("e2e", "end-to-end latency")) for q, label in (
        ("p50", "median"), ("p90", "90th percentile"), ("p99", "99th percentile"), ("mean", "mean"))},
    "slo_ttft_s": "the TTFT target, seconds (null: none)", "slo_tpot_s": "the TPOT target, seconds (null: none)",
    "slo_attainment": "share of requests meeting both targets",
    "goodput_rps": "requests meeting both targets per second of the run",
    "gpus": "GPUs of the deployment (the study's model: decode GPUs only; its prefill pool is unbounded)",
    "goodput_per_gpu": "goodput_rps / gpus",
    "throughput_rps": "requests finished per second over the whole run, drain included",
    "output_tokens_per_s": "output tokens per second over the whole run",
    "makespan_s": "when the last request finished, seconds",
    "steps": "engine steps (colocated) or decode-loop iterations (disaggregated), all servers",
    "preemptions": "recompute preemptions", "preempted_requests": "requests preempted at least once",
    "memory": "whether KV blocks and state are held in memory (false: slots or nothing bound the batch)",
    "kv_pool_bytes": "KV and state memory per GPU (the smallest stage's); null without memory",
    "kv_used_peak": "share of the KV pool in use at its fullest (the fullest stage); null without memory "
                    "disaggregated (0 colocated without memory)",
    "kv_used_mean": "time-average share of the KV pool in use; null without memory disaggregated",
    "bytes_moved": "bytes the handoffs moved, every rank's shards together (0 colocated): with prefix caching, only "
                   "the KV of the blocks the decode server did not hold, and each request's recurrent state",
    "trace": "the trace file read (format, path, rows read, kept, dropped by reason, speed, slice, window, span); "
             "null for generated traffic or a DataFrame",
    "prefix_caching": "whether every server that holds KV kept a prefix cache (vLLM's --enable-prefix-caching, on by "
                      "default)",
    "prefix_share_tokens": "tokens of a system prompt every request starts with (--prefix-share; 0: none)",
    "prefix_cache_hit_rate": "prompt tokens the prefill (or colocated) servers found in their prefix cache when each "
                             "request was first admitted, over all prompt tokens (0 with caching off)",
    "prefix_cache_hit_requests": "share of requests that found any prompt tokens cached",
    "prefix_cache_evicted_tokens": "tokens of free cached blocks the prefill (or colocated) servers evicted, least "
                                   "recently used first, to make room",
    "prefix_cache_block_tokens": "the block the prefix cache works in (vLLM's block_size; a hybrid model's aligned "
                                 "block); null with caching off",
    "decode_prefix_cache_hit_rate": "disaggregated: prompt tokens whose KV the decode server already held, so the "
                                    "handoff did not move it, over all prompt tokens; null colocated",
    "decode_prefix_cache_evicted_tokens": "disaggregated: tokens of free cached blocks the decode servers evicted; "
                                          "null colocated or with caching off",
    "handoff_policy": "whole (one bulk transfer per request after prefill; NICs do not contend) or the readiness "
                      "policy of a per-layer handoff (compute-then-move, global, layer, component); null colocated",
    "hook_scope": "per-layer handoff: who waits for state not yet in, request (the request joins later) or batch "
                  "(the step waits); null otherwise",
    "admission": "per-layer handoff: step (join at a step boundary) or async (first token on its own); null "
                 "otherwise",
    "nic": "per-layer handoff: per-gpu (a NIC per GPU at each end) or per-node (one per server); null otherwise",
    "token_edge": "per-layer handoff: whether the first decode step waits for the token the prefill emits (its "
                  "first layer after the prefill's end); null otherwise",
    "nic_busy_share": "per-layer handoff: each NIC's busy seconds over the run, by NIC "
                      "(prefill<k>:gpu<r>:up, decode<k>:gpu<r>:down); null otherwise",
    "nic_bytes": "per-layer handoff: bytes each NIC moved (every uplink's sum and every downlink's sum are "
                 "bytes_moved); null otherwise",
    "nic_queue_wait_mean_s": "per-layer handoff: per NIC, the mean wait of its messages between ready and sent "
                             "(behind the same request's earlier messages or other requests'); null otherwise",
    "nic_messages": "per-layer handoff: messages each NIC carried; null otherwise",
    "nic_busy_share_max": "per-layer handoff: the busiest NIC's busy share; null otherwise",
    "busiest_nic": "per-layer handoff: the NIC with the largest busy share; null otherwise",
    "nic_capacity_rps": "per-layer handoff: the request rate at which the busiest NIC would be busy all the time "
                        "(requests over its busy seconds, the run's mix of lengths and servers); null otherwise",
    "handoff_messages": "per-layer handoff: messages moved (one per layer, component and rank pair); null "
                        "otherwise",
    "link_wait_mean_s": "per-layer handoff: mean over requests of how much later their last message arrived "
                        "because other requests' messages held their NICs; null otherwise",
    "link_wait_p99_s": "per-layer handoff: its 99th percentile; null otherwise",
    "stall_mean_s": "per-layer handoff: mean over requests of the seconds their steps waited for other requests' "
                    "state (batch-scope hook; 0 with request scope); null otherwise",
    "stall_total_s": "per-layer handoff: those seconds summed over requests; null otherwise",
    "stalled_steps": "per-layer handoff: decode steps that waited for a joining request's state; null otherwise",
    "stalled_step_share": "per-layer handoff: their share of the decode steps; null otherwise",
    "waiting_peak": "requests waiting at most: for a decode slot (disaggregated), in the engine's queue at a "
                    "step's start (colocated)",
    "waiting_mean": "time-average requests waiting for a decode slot; null colocated",
    "running_mean": "step-time-average running requests; null disaggregated",
    "slots_held_mean": "time-average decode slots held; null colocated",
    "loop_posting_share": "share of the decode loops' time spent posting handoffs; null colocated",
    "time_in_slot_mean_s": "mean time a request holds a decode slot, seconds; null colocated",
    "slots_held_mean_window": "slots_held_mean over the arrival window (Little's law); null colocated",
    "slot_rate_window_rps": "requests taking a slot per second in the arrival window; null colocated",
    "time_in_slot_mean_window_s": "time_in_slot_mean_s of those requests; null colocated",
    "utilization_mean": "the colocated servers' mean share of the run spent stepping; null disaggregated",
    "utilization_by_server": "each colocated server's share of the run spent stepping; null disaggregated",
    "utilization_by_decode_server": "each decode server's share of the run its loop was busy; null colocated",
    "utilization_by_prefill_server": "each prefill server's share of the run it was busy; null colocated",
    "calibration": "the calibration file whose fitted values ran (null: none)",
    "steady_state": "false when any evidence says the load exceeds capacity (depgraph.serving.steady; null: "
                    "not tested)",
    "steady_state_reason": "the steady-state verdict in words, with every piece of evidence",
    "steady_state_decided": "false when the verdict sits on an edge a longer run could turn (null: not tested)",
    "steady_state_failed": "the evidence that says the load exceeds capacity: capacity, queue, ttft, completions",
    "steady_state_runs": "with until_steady, the request counts run until the verdict was decided (null: not asked)",
    "arrival_window_s": "first to last arrival, seconds",
    "arrival_rate_rps": "requests arriving per second over the arrival window",
    "offered_rps": "the rate the client was asked for (a trace's: its arrivals'), requests per second",
    "capacity_rps": "the capacity bound from the cost model alone, requests per second (depgraph.serving.saturation)",
    "capacity_binding": "the servers that set it: prefill servers, decode servers, decode memory, colocated "
                        "servers or colocated memory",
    "prefill_capacity_rps": "the prefill servers' rate at saturation (colocated: the servers'), requests per second",
    "decode_capacity_rps": "the decode servers' rate at saturation (colocated: the servers'), requests per second",
    "capacity_batch": "requests decoding at once at saturation, per server",
    "load_share": "offered_rps / capacity_rps",
    "queue_first_third_requests": "time-average queue over the arrival window's first third",
    "queue_last_third_requests": "the same over its last third",
    "queue_growth_per_s": "the queue's trend over the window (a line through ten stretches' means), requests per second",
    "queue_growth_noise_per_s": "that trend's standard error, requests per second",
    "ttft_trend_s": "TTFT's rise across the arrival window (a line through ten groups' means), seconds",
    "ttft_trend_noise_s": "that rise's standard error, seconds",
    "completion_rate_window_rps": "requests finishing per second within the arrival window",
    "completion_shortfall_share": "share of the window's arrivals not finished within the window shifted by the "
                                  "early requests' median end-to-end latency",
}


#: What ``depgraph loadtest --calibration FILE`` adds after the summary's keys when FILE has intervals (and
#: only then: a run without them prints the summary alone): each a ``[low, high]`` pair, seconds, of a summary
#: statistic over three runs of the same traffic: at the fitted values and at the slow and fast corners of
#: their intervals (:func:`~depgraph.serving.calibrate.predicted_intervals`; null where the run has no value).
INTERVAL_FIELDS: dict[str, str] = {
    f"{key}_interval": f"{SUMMARY_FIELDS[key]}: [low, high] over the fitted values' intervals"
    for key in ("ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p50_s", "tpot_p90_s", "tpot_p99_s")}


def complete_summary(summary: dict[str, Any], **known: Any) -> dict[str, Any]:
    """``summary`` with every key of :data:`SUMMARY_FIELDS`, so that every deployment's summary has the
    same keys: the ones it lacks follow its own, in the table's order, with their value in ``known`` or
    ``None`` (they do not apply to its kind of deployment)."""
    for key in SUMMARY_FIELDS:
        if key not in summary:
            summary[key] = known.get(key)
    return summary


def check_slos(ttft_s: float | None, tpot_s: float | None) -> dict[str, float | None]:
    """The latency targets, each positive (seconds) or ``None``."""
    for name, value in (("slo_ttft_s", ttft_s), ("slo_tpot_s", tpot_s)):
        if value is not None:
            positive_number(name, value, upper=1e6)
    return {"ttft_s": ttft_s, "tpot_s": tpot_s}


def meets_slos(requests: pd.DataFrame, ttft_s: float | None, tpot_s: float | None) -> tuple[np.ndarray, np.ndarray]:
    """Per request, whether its TTFT and whether its TPOT meet the targets (``None``: no target, every
    request meets it; a one-token answer has no TPOT and meets any)."""
    ttft = requests.ttft_s.to_numpy()
    tpot = requests.tpot_s.to_numpy()
    ttft_ok = np.ones(len(ttft), dtype=bool) if ttft_s is None else ttft <= ttft_s
    tpot_ok = np.ones(len(tpot), dtype=bool) if tpot_s is None else np.isnan(tpot) | (tpot <= tpot_s)
    return ttft_ok, tpot_ok


def latency_summary(df: pd.DataFrame, *, itl: np.ndarray, slo: dict, end: float, gpus: int) -> dict[str, Any]:
    """Percentiles of TTFT, TPOT, ITL and end-to-end latency, and goodput under the SLOs."""
    out: dict[str, Any] = {}
    for name, values in (("ttft", df.ttft_s.to_numpy()), ("tpot", df.tpot_s.dropna().to_numpy()), ("itl", itl),
                         ("e2e", df.e2e_s.to_numpy())):
        for q in (50, 90, 99):
            out[f"{name}_p{q}_s"] = float(np.percentile(values, q)) if len(values) else math.nan
        out[f"{name}_mean_s"] = float(values.mean()) if len(values) else math.nan
    ttft_ok, tpot_ok = meets_slos(df, slo["ttft_s"], slo["tpot_s"])
    n_good = int((ttft_ok & tpot_ok).sum())
    out.update(slo_ttft_s=slo["ttft_s"], slo_tpot_s=slo["tpot_s"], slo_attainment=n_good / len(df) if len(df) else 0.0,
               goodput_rps=n_good / end if end > 0 else math.nan, gpus=gpus)
    out["goodput_per_gpu"] = out["goodput_rps"] / gpus if gpus else math.nan
    return out


def kv_used(free_bytes: np.ndarray, pool_bytes: list[int]) -> np.ndarray:
    """Per row of free bytes (one column per pipeline stage), the share of a decode server's KV and
    state memory in use, on its fullest stage."""
    if not len(free_bytes):
        return np.zeros(0)
    return (1.0 - free_bytes / np.array(pool_bytes, dtype=np.float64)).max(axis=1)


def step_series(log: list[tuple[float, int]], name: str) -> pd.DataFrame:
    df = pd.DataFrame(log, columns=["time_s", name])
    return df.groupby("time_s", as_index=False).last()


def time_average(log: list[tuple[float, int]], end: float, *, start: float | None = None) -> float:
    """Time average of a step function given as (time, value) changes, over [start, end]."""
    df = step_series(log, "n")
    times, values = df.time_s.to_numpy(), df.n.to_numpy()
    lo = times[0] if start is None else start
    edges = np.clip(np.append(times, end), lo, end)
    span = end - lo
    return float((values * np.diff(edges)).sum() / span) if span > 0 else 0.0
