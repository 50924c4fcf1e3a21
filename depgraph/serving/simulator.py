"""The load test's front door: :func:`loadtest` runs traffic on a deployment and returns a :class:`LoadResult`.

The default deployment is the push vs pull study's load model: one decode
server with ``max_num_seqs`` slots and a main loop fed by a prefill pool
(:mod:`~depgraph.serving.disaggregated` describes the handoffs, ``push``,
``pull`` and ``pull-thread``); ``<P>P<D>D`` and ``colocated`` are the other
configurations of the same engine. Requests arrive by a seeded Poisson
process, at a constant rate, as ``vllm bench serve --burstiness`` draws
them, or from a trace (:mod:`~depgraph.serving.arrivals`). Every keyword is
checked once, by :func:`~depgraph.serving.config.resolve`.

The first token a client sees is the end of the first decode step the
request takes part in; it produces ``out_tokens`` tokens in as many steps.
The realised run is also an event graph in the core's form
(:func:`run_graph`): the loop is a chain of step and posting events, slots
are hand-over edges, and scheduling that graph reproduces the simulated
times exactly.

>>> import depgraph as dg
>>> r = dg.loadtest("qwen3-32b", handoff="push", qps=1, prompt_tokens=1024, out_tokens=16, num_prompts=20,
...                 max_num_seqs=8, seed=0)
>>> {"ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "slots_held_mean", "waiting_peak"} <= set(r.summary)
True
>>> len(r.requests)
20
"""

from __future__ import annotations

import math
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from .._memory import check_memory
from ..errors import ConfigError
from .._validate import boolean, positive_int
from ..specs.cost import CostModel
from ..specs.models import ModelSpec, load_model
from ..specs.predictor import ServingPredictor, StepPredictor
from .arrivals import (ARRIVAL_PROCESSES, MAX_ARRIVAL_S, MAX_REQUESTS, arrivals,  # noqa: F401
                       checked_trace)
from .config import ServingConfig, resolve  # noqa: F401
from .traces import MAX_TRACE_READ_BYTES, TRACE_FORMATS, Trace, as_range, load_trace, read_trace  # noqa: F401
from .params import (HANDOFFS, ROUTERS, SLOT_SCOPES, EngineConfig, LoadModel, default_max_num_batched_tokens,  # noqa: F401
                     parse_deployment)
from .disaggregated import DisaggregatedSimulation
from .graphs import run_graph
from .results import LoadResult, meets_slos
from .steady import STEADY_STATE_MARGIN, STEADY_STATE_MIN_REQUESTS, steady_state
from .summary import BYTES_PER_ITERATION, BYTES_PER_REQUEST, colocated_result  # noqa: F401
from . import arrivals as _traffic, summary as _summary  # the knobs, read where they live (one copy each)

__all__ = ["HANDOFFS", "LoadModel", "LoadResult", "loadtest", "arrivals", "meets_slos", "read_trace", "run_graph",
           "steady_state", "STEADY_STATE_MARGIN", "STEADY_STATE_MIN_REQUESTS", "MAX_REQUESTS",
           "MAX_ARRIVAL_S", "MAX_TRACE_READ_BYTES"]


# --------------------------------------------------------------- simulation


