"""What a load test returns: :class:`LoadResult`, its latency summary, and the steady-state test.

Every deployment's run (the study's load model, ``<P>P<D>D``, colocated)
comes back as one :class:`LoadResult`; :func:`steady_state` says whether its
queue grew through the run; :func:`meets_slos` is the one SLO predicate the
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

__all__ = ["LoadResult", "SUMMARY_FIELDS", "INTERVAL_FIELDS", "complete_summary", "meets_slos", "steady_state", "STEADY_STATE_MARGIN", "STEADY_STATE_MIN_REQUESTS",
           "check_slos", "latency_summary", "kv_used", "step_series", "time_average"]


@dataclass
class LoadResult:
    """Per-request table, summary, and the loop's timeline."""

    requests: pd.DataFrame
    summary: dict[str, Any]
    timeline: pd.DataFrame
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
    "bytes_moved": "bytes the handoffs moved, every rank's shards together (0 colocated)",
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
    "steady_state": "false when the queue grows through the run (steady_state; null: not tested)",
    "steady_state_reason": "the steady-state verdict in words",
    "arrival_window_s": "first to last arrival, seconds",
    "queue_first_third_requests": "time-average queue over the arrival window's first third",
    "queue_last_third_requests": "the same over its last third",
    "queue_growth_per_s": "their difference per second between the thirds' centres",
    "ttft_trend_s": "TTFT's rise across the arrival window (least squares), seconds",
    "ttft_trend_noise_s": "that rise's standard error, seconds",
    "arrival_rate_rps": "requests arriving per second over the arrival window",
    "completion_rate_window_rps": "requests finishing per second within the arrival window",
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


#: The steady-state test's margin: a run has no steady state when its queue grows by more than this share of
#: the arrival rate and its TTFT rises by more than this many seconds per second of arrivals (both at once).
STEADY_STATE_MARGIN = 0.1


#: Fewer requests than this are not tested (``steady_state`` is ``None``): thirds of a handful say nothing.
STEADY_STATE_MIN_REQUESTS = 20


