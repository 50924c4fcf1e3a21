"""A load model of disaggregated serving: push vs pull handoff, the decode loop, decode slots.

One decode server has ``max_num_seqs`` slots and a main loop. Each loop
iteration first runs the handoff setup work queued on the loop (pull's
posting work: every running request pauses while it runs), then one decode
step for every running request (memory-bound, from the cost model, plus a
fixed per-step overhead). A request holds its slot until its last output
token. Requests arrive by a seeded Poisson process, at a constant rate, or
from a trace; a prefill pool prefills them.

``pull``
    after prefill, serial steps: the router relays where the blocks are
    (``relay_s``), decode allocates a slot (waiting if none is free) and posts
    the transfer on its loop (``posting_s``, pausing every running request),
    then reads the blocks (the TP-sliced transfer). The request joins the
    next iteration.
``pull-thread``
    the same, with the posting work on a background thread (one thread,
    first come first served): it delays this request, not the others.
``push``
    decode registers free blocks when the request arrives, so a slot is held
    from arrival (waiting if none is free, before prefill starts); prefill
    writes into them from a background thread; nothing runs on the loop.

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

from collections import deque
import heapq
import itertools
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .._memory import check_memory
from .._validate import one_of, positive_int, positive_number
from ..specs.cost import CostModel, calibrated_fields
from ..specs.predictor import ServingPredictor, posting_s
from ..errors import ConfigError, MemoryFitError
from ..specs.hardware import DEFAULT_LINK, load_gpu, load_link
from ..specs.models import ModelSpec, load_model
from ..specs.parallel import check_pp, check_tp_pair
from ..specs.routing import parse_routing
from .arrivals import (ARRIVAL_PROCESSES, MAX_ARRIVAL_S, MAX_REQUESTS, MAX_TRACE_FILE_BYTES, arrivals,  # noqa: F401
                       checked_trace, read_trace)
from .engine import ROUTERS, EngineConfig, default_max_num_batched_tokens, parse_deployment, simulate_colocated
from .graphs import run_graph
from .results import (STEADY_STATE_MARGIN, STEADY_STATE_MIN_REQUESTS, LoadResult, check_slos, kv_used,  # noqa: F401
                      latency_summary, meets_slos, steady_state, step_series, time_average)
from .memory import check_sides, decode_pools, max_slots_in_memory, weights_per_gpu_bytes

__all__ = ["HANDOFFS", "LoadModel", "LoadResult", "loadtest", "arrivals", "meets_slos", "read_trace", "run_graph",
           "steady_state", "STEADY_STATE_MARGIN", "STEADY_STATE_MIN_REQUESTS", "MAX_REQUESTS",
           "MAX_ARRIVAL_S", "MAX_TRACE_FILE_BYTES"]

HANDOFFS = ("push", "pull", "pull-thread")
#: Peak memory of a load test per request (its record, its table rows) and per loop iteration (its
#: record and timeline changes): measured 1.5 to 1.9 kB per request and 540 B per iteration over 200
#: to 20,000 requests and 17,000 to 500,000 iterations (tests/test_memory.py keeps the estimate
#: within 2x of the peak).
BYTES_PER_REQUEST = 2_000
BYTES_PER_ITERATION = 550
SLOT_SCOPES = ("running", "reserved")


@dataclass(frozen=True, slots=True)
class LoadModel:
    """Every assumption of the load model, with its default and why.

    ``gpu = "h200"``, ``tp = 8`` (``prefill_tp`` and ``decode_tp`` set the
    sides apart: prefill over the first, decode steps and slot memory over
    the second, a handoff over as many NICs as the smaller has),
    ``prefill_pp = decode_pp = 1`` (pipeline stages: an activation hop of the
    cost model's 0.05 ms per stage boundary on a prefill and on a decode
    step, slot memory per stage, the handoff spread over the stages' NICs;
    one batch in flight, vLLM's overlap of several is not modelled),
    ``collectives = False``: the fitted ``prefill_mfu`` and
    ``decode_step_overhead_s`` below already hold the tensor-parallel
    all-reduces of the study's servers; ``True`` adds the cost model's
    per-layer all-reduces (:meth:`~depgraph.specs.cost.CostModel.allreduce_s`)
    to every prefill and decode step, for an MFU and overhead measured
    without them (kernel profiles),
    ``link = "ib-ndr"`` (400 Gbit/s = 50 GB/s)
    per GPU: the study's servers (the study's scenario names ``50GBps``, the
    same bandwidth without the per-message latency). ``prefill_mfu = 0.4``. ``hbm_efficiency = 1.0``: decode reads
    at the GPU's peak HBM bandwidth, everything else the step costs being in
    ``decode_step_overhead_s`` (the two are calibrated together, below; the
    cost model's real-hardware default, 0.8, would count part of it twice).
    ``decode_servers = 1`` decode servers, each with its own ``max_num_seqs``
    slots, loop and posting thread, the proxy picking one per request as it
    arrives (``router``: ``round-robin`` or ``least-outstanding``).
    ``prefill_max_num_batched_tokens = None``: each prefill server prefills
    whole prompts one at a time, first come first served; a number makes
    it a vLLM engine that only prefills: each step the prompts it has
    started, then waiting ones, chunked to that token budget, costed as one
    forward pass (:meth:`~depgraph.specs.cost.CostModel.step_cost` at
    ``prefill_tp``, with ``decode_step_overhead_s`` per step), a request
    handed off at the end of the step that computes its last prompt token.
    ``prefill_servers = 0`` means the prefill
    pool never queues (the study's 540 ms push TTFT at 8 req/s with 16k
    prompts is below what one 8-GPU H200 server could prefill at bf16, so its
    prefill pool was not the bottleneck; the study is about the decode side).
    ``decode_step_overhead_s = 4.4 ms``: fixed time per decode step (launches,
    tensor-parallel all-reduce, scheduling) on top of the memory-bound reads,
    calibrated so that push at 8 req/s with 16k prompts gives the study's
    7.0 ms per token. ``posting_base_s`` and ``posting_per_block_s``: the
    decode loop's posting work per request is ``base + per_block x blocks``
    (``block_tokens = 16``); 11.06 ms + 29.1 µs per block gives the study's
    14.7 ms at 2,000 tokens and, at 16k tokens, the 40.9 ms that turns the
    study's push 7.0 ms per token into pull's 10.4 ms at 8 req/s.
    ``relay_s = 1 ms``: the router relaying where the blocks are.
    ``slot_scope = "running"``: a slot (one of ``max_num_seqs``) is held
    from the step a request joins to its last token, as vLLM counts running
    sequences and as the study's Little's-law arithmetic (slots = rate x
    output tokens x time per token) assumes. ``"reserved"`` holds it from
    the moment decode sets the request's blocks aside instead: at arrival
    for push, at allocation for pull.
    ``expert_routing = "uniform"``: how a MoE model's decode steps spread
    their tokens over the experts (:mod:`depgraph.specs.routing`), which sets
    the experts a step reads.
    """

    gpu: str = "h200"
    tp: int = 8
    prefill_tp: int | None = None  # None: tp
    decode_tp: int | None = None  # None: tp
    link: str = DEFAULT_LINK
    prefill_mfu: float = 0.4
    hbm_efficiency: float = 1.0
    prefill_servers: int = 0
    prefill_max_num_batched_tokens: int | None = None
    decode_servers: int = 1
    router: str = "round-robin"
    prefill_pp: int = 1
    decode_pp: int = 1
    collectives: bool = False
    decode_step_overhead_s: float = 4.4e-3
    posting_base_s: float = 11.06e-3
    posting_per_block_s: float = 29.1e-6
    block_tokens: int = 16
    relay_s: float = 1e-3
    slot_scope: str = "running"
    expert_routing: str = "uniform"

    def __post_init__(self) -> None:
        one_of("slot_scope", self.slot_scope, SLOT_SCOPES)
        parse_routing(self.expert_routing)  # checked here; the cost model reads it
        load_gpu(self.gpu)
        load_link(self.link)
        object.__setattr__(self, "tp", positive_int("tp", self.tp, upper=1024))  # whole numbers from here on
        for name in ("prefill_tp", "decode_tp"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, positive_int(name, getattr(self, name), upper=1024))
        check_tp_pair(self.ptp, self.dtp)
        object.__setattr__(self, "prefill_pp", check_pp("prefill_pp", self.prefill_pp))
        object.__setattr__(self, "decode_pp", check_pp("decode_pp", self.decode_pp))
        if not isinstance(self.collectives, bool):
            raise ConfigError(f"collectives: expected true or false, got {self.collectives!r}")
        positive_number("prefill_mfu", self.prefill_mfu, upper=1.0)
        positive_number("hbm_efficiency", self.hbm_efficiency, upper=1.0)
        positive_int("prefill_servers", self.prefill_servers, upper=100_000, allow_zero=True)
        positive_int("decode_servers", self.decode_servers, upper=100_000)
        if self.prefill_max_num_batched_tokens is not None:
            positive_int("prefill_max_num_batched_tokens", self.prefill_max_num_batched_tokens, upper=10_000_000)
            if not self.prefill_servers:
                raise ConfigError("prefill_max_num_batched_tokens: batches prompts on prefill servers; give "
                                  "prefill_servers (or a <P>P<D>D deployment)")
            if self.prefill_pp != 1:
                raise ConfigError("prefill_pp: batching prefill servers run one stage (give prefill_pp 1, or "
                                  "whole prompts without max_num_batched_tokens)")
        one_of("router", self.router, ROUTERS)
        for name in ("decode_step_overhead_s", "posting_base_s", "posting_per_block_s", "relay_s"):
            positive_number(name, getattr(self, name), allow_zero=True, upper=60.0)
        positive_int("block_tokens", self.block_tokens, upper=1_000_000)

    @property
    def ptp(self) -> int:
        """The prefill side's tensor-parallel size (``prefill_tp``, else ``tp``)."""
        return self.tp if self.prefill_tp is None else self.prefill_tp

    @property
    def dtp(self) -> int:
        """The decode side's tensor-parallel size (``decode_tp``, else ``tp``)."""
        return self.tp if self.decode_tp is None else self.decode_tp

    def posting_s(self, prompt_tokens: int) -> float:
        """Posting work on the decode loop for one request's blocks."""
        return posting_s(prompt_tokens, base_s=self.posting_base_s, per_block_s=self.posting_per_block_s,
                         block_tokens=self.block_tokens)


# --------------------------------------------------------------- simulation


@dataclass
class _Req:
    i: int
    arrival: float
    prompt: int
    out: int
    prefill_start: float = math.nan
    prefill_end: float = math.nan
    slot_request: float = math.nan
    slot_start: float = math.nan
    posting_start: float = math.nan
    posting_end: float = math.nan
    ready: float = math.nan
    first_token: float = math.nan
    last_token: float = math.nan
    generated: int = 0
    first_iter: int = -1
    last_iter: int = -1
    slot_from: int = -1  # the request whose slot this one took (-1: a free slot)
    prefill_server: int = -1
    prefill_after: int = -1  # the previous request on the same prefill server
    thread_after: int = -1  # the previous job on the posting thread
    decode_server: int = 0
    prefilled: int = 0  # prompt tokens computed on a batching prefill server
    prefill_step: int = -1  # the step of its server that computed its last prompt token
    nominal: float = math.nan  # when the client meant to send it (arrival is when it did, under max_concurrency)
    sent_after: int = -1  # the request whose finish freed the client slot it was sent in (-1: none)
    kv_alloc: int = 0  # tokens of KV blocks it holds on its decode server (memory=True; 0: none, nor state)
    finish_iter: int = -1  # the loop iteration that will make its last token, while it runs
    grow_iter: int = -1  # the loop iteration that will need its next KV block (-1: none before it finishes)
    join_seq: int = -1  # when it joined the running batch, in order (the newest is preempted first)
    slot_iter: int = -1  # the loop iteration whose end admitted it from the queue (memory=True; -1: on arrival)
    preemptions: int = 0
    recompute: int = 0  # tokens to recompute when it rejoins after a preemption
    preempted_token_s: float = math.nan  # the time of its last token before its latest preemption
    slot_since: float = math.nan  # when it last took a slot
    slot_held_s: float = 0.0  # time it held a slot before its latest admission (preempted spells left out)



def loadtest(model: ModelSpec | str, *, handoff: str | None = None, qps: float | None = None,
             prompt_tokens: int | None = None, out_tokens: int | None = None, num_prompts: int | None = None,
             max_num_seqs: int = 8, seed: int = 0, arrival: str = "poisson",
             trace: str | Path | pd.DataFrame | None = None, params: LoadModel | None = None,
             deployment: str | None = None, burstiness: float | None = None, range_ratio: float = 0.0,
             max_num_batched_tokens: int | None = None, chunked_prefill: bool = True,
             max_concurrency: int | None = None, router: str = "round-robin", memory: bool | None = None,
             slo_ttft_s: float | None = None, slo_tpot_s: float | None = None, kv_pool_bytes: int | None = None,
             calibration: str | Path | None = None, **overrides) -> LoadResult:
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
    other than the one it was fitted on). ``burstiness`` draws gamma arrivals as ``vllm bench
    serve --burstiness`` does; ``range_ratio`` varies the lengths;
    ``max_concurrency`` caps the requests in flight (the client sends the
    next when one finishes; a request's ``arrival_s`` is when it was sent,
    ``scheduled_s`` when it was due). With ``slo_ttft_s`` / ``slo_tpot_s`` the summary
    has ``slo_attainment`` (the share of requests meeting both) and
    ``goodput_rps`` (those requests per second, as ``vllm bench serve``'s
    request goodput), else every request counts; ``goodput_per_gpu``
    divides by ``gpus``.
    """
    model = load_model(model)
    if calibration is not None:
        from ..specs.calibration import check_fits, read_calibration

        cal = read_calibration(calibration)
        for name in cal["values"]:
            if name in overrides:
                raise ConfigError(f"{name}: given and also in the calibration {calibration}; give one")
        base = params or LoadModel()
        check_fits(cal, model=model, gpu=overrides.get("gpu", base.gpu),
                   collectives=overrides.get("collectives", base.collectives))
        overrides = {**overrides, **calibrated_fields(cal, target="load")}
    deploy = None if deployment is None else parse_deployment(deployment)
    colocated = deploy is not None and deploy.kind == "colocated"
    if not colocated:
        handoff = one_of("handoff", handoff, HANDOFFS)
    elif handoff is not None:
        raise ConfigError(f"handoff: a {deploy.name} deployment has no handoff; leave it out")
    slo = check_slos(slo_ttft_s, slo_tpot_s)
    engine = None
    if memory is not None and not isinstance(memory, bool):
        raise ConfigError(f"memory: expected true or false, got {memory!r}")
    if max_concurrency is not None:
        max_concurrency = positive_int("max_concurrency", max_concurrency, upper=10_000_000)
    if colocated:
        if kv_pool_bytes is not None and memory is False:
            raise ConfigError("kv_pool_bytes: sets the KV memory; it needs memory on")
        engine = EngineConfig(max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
                              chunked_prefill=chunked_prefill, memory=memory is not False, router=router,
                              max_concurrency=max_concurrency, kv_pool_bytes=kv_pool_bytes)
    else:
        if chunked_prefill is not True:
            raise ConfigError("chunked_prefill: applies to a colocated deployment; disaggregated prefill servers "
                              "prefill whole prompts, or chunk them with max_num_batched_tokens")
        if memory and deploy is None:
            raise ConfigError("memory: KV blocks and preemption are modelled for a deployment (<P>P<D>D or "
                              "colocated); the default load model bounds decode by its max_num_seqs slots")
        memory = deploy is not None and memory is not False
        if kv_pool_bytes is not None:
            if not memory:
                raise ConfigError("kv_pool_bytes: sets the decode servers' KV memory; it needs memory on and a "
                                  "deployment")
            kv_pool_bytes = positive_int("kv_pool_bytes", kv_pool_bytes, upper=10**15)
        if max_num_batched_tokens is not None:  # the prefill servers become batching engines
            if deploy is None:
                raise ConfigError("max_num_batched_tokens: batches prompts on prefill servers; give a deployment "
                                  "(<P>P<D>D or colocated)")
            overrides = {**overrides, "prefill_max_num_batched_tokens": max_num_batched_tokens}
        one_of("router", router, ROUTERS)
        if deploy is not None:
            for name in ("prefill_servers", "decode_servers"):
                given = overrides.get(name, getattr(params, name) if params is not None else None)
                if name in overrides and given != getattr(deploy, name[:-8]):
                    raise ConfigError(f"{name}: {given} contradicts deployment {deploy.name}; give one or the other")
            overrides = {**overrides, "prefill_servers": deploy.prefill, "decode_servers": deploy.decode,
                         "router": router}
        elif router != "round-robin":
            overrides = {**overrides, "router": router}
    params = replace(params or LoadModel(), **overrides)
    check_sides(model, params.ptp, params.dtp)
    for side, depth in (("prefill_pp", params.prefill_pp), ("decode_pp", params.decode_pp)):
        check_pp(side, depth, model.num_layers)
    max_num_seqs = positive_int("max_num_seqs", max_num_seqs, upper=1_000_000)
    if trace is None and num_prompts is not None and not isinstance(num_prompts, bool) and isinstance(num_prompts, int):
        # the simulation keeps a record per request and per loop iteration (about 1 KB each)
        if num_prompts > MAX_REQUESTS:
            need_gb = num_prompts * 2e-6
            raise ConfigError(f"num_prompts: {num_prompts:,} requests would need about {need_gb:,.0f} GB of "
                              f"simulation state and hours of time; the limit is {MAX_REQUESTS:,} requests")
    if trace is not None:
        if burstiness is not None or range_ratio:
            raise ConfigError("burstiness, range_ratio: a trace gives its own arrivals and lengths; leave them out")
        table = checked_trace(trace) if isinstance(trace, pd.DataFrame) else read_trace(trace)
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
    cost = CostModel(gpu=params.gpu, mfu=params.prefill_mfu, hbm_efficiency=params.hbm_efficiency, link=params.link,
                     prefill_tp=params.ptp, decode_tp=params.dtp, prefill_pp=params.prefill_pp,
                     decode_pp=params.decode_pp, expert_routing=params.expert_routing)
    cost.expert_routing.check(model)
    link = cost.link
    if len(table):  # every request's prompt and output within the model's context
        model.check_context(int((table["prompt_tokens"] + table["output_tokens"]).max()),
                            field="prompt_tokens" if trace is None else "trace", what="a prompt plus its output")
    meta = {"qps": qps, "seed": seed, "arrival": arrival if trace is None else "trace", "slo": slo,
            "calibration": None if calibration is None else str(calibration)}
    if deploy is not None and not colocated and len(table):  # a deployment must hold its weights and one request
        longest = int((table["prompt_tokens"] + table["output_tokens"]).max())
        whole = -(-longest // params.block_tokens) * params.block_tokens  # its last step's blocks
        if kv_pool_bytes is not None and any(pool.request_bytes(whole) > kv_pool_bytes for pool in decode_pools(
                model, tp=params.dtp, pp=params.decode_pp, gpu=cost.gpu)):
            raise MemoryFitError(f"kv_pool_bytes: {kv_pool_bytes / 1e9:.3g} GB per GPU holds not one request of "
                              f"{longest:,} tokens (its KV and state); expected more")
        if (max_slots_in_memory(model, context_tokens=longest, tp=params.dtp, gpu=cost.gpu, pp=params.decode_pp) == 0
                or memory and kv_pool_bytes is None and any(pool.request_bytes(whole) > pool.pool_bytes for pool in
                                                             decode_pools(model, tp=params.dtp, pp=params.decode_pp,
                                                                          gpu=cost.gpu))):
            raise MemoryFitError(f"decode_tp: {model.name}'s weights ({weights_per_gpu_bytes(model, tp=params.dtp) / 1e9:.1f} "
                              f"GB per GPU at TP {params.dtp}) leave no room on {cost.gpu.name} for one request of "
                              f"{longest:,} tokens; raise the TP")
    if colocated:
        return _colocated(model, cost, params, deploy, engine, table, meta)
    iterations = estimated_iterations(table, model=model, cost=cost, params=params, max_num_seqs=max_num_seqs,
                                      handoff=handoff)
    if params.prefill_max_num_batched_tokens is not None:  # and the batching prefill servers' steps
        iterations += float(table["prompt_tokens"].sum()) / params.prefill_max_num_batched_tokens + len(table)
    check_memory("num_prompts" if trace is None else "trace",
                 len(table) * BYTES_PER_REQUEST + iterations * BYTES_PER_ITERATION,
                 f"a load test of {len(table):,} requests and about {iterations:,.0f} decode-loop iterations"
                 + (" and prefill steps" if params.prefill_max_num_batched_tokens is not None else ""))
    sim = _Simulation(model, cost, link, params, handoff, max_num_seqs, table, memory=memory,
                      max_concurrency=max_concurrency, kv_pool_bytes=kv_pool_bytes)
    sim.run()
    return sim.result(**meta)


def _colocated(model: ModelSpec, cost: CostModel, params: LoadModel, deploy, engine, table: pd.DataFrame,
               meta: dict) -> LoadResult:
    """A load test of a colocated deployment (:mod:`depgraph.serving.engine`)."""
    for name, default in (("prefill_servers", 0), ("slot_scope", "running"), ("decode_servers", 1)):
        if getattr(params, name) != default:
            raise ConfigError(f"{name}: applies to the disaggregated load model, not to a {deploy.name} deployment")
    if params.prefill_pp != 1 or params.decode_pp != 1 or params.ptp != params.dtp:
        raise ConfigError("tp: a colocated server runs prefill and decode on the same GPUs: give one tp "
                          "(prefill_tp = decode_tp) and no pipeline stages")
    tp = params.dtp
    n = len(table)
    budget = engine.max_num_batched_tokens or default_max_num_batched_tokens(cost.gpu)
    tokens = float(table.output_tokens.sum())
    steps = tokens / max(1, min(engine.max_num_seqs, n)) + float(table.prompt_tokens.sum()) / budget + n
    check_memory("num_prompts", n * BYTES_PER_REQUEST + steps * BYTES_PER_ITERATION + 8 * tokens,
                 f"a colocated load test of {n:,} requests and about {steps:,.0f} engine steps")
    run = simulate_colocated(model, cost, table, tp=tp, servers=deploy.servers, config=engine,
                             overhead_s=params.decode_step_overhead_s, collectives=params.collectives)
    df = run.requests
    end = float(df.finish_s.max())
    st = run.steps
    busy = st.groupby("server").duration_s.sum().reindex(range(run.servers), fill_value=0.0)
    used = 1.0 - st.free_bytes / run.pool_bytes if engine.memory else pd.Series(0.0, index=st.index)
    summary = {
        "deployment": deploy.name, "requests": n, "servers": run.servers, "max_num_seqs": engine.max_num_seqs,
        "max_num_batched_tokens": run.max_num_batched_tokens, "chunked_prefill": engine.chunked_prefill,
        "router": engine.router, "max_concurrency": engine.max_concurrency,
        "gpu": cost.gpu.name, "link": cost.link.name, "tp": tp, "prefill_tp": tp, "decode_tp": tp,
        "prefill_mfu": cost.mfu, "hbm_efficiency": cost.decode_hbm_efficiency,
        "step_overhead_s": params.decode_step_overhead_s, "collectives": params.collectives,
        "expert_routing": str(cost.expert_routing),
        **latency_summary(df, itl=run.itl_s, slo=meta["slo"], end=end, gpus=run.servers * tp),
        "preemptions": run.preemptions, "preempted_requests": int((df.preemptions > 0).sum()),
        "bytes_moved": 0.0,  # no handoff: prefill and decode share the GPUs
        "throughput_rps": n / end if end > 0 else math.nan,
        "output_tokens_per_s": tokens / end if end > 0 else math.nan,
        "steps": len(st), "utilization_mean": float(busy.mean() / end) if end > 0 else math.nan,
        "utilization_by_server": [float(b / end) if end > 0 else math.nan for b in busy],
        "kv_used_peak": float(used.max()) if len(used) else 0.0,
        "kv_used_mean": float((used * st.duration_s).sum() / st.duration_s.sum()) if len(st) else 0.0,
        "waiting_peak": int(st.waiting.max()) if len(st) else 0,
        "running_mean": float((st.running * st.duration_s).sum() / st.duration_s.sum()) if len(st) else 0.0,
        "kv_pool_bytes": run.pool_bytes if engine.memory else None,
        "makespan_s": end, "calibration": meta.get("calibration"),
    }
    summary.update(steady_state(df.arrival_s.to_numpy(), df.ttft_s.to_numpy(), df.finish_s.to_numpy(),
                                (st.start_s.to_numpy(), st.end_s.to_numpy(), st.waiting.to_numpy()),
                                max_concurrency=engine.max_concurrency))
    timeline = st.assign(kv_used=used)
    return LoadResult(requests=df, summary=summary, timeline=timeline,
                      config={**meta, "model": model.name, "deployment": deploy.name},
                      _trace={"colocated": run})


def estimated_iterations(table: pd.DataFrame, *, model: ModelSpec, cost: CostModel, params: LoadModel,
                         max_num_seqs: int, handoff: str) -> float:
    """How many times the decode loop will step, before it runs: every output
    token of every request is made by one step, ``c`` requests at a time,
    where ``c`` is the running batch Little's law gives (arrival rate x output
    tokens x time per token, at most ``max_num_seqs``; under ``pull`` the loop
    also posts each arrival's blocks, which stretches its iterations), and the
    longest request alone needs as many steps as it has tokens."""
    out = table["output_tokens"].to_numpy(dtype=float)
    arrival = table["arrival_s"].to_numpy(dtype=float)
    n, total = len(out), float(out.sum())
    span = float(arrival.max() - arrival.min()) if n > 1 else 0.0
    rate = n / span if span > 0 else math.inf
    mean_out = total / n
    context = int(table["prompt_tokens"].mean() + mean_out / 2)

    posting = rate * params.posting_s(int(table["prompt_tokens"].mean())) if handoff == "pull" else 0.0
    predict = ServingPredictor(model, cost, step_overhead_s=params.decode_step_overhead_s,
                               collectives=params.collectives)

    def token_s(batch: int) -> float:
        step = predict.decode_step_s(batch, context * batch, [context] * batch)
        return step / (1.0 - posting) if posting < 1.0 else math.inf

    running = float(min(max_num_seqs, n))
    for _ in range(2):  # the step time depends on the batch, the batch on the step time
        running = min(float(max_num_seqs), max(1.0, rate * mean_out * token_s(max(1, round(running)))))
    return max(float(out.max()), total / running)


class _Prefill:
    """A batching prefill server's state: requests waiting, started, the step running, its steps."""

    __slots__ = ("waiting", "running", "busy", "current", "steps", "woke_by")

    def __init__(self) -> None:
        self.waiting: deque[int] = deque()
        self.running: list[int] = []
        self.busy = False
        self.current: list[tuple[int, int]] = []
        self.steps: list[tuple[float, float, int]] = []  # (start, duration, the request that woke it or -1)
        self.woke_by = -1