def loadtest(model: ModelSpec | str, *, handoff: str | None = None, qps: float | None = None,
             prompt_tokens: int | None = None, out_tokens: int | None = None, num_prompts: int | None = None,
             max_num_seqs: int | None = None, seed: int = 0, arrival: str = "poisson",
             trace: str | Path | pd.DataFrame | None = None, params: LoadModel | None = None,
             deployment: str | None = None, burstiness: float | None = None, range_ratio: float = 0.0,
             max_num_batched_tokens: int | None = None, chunked_prefill: bool = True,
             max_concurrency: int | None = None, router: str = "round-robin", memory: bool | None = None,
             slo_ttft_s: float | None = None, slo_tpot_s: float | None = None, kv_pool_bytes: int | None = None,
             calibration: str | Path | None = None, calibration_corner: str | None = None,
             until_steady: bool = False, max_prompts: int | None = None, trace_format: str | None = None,
             trace_slice: tuple | str | None = None, trace_window_s: tuple | str | None = None,
             trace_speed: float = 1.0, **overrides) -> LoadResult:
    """Simulate a load test; return per-request rows and a summary.

    Either ``qps``, ``prompt_tokens``, ``out_tokens`` and ``num_prompts``
    (with ``arrival`` ``"poisson"`` or ``"constant"`` and ``seed``), or a
    ``trace`` (a CSV path or a DataFrame with ``arrival_s``,
    ``prompt_tokens``, ``output_tokens``). ``overrides`` replace fields of
    ``params`` (a :class:`LoadModel`). Every arrival lies within
    :data:`MAX_ARRIVAL_S` (1e7 s; beyond it the clock, a double, cannot
    resolve a TTFT): ``num_prompts / qps`` and a trace's times are checked
    against it, and a trace (file or DataFrame) holds at most
    :data:`MAX_REQUESTS` rows.

    The summary has ``ttft_p50_s``, ``ttft_p90_s``, ``ttft_p99_s``,
    ``tpot_p50_s`` (likewise), ``slots_held_mean`` (time average),
    ``waiting_peak`` and ``waiting_mean`` (requests waiting for a slot),
    ``loop_posting_share`` (fraction of the loop's time spent posting),
    ``throughput_rps`` (completions over the whole run, drain included),
    ``arrival_rate_rps``, ``time_in_slot_mean_s``, and, for Little's law
    away from start-up and drain, ``slots_held_mean_window``,
    ``slot_rate_window_rps`` and ``time_in_slot_mean_window_s`` (over the
    arrival window). Every run's summary (colocated too) has ``steady_state``:
    ``False`` when the queue grows through the run, so that its mean TTFT
    depends on how many requests it ran, ``None`` when not tested, with
    ``steady_state_reason`` and the numbers behind it (:func:`steady_state`).

    ``deployment``: ``None`` (the default) is the model above, one decode
    server fed by a prefill pool; ``"<P>P<D>D"`` is ``P`` prefill servers
    (whole prompts, first come first served, on the first free one; with
    ``max_num_batched_tokens`` each a batching, chunking engine: see
    :class:`LoadModel`'s ``prefill_max_num_batched_tokens``) and
    ``D`` decode servers (each its own slots, loop and posting thread; the
    proxy picks one per request by ``router``). ``"colocated"`` (or ``"colocated:N"``, N
    servers) runs prefill and decode on the same GPUs with vLLM's step rules
    (:mod:`depgraph.serving.engine`): ``max_num_batched_tokens`` (default
    vLLM's for the GPU), ``chunked_prefill``, ``max_num_seqs``, KV memory
    with preemption (``memory=False``: unlimited), ``router``; ``handoff``
    does not apply. ``memory`` (``None``: on for a deployment, off for the
    default model): each decode server (or colocated server) holds KV blocks
    and recurrent state in what HBM leaves beside the weights; a request
    waits for its blocks, and one that cannot grow preempts the newest
    running request, which later recomputes its tokens on that server
    (summary ``preemptions``); ``kv_pool_bytes`` sets that memory per GPU
    (every stage) instead of what HBM leaves beside the weights: a what-if.
    ``calibration``: a file ``depgraph calibrate -o`` wrote; its fitted values
    replace the :class:`LoadModel` defaults (the summary's ``calibration``
    names it; a value also given in ``overrides`` is refused, as is a GPU
    other than the one it was fitted on); ``calibration_corner`` ``"slow"`` or ``"fast"`` runs each fitted
    value with an interval at the end of it that slows or speeds the run
    (:func:`~depgraph.specs.cost.calibrated_fields`; ``depgraph loadtest --calibration`` reports the
    intervals those runs give). ``burstiness`` draws gamma arrivals as ``vllm bench
    serve --burstiness`` does; ``range_ratio`` varies the lengths;
    ``max_concurrency`` caps the requests in flight (the client sends the
    next when one finishes; a request's ``arrival_s`` is when it was sent,
    ``scheduled_s`` when it was due). With ``slo_ttft_s`` / ``slo_tpot_s`` the summary
    has ``slo_attainment`` (the share of requests meeting both) and
    ``goodput_rps`` (those requests per second, as ``vllm bench serve``'s
    request goodput), else every request counts; ``goodput_per_gpu``
    divides by ``gpus``.

    ``until_steady``: run ``num_prompts`` requests, and while the steady-state verdict is not decided
    (``steady_state_decided`` false: near the knee, or a trend on its edge) run again with twice as many,
    up to ``max_prompts`` (default :data:`UNTIL_STEADY_FACTOR` times ``num_prompts``, at most
    :data:`MAX_REQUESTS`); the result is the last run's, its summary's ``steady_state_runs`` the request
    counts run (``None`` without ``until_steady``). Generated traffic only (a trace is what it is).
    """
    if params is not None and not isinstance(params, LoadModel):
        raise ConfigError(f"params: expected a depgraph.LoadModel (or None for the defaults), got "
                          f"{type(params).__name__}")
    if trace is not None and not isinstance(trace, (str, os.PathLike, pd.DataFrame, Trace)):
        raise ConfigError(f"trace: expected a trace file path, a depgraph.serving.traces.Trace or a DataFrame of "
                          f"arrivals, got {type(trace).__name__}")
    if not isinstance(trace, (str, os.PathLike)):
        for name, value, default in (("trace_format", trace_format, None), ("trace_slice", trace_slice, None),
                                     ("trace_window_s", trace_window_s, None), ("trace_speed", trace_speed, 1.0)):
            if value != default:
                raise ConfigError(f"{name}: selects and replays a trace file; give trace as a file path (a Trace "
                                  "or a DataFrame is used as it is)")
    if boolean("until_steady", until_steady):
        return _until_steady(model, num_prompts=num_prompts, max_prompts=max_prompts, trace=trace,
                             kw=dict(handoff=handoff, qps=qps, prompt_tokens=prompt_tokens, out_tokens=out_tokens,
                                     max_num_seqs=max_num_seqs, seed=seed, arrival=arrival, params=params,
                                     deployment=deployment, burstiness=burstiness, range_ratio=range_ratio,
                                     max_num_batched_tokens=max_num_batched_tokens, chunked_prefill=chunked_prefill,
                                     max_concurrency=max_concurrency, router=router, memory=memory,
                                     slo_ttft_s=slo_ttft_s, slo_tpot_s=slo_tpot_s, kv_pool_bytes=kv_pool_bytes,
                                     calibration=calibration, calibration_corner=calibration_corner, **overrides))
    if max_prompts is not None:
        raise ConfigError("max_prompts: caps until_steady's runs; give until_steady=True with it")
    model = load_model(model)
    cfg = resolve(model, handoff=handoff, deployment=deployment, max_num_seqs=max_num_seqs,
                  max_num_batched_tokens=max_num_batched_tokens, chunked_prefill=chunked_prefill,
                  max_concurrency=max_concurrency, router=router, memory=memory, slo_ttft_s=slo_ttft_s,
                  slo_tpot_s=slo_tpot_s, kv_pool_bytes=kv_pool_bytes, calibration=calibration, params=params,
                  calibration_corner=calibration_corner, **overrides)
    if trace is None and num_prompts is not None and not isinstance(num_prompts, bool) and isinstance(num_prompts, int):
        # the simulation keeps a record per request and per loop iteration (about 1 KB each)
        if num_prompts > _traffic.MAX_REQUESTS:
            if num_prompts >= 10 ** 30:  # beyond any float's exact integers: no estimate worth printing
                raise ConfigError(f"num_prompts: an integer of {len(str(num_prompts)):,} digits; the limit is "
                                  f"{_traffic.MAX_REQUESTS:,} requests")
            raise ConfigError(f"num_prompts: {num_prompts:,} requests would need about {num_prompts * 2e-6:,.0f} GB "
                              f"of simulation state and hours of time; the limit is {_traffic.MAX_REQUESTS:,} requests")
    if trace is not None:
        if burstiness is not None or range_ratio:
            raise ConfigError("burstiness, range_ratio: a trace gives its own arrivals and lengths; leave them out")
        for name, value in (("qps", qps), ("prompt_tokens", prompt_tokens), ("out_tokens", out_tokens),
                            ("num_prompts", num_prompts)):
            if value is not None:
                raise ConfigError(f"{name}: a trace gives its own arrivals and lengths; leave it out (--trace-speed "
                                  "replays it faster, --trace-slice takes part of it)")
        if isinstance(trace, (str, os.PathLike)):  # any published format, selected, filtered (counted), scaled
            trace = load_trace(trace, format=trace_format, rows=as_range(trace_slice, field="trace_slice", integer=True),
                               window_s=as_range(trace_window_s, field="trace_window_s", integer=False), speed=trace_speed,
                               max_context_tokens=model.max_position_embeddings)
        if isinstance(trace, Trace):
            table, trace_info = trace.table, trace.summary()
            if trace.hash_block_tokens is not None:
                cfg = replace(cfg, cache=replace(cfg.cache, hash_block_tokens=trace.hash_block_tokens))
        else:
            table, trace_info = checked_trace(trace), None
    else:
        missing = [n for n, v in (("qps", qps), ("prompt_tokens", prompt_tokens), ("out_tokens", out_tokens),
                                  ("num_prompts", num_prompts)) if v is None]
        if missing:
            raise ConfigError(f"{missing[0]}: required unless a trace is given")
        if burstiness is not None:
            if arrival not in ("poisson", "gamma"):
                raise ConfigError(f"burstiness: draws gamma arrivals; leave it out with arrival={arrival!r}")
            arrival = "gamma"
        table = arrivals(qps=qps, num_prompts=num_prompts, prompt_tokens=prompt_tokens, out_tokens=out_tokens,
                         process=arrival, seed=seed, burstiness=1.0 if burstiness is None else burstiness,
                         range_ratio=range_ratio)
    cost = cfg.cost_model()
    cost.expert_routing.check(model)
    if len(table):  # every request's prompt and output within the model's context
        model.check_context(int((table["prompt_tokens"] + table["output_tokens"]).max()),
                            field="prompt_tokens" if trace is None else "trace", what="a prompt plus its output")
    meta = {"qps": qps, "seed": seed, "arrival": arrival if trace is None else "trace",
            "trace": trace_info if trace is not None else None,
            "slo": {"ttft_s": cfg.client.slo_ttft_s, "tpot_s": cfg.client.slo_tpot_s}, "calibration": cfg.cost.calibration}
    if len(table):  # every server must hold its weights and one request
        cfg.check_traffic(model, cost, int((table["prompt_tokens"] + table["output_tokens"]).max()),
                          longest_prompt=int(table["prompt_tokens"].max()))
    predict = cfg.predictor(model, cost)
    if len(table):  # every duration the run can charge is finite (the longest prompt, context and batch)
        colocated = cfg.kind == "colocated"
        predict.check_finite(prompt_tokens=int(table["prompt_tokens"].max()),
                             context_tokens=int((table["prompt_tokens"] + table["output_tokens"]).max()),
                             batch=min(cfg.decode.max_num_seqs, len(table)),
                             engine_tp=cfg.decode.tp if colocated else None,
                             engine_budget=(cfg.engine.max_num_batched_tokens or default_max_num_batched_tokens(cost.gpu))
                             if colocated else 0)
    if cfg.kind == "colocated":
        return colocated_result(model, cfg, cost, table, meta)
    params = cfg.params
    iterations = estimated_iterations(table, model=model, cost=cost, params=params,
                                      max_num_seqs=cfg.decode.max_num_seqs, handoff=cfg.handoff.mode, predict=predict)
    if params.prefill_max_num_batched_tokens is not None:  # and the batching prefill servers' steps
        iterations += float(table["prompt_tokens"].sum()) / params.prefill_max_num_batched_tokens + len(table)
    check_memory("num_prompts" if trace is None else "trace",
                 len(table) * _summary.BYTES_PER_REQUEST + iterations * _summary.BYTES_PER_ITERATION,
                 f"a load test of {len(table):,} requests and about {iterations:,.0f} decode-loop iterations"
                 + (" and prefill steps" if params.prefill_max_num_batched_tokens is not None else ""))
    sim = DisaggregatedSimulation(model, cfg, cost, table, predict=predict)
    sim.run()
    return sim.result(**meta)