def steady_state(arrival_s: np.ndarray, ttft_s: np.ndarray, finish_s: np.ndarray,
                 queue: tuple[np.ndarray, np.ndarray, np.ndarray], *, max_concurrency: int | None = None
                 ) -> dict[str, Any]:
    """Whether a load test reached a steady state, from arrays of the finished run (O(n), no loop).

    ``queue`` is ``(start_s, end_s, count)``: spans during which ``count``
    requests wait (for a decode slot, for a prefill server, or in a
    colocated engine's queue). Over the arrival window ``[t0, t1]`` (first
    to last arrival, ``T = t1 - t0``):

    - ``queue_growth_per_s``: the time-averaged queue over the window's last
      third minus that over its first third, divided by ``2 T / 3`` (the
      distance between the thirds' centres);
    - ``ttft_trend_s``: the least-squares slope of TTFT against arrival time
      times ``T``, the rise of TTFT across the window; ``ttft_trend_noise_s``
      its standard error, as if requests were independent;
    - ``completion_rate_window_rps``: requests finished in the window per
      second, beside ``arrival_rate_rps`` (shown, not part of the rule: it lags
      the arrivals by the requests' latency).

    **Rule**: no steady state (``False``) when both the queue grows by more
    than :data:`STEADY_STATE_MARGIN` (10%) of the arrival rate
    (``queue_growth_per_s > 0.1 x arrival_rate_rps``) and TTFT rises by more
    than 0.1 s per second of the window and by more than twice its noise
    (``ttft_trend_s > max(0.1 x T, 2 x ttft_trend_noise_s)``); ``True``
    otherwise. Both measure how far arrivals outpace service: a queue served
    at ``mu`` and fed at ``lambda > mu`` grows at ``lambda - mu`` requests per
    second, and its wait at ``lambda / mu - 1`` seconds per second, so the
    margin flags runs offered about 10% more than they serve; a stable queue
    at 84% load (Poisson bursts) moves both by under 5% in runs of 25 to 400
    requests. ``None`` (not tested) with fewer than
    :data:`STEADY_STATE_MIN_REQUESTS` requests, or when they all arrive at
    once or within the shortest TTFT (a burst: every request is in before
    any is served; it only drains, and its mean TTFT grows with its size).
    Under ``max_concurrency`` (a closed loop) the rule is the same, on
    the servers' queue and the TTFT from each send: the client's backlog of
    requests held back is not counted, so a closed loop over capacity reads
    as steady when its servers are. ``steady_state_reason`` says it in words.
    """
    a = np.asarray(arrival_s, dtype=np.float64)
    y = np.asarray(ttft_s, dtype=np.float64)
    n = len(a)
    t0, t1 = (float(a.min()), float(a.max())) if n else (0.0, 0.0)
    span = t1 - t0
    nan = math.nan
    out: dict[str, Any] = {"steady_state": None, "steady_state_reason": "", "arrival_window_s": span,
                           "queue_first_third_requests": nan, "queue_last_third_requests": nan,
                           "queue_growth_per_s": nan, "ttft_trend_s": nan, "ttft_trend_noise_s": nan,
                           "arrival_rate_rps": (n - 1) / span if span > 0 else nan,
                           "completion_rate_window_rps": nan}
    closed = (f"; a closed loop (at most {max_concurrency} in flight): the servers' queue and TTFT from each send, "
              "not the client's backlog" if max_concurrency is not None else "")
    if n < STEADY_STATE_MIN_REQUESTS:
        out["steady_state_reason"] = (f"steady state not tested: {n} requests (the test needs at least "
                                      f"{STEADY_STATE_MIN_REQUESTS})")
        return out
    if not (np.isfinite(a).all() and np.isfinite(y).all()):
        out["steady_state_reason"] = "steady state not tested: an arrival time or TTFT is not a finite number"
        return out
    if span <= float(y.min()):  # a burst: every request is in before the first is served
        when = "at once" if span == 0 else f"within {span:.3g} s, before any has its first token"
        out["steady_state_reason"] = (f"steady state not tested: all {n} requests arrive {when} (a burst only "
                                      "drains; its mean TTFT grows with its size)")
        return out
    third = span / 3
    start, end, count = (np.asarray(c, dtype=np.float64) for c in queue)

    def mean_over(lo: float, hi: float) -> float:
        return float((count * np.clip(np.minimum(end, hi) - np.maximum(start, lo), 0.0, None)).sum() / (hi - lo))

    first, last = mean_over(t0, t0 + third), mean_over(t1 - third, t1)
    growth = (last - first) / (2 * third)
    x = a - a.mean()
    sxx = float((x * x).sum())  # not x @ x: BLAS's 1-D matmul is far slower here
    dy = y - y.mean()
    slope = float((x * dy).sum()) / sxx
    resid = dy - slope * x
    noise = math.sqrt(float((resid * resid).sum()) / (n - 2) / sxx) * span
    rate = out["arrival_rate_rps"]
    done = np.asarray(finish_s, dtype=np.float64)
    grows = growth > STEADY_STATE_MARGIN * rate
    rises = slope * span > max(STEADY_STATE_MARGIN * span, 2 * noise)
    steady = not (grows and rises)
    numbers = (f"{first:.1f} waiting in the first third of the arrivals, {last:.1f} in the last: "
               f"{round(growth, 2) + 0.0:+.2f} req/s, {round(100 * growth / rate) + 0:+d}% of the arrival rate; TTFT "
               f"{round(slope * span, 2) + 0.0:+.2f} s across the {span:.1f} s of arrivals")
    if steady:
        reason = f"steady state: the queue does not grow through the run ({numbers}){closed}"
    else:
        reason = (f"no steady state: the queue grows through the run ({numbers}); the mean TTFT, {float(y.mean()):.2f} "
                  f"s here, depends on the run length{closed}")
    out.update(steady_state=steady, steady_state_reason=reason, queue_first_third_requests=first,
               queue_last_third_requests=last, queue_growth_per_s=growth, ttft_trend_s=slope * span,
               ttft_trend_noise_s=noise, completion_rate_window_rps=float(((done >= t0) & (done <= t1)).sum()) / span)
    return out


def time_average(log: list[tuple[float, int]], end: float, *, start: float | None = None) -> float:
    """Time average of a step function given as (time, value) changes, over [start, end]."""
    df = step_series(log, "n")
    times, values = df.time_s.to_numpy(), df.n.to_numpy()
    lo = times[0] if start is None else start
    edges = np.clip(np.append(times, end), lo, end)
    span = end - lo
    return float((values * np.diff(edges)).sum() / span) if span > 0 else 0.0