class _Decode:
    """One decode server's state: its slots, its loop, its posting thread."""

    __slots__ = ("free_slots", "slot_queue", "last_release", "thread_free_at", "thread_last", "pending_posting",
                 "ready_queue", "running", "context_sum", "finishing_at", "loop_busy", "iterations", "finishing",
                 "outstanding", "free_bytes", "grow_at")

    def __init__(self, slots: int, pools: list[int] | None = None) -> None:
        self.free_slots = slots
        self.slot_queue: list[int] = []  # FIFO of requests waiting for a slot
        self.last_release: list[int] = []  # requests whose slots were freed and not yet taken (stack of ids)
        self.thread_free_at = 0.0
        self.thread_last = -1
        self.pending_posting: list[int] = []
        self.ready_queue: list[int] = []
        self.running: dict[int, int] = {}  # the requests in the batch, in the order they joined: context - iteration
        self.context_sum = 0  # their prompt and generated tokens, all together
        self.finishing_at: dict[int, list[int]] = {}  # loop iteration -> requests whose last token it makes
        self.loop_busy = False
        self.iterations: list[dict] = []
        self.finishing: list[int] = []
        self.outstanding = 0
        self.free_bytes = list(pools) if pools else []  # per pipeline stage, on each of its GPUs (memory=True)
        self.grow_at: dict[int, list[int]] = {}  # loop iteration -> running requests that need a KV block in it