#: ``until_steady``'s default cap: this many times the first run's requests.
UNTIL_STEADY_FACTOR = 8


def _until_steady(model, *, num_prompts: int | None, max_prompts: int | None, trace: Any,
                  kw: dict[str, Any]) -> LoadResult:
    """:func:`loadtest` with ``until_steady``: doubled runs until the verdict is decided or the cap."""
    if trace is not None:
        raise ConfigError("until_steady: extends generated traffic; a trace is run as it is")
    if num_prompts is None:
        raise ConfigError("num_prompts: required unless a trace is given")
    n = positive_int("num_prompts", num_prompts, upper=_traffic.MAX_REQUESTS)
    cap = (min(_traffic.MAX_REQUESTS, UNTIL_STEADY_FACTOR * n) if max_prompts is None
           else positive_int("max_prompts", max_prompts, upper=_traffic.MAX_REQUESTS))
    if cap < n:
        raise ConfigError(f"max_prompts: {cap:,} is fewer than num_prompts ({n:,}); expected at least as many")
    runs = []
    while True:
        result = loadtest(model, num_prompts=n, **kw)
        runs.append(n)
        if result.summary["steady_state_decided"] is not False or n >= cap:
            break
        n = min(cap, 2 * n)
    result.summary["steady_state_runs"] = runs
    return result


