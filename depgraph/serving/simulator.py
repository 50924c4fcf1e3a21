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

import math
from dataclasses import dataclass, replace
from pathlib import Path

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
from .engine import ROUTERS, EngineConfig, parse_deployment
from .disaggregated import DisaggregatedSimulation
from .graphs import run_graph
from .summary import BYTES_PER_ITERATION, BYTES_PER_REQUEST, colocated_result  # noqa: F401
from .results import STEADY_STATE_MARGIN, STEADY_STATE_MIN_REQUESTS, LoadResult, check_slos, meets_slos, steady_state
from .memory import check_sides, decode_pools, max_slots_in_memory, weights_per_gpu_bytes

__all__ = ["HANDOFFS", "LoadModel", "LoadResult", "loadtest", "arrivals", "meets_slos", "read_trace", "run_graph",
           "steady_state", "STEADY_STATE_MARGIN", "STEADY_STATE_MIN_REQUESTS", "MAX_REQUESTS",
           "MAX_ARRIVAL_S", "MAX_TRACE_FILE_BYTES"]

HANDOFFS = ("push", "pull", "pull-thread")
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
        return colocated_result(model, cost, params, deploy, engine, table, meta)
    iterations = estimated_iterations(table, model=model, cost=cost, params=params, max_num_seqs=max_num_seqs,
                                      handoff=handoff)
    if params.prefill_max_num_batched_tokens is not None:  # and the batching prefill servers' steps
        iterations += float(table["prompt_tokens"].sum()) / params.prefill_max_num_batched_tokens + len(table)
    check_memory("num_prompts" if trace is None else "trace",
                 len(table) * BYTES_PER_REQUEST + iterations * BYTES_PER_ITERATION,
                 f"a load test of {len(table):,} requests and about {iterations:,.0f} decode-loop iterations"
                 + (" and prefill steps" if params.prefill_max_num_batched_tokens is not None else ""))
    sim = DisaggregatedSimulation(model, cost, link, params, handoff, max_num_seqs, table, memory=memory,
                                  max_concurrency=max_concurrency, kv_pool_bytes=kv_pool_bytes)
    sim.run()
    return sim.result(**meta)


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