class _Simulation:
    """The discrete-event simulation. All state lives on the instance; ties
    break by (time, event order, request index), so runs are deterministic."""

    def __init__(self, model, cost, link, params, handoff, max_num_seqs, table, *, memory: bool = False,
                 max_concurrency: int | None = None, kv_pool_bytes: int | None = None) -> None:
        self.model, self.cost, self.link, self.p = model, cost, link, params
        #: every duration this simulation charges (prefill, decode step, transfer, recompute, posting)
        self.predict = ServingPredictor(model, cost, step_overhead_s=params.decode_step_overhead_s,
                                        collectives=params.collectives, posting_base_s=params.posting_base_s,
                                        posting_per_block_s=params.posting_per_block_s,
                                        block_tokens=params.block_tokens)
        self.handoff, self.slots = handoff, max_num_seqs
        self.reqs = [_Req(i, float(r.arrival_s), int(r.prompt_tokens), int(r.output_tokens))
                     for i, r in enumerate(table.itertuples(index=False))]
        for r in self.reqs:
            r.nominal = r.arrival
        self.events: list[tuple[float, int, int, str, int]] = []
        self.seq = 0
        self.prefill_free_at: list[float] = [0.0] * params.prefill_servers
        self.prefill_last: list[int] = [-1] * params.prefill_servers
        # decode memory (memory=True): every stage's KV and state pool on each decode server
        self.memory = memory
        self.pools = decode_pools(model, tp=params.dtp, pp=params.decode_pp, gpu=cost.gpu) if memory else []
        if kv_pool_bytes is not None:
            self.pools = [replace(pool, pool_bytes=kv_pool_bytes) for pool in self.pools]
        # a running request's next block, per stage, where no layer has a window (else worked out each time)
        self._block_bytes = ([pool.full_kv_bytes_per_token * params.block_tokens for pool in self.pools]
                             if memory and not any(pool.windows for pool in self.pools) else None)
        self.dec = [_Decode(max_num_seqs, [pool.pool_bytes for pool in self.pools])
                    for _ in range(params.decode_servers)]
        self.preemptions = 0
        self.joins = 0
        self.rejoin_gaps: list[float] = []  # a preempted request's gap between its tokens either side
        # the client (vLLM bench serve's max_concurrency: the next request goes when one finishes)
        self.concurrency = max_concurrency
        self.in_flight = 0
        self.client_queue: deque[int] = deque()
        self.batching = params.prefill_max_num_batched_tokens is not None
        self.pre = [_Prefill() for _ in range(params.prefill_servers)] if self.batching else []
        self._prefill_step = self.predict.engine_step(params.ptp) if self.batching else None
        self.rr = 0
        self.waiting = 0  # requests waiting for a slot, over the decode servers
        self.waiting_log: list[tuple[float, int]] = [(0.0, 0)]
        self.held_log: list[tuple[float, int]] = [(0.0, 0)]
        self.held = 0
        self._windowed = model.has_sliding_window  # a step reads each request's own context
        self._cols = None

    # -- helpers
    def _memory(self, df: pd.DataFrame) -> dict[str, Any]:
        """The most slots of the run's longest context a decode server's HBM holds (weights at this TP
        first; :mod:`depgraph.serving.memory`), and whether ``max_num_seqs`` fits in it."""
        longest = int((df.prompt_tokens + df.output_tokens).max())
        fit = max_slots_in_memory(self.model, context_tokens=longest, tp=self.p.dtp, gpu=self.cost.gpu,
                                  pp=self.p.decode_pp)
        return {"memory_max_num_seqs": fit, "memory_fits": self.slots <= fit}

    def push_event(self, t: float, kind: str, i: int) -> None:
        heapq.heappush(self.events, (t, _EVENT_ORDER[kind], self.seq, kind, i))
        self.seq += 1

    def log_waiting(self, t: float) -> None:
        self.waiting_log.append((t, self.waiting))

    def log_held(self, t: float, delta: int) -> None:
        self.held += delta
        self.held_log.append((t, self.held))

    def route(self, i: int) -> None:
        """The proxy picks the request's decode server when it arrives: in turn, or the one with the fewest
        requests routed and not finished (the lowest index on a tie)."""
        if len(self.dec) == 1:
            return
        if self.p.router == "round-robin":
            k = self.rr % len(self.dec)
            self.rr += 1
        else:
            k = min(range(len(self.dec)), key=lambda j: (self.dec[j].outstanding, j))
        self.reqs[i].decode_server = k
        self.dec[k].outstanding += 1

    # -- decode memory (memory=True): KV blocks and recurrent state, as the colocated engine holds them
    def _blocks_for(self, tokens: int) -> int:
        """Tokens of KV blocks holding ``tokens`` tokens (whole blocks)."""
        b = self.p.block_tokens
        return -(-tokens // b) * b

    def _need(self, r: _Req, tokens: int) -> list[int]:
        """Bytes per stage that growing ``r``'s blocks to ``tokens`` tokens takes (its state too, if it holds none)."""
        old = r.kv_alloc
        return [pool.request_bytes(tokens) - (pool.request_bytes(old) if old else 0) for pool in self.pools]

    @staticmethod
    def _fits(d: _Decode, need: list[int]) -> bool:
        if len(need) == 1:
            return need[0] <= d.free_bytes[0]
        return all(n <= f for n, f in zip(need, d.free_bytes))

    @staticmethod
    def _take_bytes(d: _Decode, r: _Req, tokens: int, need: list[int]) -> None:
        if len(need) == 1:
            d.free_bytes = [d.free_bytes[0] - need[0]]
        else:
            d.free_bytes = [f - n for f, n in zip(d.free_bytes, need)]
        r.kv_alloc = tokens

    def _free_bytes(self, d: _Decode, r: _Req) -> None:
        if r.kv_alloc:
            d.free_bytes = [f + pool.request_bytes(r.kv_alloc) for f, pool in zip(d.free_bytes, self.pools)]
            r.kv_alloc = 0

    def _first_blocks(self, r: _Req) -> int:
        """The blocks a request needs to run its next step: its prompt and generated tokens and the new one."""
        return self._blocks_for(r.prompt + r.generated + 1)

    def _admit(self, t: float, k: int) -> None:
        """Admit waiting requests of decode server ``k``, first come first served, while a slot is free and
        the head's blocks fit (vLLM's scheduler takes waiting requests in order and stops at the first
        whose blocks it cannot allocate)."""
        d = self.dec[k]
        while d.slot_queue and d.free_slots > 0:
            r = self.reqs[d.slot_queue[0]]
            tokens = self._first_blocks(r)
            need = self._need(r, tokens)
            if not self._fits(d, need):
                return
            d.slot_queue.pop(0)
            self.waiting -= 1
            self.log_waiting(t)
            self._take_bytes(d, r, tokens, need)
            if not r.recompute:  # the step whose end let it in (a readmission after a preemption has its own)
                r.slot_iter = len(d.iterations) - 1
            self.take_slot(t, r.i)

    def _grow(self, t: float, k: int, n: int) -> bool:
        """Before loop iteration ``n`` of server ``k``: give each running request that needs one its next
        KV block, oldest first; when none is free, preempt the newest running request (it frees its blocks
        and slot and goes back to the head of the queue, to recompute its prompt and generated tokens when
        it rejoins), as vLLM's scheduler does. Whether anything was preempted."""
        d = self.dec[k]
        due = d.grow_at.pop(n, None)
        if not due:
            return False
        preempted = False
        B = self.p.block_tokens
        block = self._block_bytes
        for i in (sorted(due, key=lambda j: self.reqs[j].join_seq) if len(due) > 1 else due):
            r = self.reqs[i]
            if i not in d.running:
                continue  # preempted earlier in this pass
            tokens = r.kv_alloc + B
            need = block or self._need(r, tokens)  # one more block (its state is held already)
            while not self._fits(d, need):
                victim = next(reversed(d.running))
                self._preempt(t, k, victim, n)
                preempted = True
                if victim == i:
                    break
            if i not in d.running:
                continue
            self._take_bytes(d, r, tokens, need)
            nxt = n + B
            if nxt <= r.finish_iter:
                r.grow_iter = nxt
                d.grow_at.setdefault(nxt, []).append(i)
            else:
                r.grow_iter = -1
        return preempted

    def _preempt(self, t: float, k: int, i: int, n: int) -> None:
        d = self.dec[k]
        r = self.reqs[i]
        context = d.running.pop(i) + n
        d.context_sum -= context
        r.generated = context - r.prompt
        d.finishing_at[r.finish_iter].remove(i)
        if r.grow_iter >= 0 and r.grow_iter != n:
            d.grow_at[r.grow_iter].remove(i)
        r.grow_iter = -1
        self._free_bytes(d, r)
        r.preemptions += 1
        self.preemptions += 1
        r.recompute = context
        r.preempted_token_s = d.iterations[-1]["end_s"]
        r.slot_held_s += t - r.slot_since
        d.free_slots += 1
        self.log_held(t, -1)
        d.slot_queue.insert(0, i)
        self.waiting += 1
        self.log_waiting(t)

    # -- slots
    def want_slot(self, t: float, i: int) -> None:
        r = self.reqs[i]
        d = self.dec[r.decode_server]
        r.slot_request = t
        if self.memory:  # let in by the loop, at its next step, after the running requests' blocks (_admit)
            d.slot_queue.append(i)
            self.waiting += 1
            self.log_waiting(t)
            self.kick_loop(t, r.decode_server)
            return
        if d.free_slots > 0 and not d.slot_queue:
            self.take_slot(t, i)
        else:
            d.slot_queue.append(i)
            self.waiting += 1
            self.log_waiting(t)

    def take_slot(self, t: float, i: int) -> None:
        r = self.reqs[i]
        d = self.dec[r.decode_server]
        d.free_slots -= 1
        self.log_held(t, +1)
        r.slot_since = t
        if r.recompute:  # back after a preemption: its KV is recomputed here, not sent again
            self.join(t, i)
            return
        r.slot_start = t
        r.slot_from = d.last_release.pop() if d.last_release else -1
        if self.p.slot_scope == "running":
            self.join(t, i)
        elif self.handoff == "push":
            self.start_prefill(t, i)
        else:
            self.post(t, i)

    def post(self, t: float, i: int) -> None:
        """Queue pull's posting work: on the loop, or on the posting thread."""
        r = self.reqs[i]
        d = self.dec[r.decode_server]
        if self.handoff == "pull":
            d.pending_posting.append(i)
            self.kick_loop(t, r.decode_server)
            return
        start = max(t, d.thread_free_at)
        r.posting_start = start
        r.posting_end = start + self.predict.posting_s(r.prompt)
        d.thread_free_at = r.posting_end
        r.thread_after = d.thread_last
        d.thread_last = i
        self.push_event(r.posting_end, "posted", i)

    def join(self, t: float, i: int) -> None:
        """The request may run from the next loop iteration."""
        k = self.reqs[i].decode_server
        self.dec[k].ready_queue.append(i)
        self.kick_loop(t, k)

    def release_slot(self, t: float, i: int) -> None:
        d = self.dec[self.reqs[i].decode_server]
        d.free_slots += 1
        d.outstanding -= 1
        self.log_held(t, -1)
        if self.memory:  # admitted by the loop, after the running requests' blocks (see _admit)
            self._free_bytes(d, self.reqs[i])
            return
        d.last_release.append(i)
        while d.free_slots > 0 and d.slot_queue:
            j = d.slot_queue.pop(0)
            self.waiting -= 1
            self.log_waiting(t)
            self.take_slot(t, j)
        if d.free_slots > 0:
            d.last_release.clear()

    # -- prefill
    def start_prefill(self, t: float, i: int) -> None:
        r = self.reqs[i]
        if self.batching:  # to the batching prefill server with the fewest prompts not yet done
            k = min(range(len(self.pre)), key=lambda j: (len(self.pre[j].waiting) + len(self.pre[j].running), j))
            ps = self.pre[k]
            r.prefill_server = k
            ps.waiting.append(i)
            if not ps.busy:
                ps.busy = True
                ps.woke_by = i
                self.push_event(t, "prefill_wake", k)
            return
        if self.p.prefill_servers == 0:
            start = t
        else:
            k = min(range(self.p.prefill_servers), key=lambda s: (max(self.prefill_free_at[s], t), s))
            start = max(self.prefill_free_at[k], t)
            r.prefill_server, r.prefill_after = k, self.prefill_last[k]
            self.prefill_free_at[k] = start + self.predict.prefill_s(r.prompt)
            self.prefill_last[k] = i
        r.prefill_start = start
        r.prefill_end = start + self.predict.prefill_s(r.prompt)
        self.push_event(r.prefill_end, "prefilled", i)

    def prefill_step(self, t: float, k: int) -> None:
        """One step of batching prefill server ``k``: the prompts it started first, then waiting ones in
        arrival order, each as much as the token budget leaves (vLLM's scheduler with only prefills)."""
        ps = self.pre[k]
        left = self.p.prefill_max_num_batched_tokens
        sched = []
        for i in ps.running:
            if left <= 0:
                break
            r = self.reqs[i]
            n = min(r.prompt - r.prefilled, left)
            sched.append((i, n))
            left -= n
        while ps.waiting and left > 0:
            i = ps.waiting.popleft()
            r = self.reqs[i]
            r.prefill_start = t
            n = min(r.prompt, left)
            ps.running.append(i)
            sched.append((i, n))
            left -= n
        if not sched:
            ps.busy = False
            return
        dur = self._prefill_step.step_s([(n, self.reqs[i].prefilled) for i, n in sched])
        ps.steps.append((t, dur, ps.woke_by))
        ps.woke_by = -1
        ps.current = sched
        self.push_event(t + dur, "prefill_step", k)

    def prefill_step_end(self, t: float, k: int) -> None:
        ps = self.pre[k]
        step = len(ps.steps) - 1
        for i, n in ps.current:
            r = self.reqs[i]
            r.prefilled += n
            if r.prefilled == r.prompt:
                ps.running.remove(i)
                r.prefill_end, r.prefill_step = t, step
                self.push_event(t, "prefilled", i)
        ps.current = []
        self.prefill_step(t, k)

    # -- the decode loop
    def kick_loop(self, t: float, k: int) -> None:
        d = self.dec[k]
        if not d.loop_busy:
            d.loop_busy = True
            self.push_event(t, "loop", k)

    def iterate(self, t: float, k: int) -> float:
        """One loop iteration of decode server ``k``: posting work first (pull), then one decode step of
        the whole batch, the requests that joined included. Each request's last iteration is known when
        it joins (it makes one token per iteration), so an iteration touches only the requests that join
        or finish in it. Returns when its step ends (the loop's next event)."""
        d = self.dec[k]
        n = len(d.iterations)
        memory = self.memory
        if memory:  # the running requests' blocks first, then, if none was preempted, admissions
            if not (n in d.grow_at and self._grow(t, k, n)) and d.slot_queue and d.free_slots > 0:
                self._admit(t, k)
        start = t
        if d.pending_posting:
            posting, d.pending_posting = d.pending_posting, []
            for i in posting:
                r = self.reqs[i]
                r.posting_start = t
                t = t + self.predict.posting_s(r.prompt)
                r.posting_end = t
                self.push_event(t, "posted", i)
        else:
            posting = []
        if d.ready_queue:
            joining = sorted(d.ready_queue)
            d.ready_queue.clear()
        else:
            joining = []
        recompute = 0.0
        for i in joining:
            r = self.reqs[i]
            context = r.prompt + r.generated
            d.running[i] = context - n  # its context at iteration j is this plus j
            d.context_sum += context
            r.finish_iter = n + r.out - r.generated - 1
            d.finishing_at.setdefault(r.finish_iter, []).append(i)
            r.join_seq = self.joins
            self.joins += 1
            if memory:  # its blocks hold context + 1 tokens; the next block is due when that is exceeded
                grow = n + r.kv_alloc - context
                r.grow_iter = grow if grow <= r.finish_iter else -1
                if r.grow_iter >= 0:
                    d.grow_at.setdefault(grow, []).append(i)
            if r.recompute:
                recompute += self.predict.recompute_s(r.recompute)
        batch = len(d.running)
        if not batch:
            step = 0.0
        elif self._windowed:
            step = self.predict.decode_step_s(batch, d.context_sum, [base + n for base in d.running.values()])
        else:
            step = self.predict.decode_step_s(batch, d.context_sum)
        if recompute:
            step += recompute
        end = t + step
        it = {"iteration": n, "start_s": start, "posting_s": t - start, "step_s": step,
              "end_s": end, "running": batch, "joined": joining, "posted": posting, "server": k}
        if memory:  # the pools' free bytes as the step ran (a list never changed in place)
            it["free_bytes"] = d.free_bytes
        d.iterations.append(it)
        for i in joining:
            r = self.reqs[i]
            if r.generated == 0:
                r.first_token, r.first_iter = end, n
            elif r.recompute:
                it["rejoined"] = it.get("rejoined", 0) + 1
                self.rejoin_gaps.append(end - r.preempted_token_s)
                r.recompute = 0
        d.context_sum += batch  # one token each
        finished = d.finishing_at.pop(n, None)
        if finished:
            for i in finished:  # in the order they joined
                r = self.reqs[i]
                r.generated = r.out
                r.last_token, r.last_iter = end, n
                del d.running[i]
                d.context_sum -= r.prompt + r.out
            d.finishing = finished
        return end

    def send(self, t: float, i: int) -> None:
        """The client sends request ``i``: the proxy routes it, and it goes to prefill (or, for push with
        reserved slots, first to its decode server for a slot)."""
        self.in_flight += 1
        self.reqs[i].arrival = t
        self.route(i)
        if self.handoff == "push" and self.p.slot_scope == "reserved":
            self.want_slot(t, i)
        else:
            self.start_prefill(t, i)

    def run(self) -> None:
        for r in self.reqs:
            self.push_event(r.arrival, "arrive", r.i)
        events = self.events
        reserved = self.p.slot_scope == "reserved"
        while events:
            t, _, _, kind, i = heapq.heappop(events)
            if kind == "loop":  # i is the decode server
                end = self._loop(t, i)
                # while the loop's next step end comes before every other event, run it here, not via the heap
                while end is not None:
                    if events and (events[0][0] < end or (events[0][0] == end and events[0][1] <= _LOOP_ORDER)):
                        heapq.heappush(events, (end, _LOOP_ORDER, self.seq, "loop", i))
                        self.seq += 1
                        break
                    end = self._loop(end, i)
            elif kind == "arrive":
                if self.concurrency is not None and self.in_flight >= self.concurrency:
                    self.client_queue.append(i)
                else:
                    self.send(t, i)
            elif kind == "prefill_wake":  # i is the prefill server
                self.prefill_step(t, i)
            elif kind == "prefill_step":
                self.prefill_step_end(t, i)
            elif kind == "prefilled":
                if self.handoff == "push":
                    self.push_event(t + self.predict.transfer_s(self.reqs[i].prompt), "ready", i)
                else:
                    self.push_event(t + self.p.relay_s, "relayed", i)
            elif kind == "relayed":
                if reserved:
                    self.want_slot(t, i)
                else:
                    self.post(t, i)
            elif kind == "posted":
                self.push_event(t + self.predict.transfer_s(self.reqs[i].prompt), "ready", i)
            elif kind == "ready":
                self.reqs[i].ready = t
                if reserved:
                    self.join(t, i)
                else:
                    self.want_slot(t, i)

    def _loop(self, t: float, k: int) -> float | None:
        """The loop of decode server ``k`` at ``t`` (a step ended, or it was woken): free the slots of the
        requests the step finished, then iterate if there is work; when its step ends, or ``None`` (idle)."""
        d = self.dec[k]
        if d.finishing:
            for j in d.finishing:  # slots free at the end of the step that finished them
                self.release_slot(t, j)
                if self.concurrency is not None:  # the client sends its next request
                    self.in_flight -= 1
                    if self.client_queue:
                        nxt = self.client_queue.popleft()
                        self.reqs[nxt].sent_after = j
                        self.send(t, nxt)
            d.finishing = []
        if self.memory and d.slot_queue and not (d.pending_posting or d.ready_queue or d.running):
            self._admit(t, k)  # nothing runs: the queue's head may fit now
        if d.pending_posting or d.ready_queue or d.running:
            return self.iterate(t, k)
        d.loop_busy = False
        return None

    def kv_used(self, free_bytes: np.ndarray) -> np.ndarray:
        """`kv_used` of this run's pools."""
        return kv_used(free_bytes, [pool.pool_bytes for pool in self.pools])

    def _occupancy(self, end: float) -> dict[str, Any]:
        """Per server, the share of the run it was busy (a decode server's loop, a prefill server's
        prompts or steps), and, with memory, the KV and state pool's peak and time-average use (the
        fullest stage, each loop step weighted by its length)."""
        out: dict[str, Any] = {}
        loops = [float(np.cumsum(c["end_s"] - c["start_s"])[-1]) if len(c["end_s"]) else 0.0
                 for c in self._columns()]
        out["utilization_by_decode_server"] = [b / end if end > 0 else math.nan for b in loops]
        if self.batching:
            busy = [sum(dur for _, dur, _ in ps.steps) for ps in self.pre]
        else:
            busy = [0.0] * self.p.prefill_servers
            for r in self.reqs:
                if r.prefill_server >= 0:
                    busy[r.prefill_server] += r.prefill_end - r.prefill_start
        out["utilization_by_prefill_server"] = [b / end if end > 0 else math.nan for b in busy]
        if self.memory:
            its = self.iterations
            used = self.kv_used(np.array([it["free_bytes"] for it in its], dtype=np.float64).reshape(len(its), -1))
            span = np.concatenate([c["end_s"] - c["start_s"] for c in self._columns()])
            total = float(span.sum())
            out.update(kv_used_peak=float(used.max()) if len(used) else 0.0,
                       kv_used_mean=float((used * span).sum()) / total if total else 0.0,
                       kv_pool_bytes=min(pool.pool_bytes for pool in self.pools))
        return out

    def _queue_spans(self, df: pd.DataFrame, end: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The queue :func:`steady_state` tests, as ``(start_s, end_s, count)`` spans: the requests waiting
        for a slot (the waiting log's steps), and, with prefill servers, each request's wait for one."""
        m = len(self.waiting_log)
        log = np.fromiter(itertools.chain.from_iterable(self.waiting_log), np.float64, 2 * m).reshape(m, 2)
        times = log[:, 0]
        spans = [times, np.append(times[1:], max(end, times[-1])), log[:, 1]]
        if self.p.prefill_servers:
            queued = (df.slot_start_s if self.handoff == "push" and self.p.slot_scope == "reserved"
                      else df.arrival_s).to_numpy()
            waited = queued + df.prefill_queue_s.to_numpy()
            spans = [np.concatenate([spans[0], queued]), np.concatenate([spans[1], waited]),
                     np.concatenate([spans[2], np.ones(len(queued))])]
        return spans[0], spans[1], spans[2]

    def _columns(self) -> list[dict[str, np.ndarray]]:
        """Per decode server, its iterations' ``start_s``, ``end_s``, ``posting_s``, ``running`` and
        ``rejoined`` as arrays, and ``firsts``: how many requests made their first token in each."""
        if self._cols is None:
            cols = []
            for k, d in enumerate(self.dec):
                its, m = d.iterations, len(d.iterations)
                c = {key: np.fromiter((it[key] for it in its), np.float64, m)
                     for key in ("start_s", "end_s", "posting_s")}
                c["running"] = np.fromiter((it["running"] for it in its), np.int64, m)
                c["rejoined"] = np.fromiter((it.get("rejoined", 0) for it in its), np.int64, m)
                firsts = [r.first_iter for r in self.reqs if r.decode_server == k and r.first_iter >= 0]
                c["firsts"] = np.bincount(np.array(firsts, dtype=np.int64), minlength=m)[:m]
                cols.append(c)
            self._cols = cols
        return self._cols

    @property
    def iterations(self) -> list[dict]:
        """Every decode loop iteration, server by server."""
        return [it for d in self.dec for it in d.iterations]

    # -- results
    def result(self, **meta) -> LoadResult:
        rows = []
        for r in self.reqs:
            tpot = (r.last_token - r.first_token) / (r.out - 1) if r.out > 1 else math.nan
            slot_wait = r.slot_start - r.slot_request
            before_prefill = self.handoff == "push" and self.p.slot_scope == "reserved"
            inside_handoff = self.handoff != "push" and self.p.slot_scope == "reserved"
            parts = {"prefill_queue_s": r.prefill_start - (r.slot_start if before_prefill else r.arrival),
                     "prefill_s": r.prefill_end - r.prefill_start,
                     "handoff_s": r.ready - r.prefill_end - (slot_wait if inside_handoff else 0.0),
                     "slot_wait_s": slot_wait}
            rows.append({"request": r.i, "arrival_s": r.arrival, "prompt_tokens": r.prompt, "output_tokens": r.out,
                         "ttft_s": r.first_token - r.arrival, **parts,
                         "decode_s": r.first_token - max(r.ready, r.slot_start),
                         "tpot_s": tpot, "slot_start_s": r.slot_start, "slot_end_s": r.last_token,
                         "time_in_slot_s": r.slot_held_s + (r.last_token - r.slot_since) if r.preemptions
                         else r.last_token - r.slot_start, "finish_s": r.last_token,
                         "e2e_s": r.last_token - r.arrival, "decode_server": r.decode_server,
                         "scheduled_s": r.nominal, "preemptions": r.preemptions})
        df = pd.DataFrame(rows)
        timeline = step_series(self.held_log, "slots_held").merge(
            step_series(self.waiting_log, "waiting"), on="time_s", how="outer").sort_values("time_s").ffill()
        end = float(df.finish_s.max())
        held_mean = time_average(self.held_log, end)
        cols = self._columns()  # summed in order (np.cumsum: the same on every Python version)
        if any(len(c["end_s"]) for c in cols):
            loop_time = float(np.cumsum(np.concatenate([c["end_s"] - c["start_s"] for c in cols]))[-1])
            posting = float(np.cumsum(np.concatenate([c["posting_s"] for c in cols]))[-1])
        else:
            loop_time = posting = 0.0
        tpot = df.tpot_s.dropna()
        # Little's law in the arrival window, away from the start-up and the drain: time-average slots held
        # there against the rate requests take slots there times their mean time in a slot
        t0, t1 = float(df.arrival_s.min()), float(df.arrival_s.max())
        inside = df[(df.slot_start_s >= t0) & (df.slot_start_s < t1)]
        window = {"slots_held_mean_window": time_average(self.held_log, t1, start=t0) if t1 > t0 else math.nan,
                  "slot_rate_window_rps": len(inside) / (t1 - t0) if t1 > t0 else math.nan,
                  "time_in_slot_mean_window_s": float(inside.time_in_slot_s.mean()) if len(inside) else math.nan}
        summary = {
            "handoff": self.handoff, "requests": len(df), "max_num_seqs": self.slots,
            "gpu": self.cost.gpu.name, "link": self.link.name, "tp": self.p.tp, "prefill_tp": self.p.ptp,
            "decode_tp": self.p.dtp, "prefill_pp": self.p.prefill_pp, "decode_pp": self.p.decode_pp,
            "collectives": self.p.collectives, "prefill_mfu": self.cost.mfu,
            "hbm_efficiency": self.cost.decode_hbm_efficiency, "expert_routing": str(self.cost.expert_routing),
            **self._memory(df),
            **{f"ttft_p{q}_s": float(np.percentile(df.ttft_s, q)) for q in (50, 90, 99)},
            "ttft_mean_s": float(df.ttft_s.mean()),
            **{f"tpot_p{q}_s": float(np.percentile(tpot, q)) if len(tpot) else math.nan for q in (50, 90, 99)},
            "slots_held_mean": held_mean,
            "waiting_peak": int(max(n for _, n in self.waiting_log)),
            "waiting_mean": time_average(self.waiting_log, end),
            "loop_posting_share": posting / loop_time if loop_time else 0.0,
            "throughput_rps": len(df) / end if end > 0 else math.nan,  # over [0, end], as slots_held_mean
            "time_in_slot_mean_s": float(df.time_in_slot_s.mean()),
            "makespan_s": end,  # arrival_rate_rps: from steady_state, below
            **window,
        }
        # every running request's next token comes one iteration later: an iteration's inter-token gap
        # counts once per request in it that already had a token
        parts = []
        for c in cols:
            gaps = np.diff(c["end_s"])
            repeats = (c["running"] - c["rejoined"] - c["firsts"])[1:]
            if len(gaps):
                parts.append(np.repeat(gaps, np.maximum(repeats, 0)))
        if self.rejoin_gaps:  # a request back after a preemption waited longer than its batch's step
            parts.append(np.array(self.rejoin_gaps))
        itl = np.concatenate(parts) if parts else np.zeros(0)
        P, D = self.p.prefill_servers, self.p.decode_servers
        gpus = self.p.dtp * self.p.decode_pp * D + self.p.ptp * self.p.prefill_pp * P
        latency = latency_summary(df, itl=itl, slo=meta.get("slo") or check_slos(None, None), end=end, gpus=gpus)
        summary.update({k: v for k, v in latency.items() if k not in summary})
        summary.update(deployment=f"{P}P{D}D" if P else f"{D} decode server{'s' if D > 1 else ''}, an unbounded "
                                                        "prefill pool",
                       prefill_servers=P, decode_servers=D, router=self.p.router, preemptions=self.preemptions,
                       preempted_requests=int((df.preemptions > 0).sum()), memory=self.memory,
                       max_concurrency=self.concurrency, calibration=meta.get("calibration"),
                       bytes_moved=float(sum(self.predict.handoff_bytes(r.prompt) for r in self.reqs)),
                       **self._occupancy(end))
        summary.update(steady_state(df.arrival_s.to_numpy(), df.ttft_s.to_numpy(), df.finish_s.to_numpy(),
                                    self._queue_spans(df, end), max_concurrency=self.concurrency))
        return LoadResult(requests=df, summary=summary, timeline=timeline, config={**meta, "model": self.model.name},
                          _trace={"reqs": self.reqs, "iterations": self.iterations, "params": self.p, "prefill": self.pre,
                                  "pool_bytes": [pool.pool_bytes for pool in self.pools],
                                  "handoff": self.handoff, "prefill_s": self.predict.prefill_s,
                                  "transfer_s": self.predict.transfer_s})


#: Ties between simultaneous events of the load model go in this order.
_EVENT_ORDER = {"release": 0, "ready": 1, "posted": 2, "prefilled": 3, "relayed": 4, "arrive": 5, "loop": 6,
                "prefill_step": 7, "prefill_wake": 8}
_LOOP_ORDER = _EVENT_ORDER["loop"]