def estimated_iterations(table: pd.DataFrame, *, model: ModelSpec, cost: CostModel, params: LoadModel,
                         max_num_seqs: int, handoff: str, predict: StepPredictor | None = None) -> float:
    """How many times the decode loop will step, before it runs: every output
    token of every request is made by one step, ``c`` requests at a time,
    where ``c`` is the running batch Little's law gives (arrival rate x output
    tokens x time per token, at most ``max_num_seqs``; under ``pull`` the loop
    also posts each arrival's blocks, which stretches its iterations), and the
    longest request alone needs as many steps as it has tokens. The time per
    token is the step predictor's decode step (``predict``: the run's own;
    by default one built from ``cost`` and ``params``)."""
    out = table["output_tokens"].to_numpy(dtype=float)
    arrival = table["arrival_s"].to_numpy(dtype=float)
    n, total = len(out), float(out.sum())
    span = float(arrival.max() - arrival.min()) if n > 1 else 0.0
    rate = n / span if span > 0 else math.inf
    mean_out = total / n
    context = int(table["prompt_tokens"].mean() + mean_out / 2)

    posting = rate * params.posting_s(int(table["prompt_tokens"].mean())) if handoff == "pull" else 0.0
    if predict is None:
        predict = ServingPredictor(model, cost, step_overhead_s=params.decode_step_overhead_s,
                                   collectives=params.collectives)

    def token_s(batch: int) -> float:
        step = predict.decode_step_s(batch, context * batch, [context] * batch)
        return step / (1.0 - posting) if posting < 1.0 else math.inf

    running = float(min(max_num_seqs, n))
    for _ in range(2):  # the step time depends on the batch, the batch on the step time
        running = min(float(max_num_seqs), max(1.0, rate * mean_out * token_s(max(1, round(running)))))
    return max(float(out.max()), total / running)


