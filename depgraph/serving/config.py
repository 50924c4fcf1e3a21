"""A load test's configuration: one nested, resolved :class:`ServingConfig`, every cross-check in one place.

The front doors stay flat: :func:`~depgraph.serving.simulator.loadtest`'s
keywords and :class:`LoadModel` (every assumption of the load model, with its
default and why). :func:`resolve` turns them, with a calibration applied
(:func:`~depgraph.specs.cost.calibrated_fields`), into a
:class:`ServingConfig` of sections (the cost model's settings, the prefill
pool, the decode pool, the handoff, the client, and a colocated server's
engine flags), refusing every combination that does not hold together with
one line naming the field; :meth:`ServingConfig.check_traffic` then checks
what depends on the requests (the longest one must fit). Each section's
fields carry a docstring, as vLLM's config classes do.

>>> import depgraph as dg
>>> cfg = resolve(dg.load_model("qwen3-32b"), deployment="2P1D", handoff="pull")
>>> cfg.kind, cfg.prefill.servers, cfg.decode.servers, cfg.decode.memory, cfg.handoff.mode
('disaggregated', 2, 1, True, 'pull')
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .._validate import one_of, positive_int, positive_number
from ..errors import ConfigError
from ..specs.cost import CostModel, calibrated_fields
from ..specs.hardware import DEFAULT_LINK, GPU, load_gpu, load_link
from ..specs.models import ModelSpec
from ..specs.parallel import check_pp, check_tp_pair
from ..specs.predictor import posting_s
from ..specs.routing import parse_routing
from .client import ROUTERS
from .memory import GPU_MEMORY_UTILIZATION, check_sides

__all__ = ["Deployment", "parse_deployment", "EngineConfig", "default_max_num_batched_tokens", "ROUTERS",
           "HANDOFFS", "SLOT_SCOPES", "LoadModel", "ServingConfig", "CostSection", "PrefillSection",
           "DecodeSection", "HandoffSection", "ClientSection", "resolve"]

HANDOFFS = ("push", "pull", "pull-thread")
SLOT_SCOPES = ("running", "reserved")

GIB = 1024 ** 3


def default_max_num_batched_tokens(gpu: GPU) -> int:
    """vLLM's default token budget of an OpenAI-compatible server: 8,192 on a GPU
    of at least 70 GiB that is not an A100, else 2,048 (``EngineArgs.get_batch_defaults``
    in ``vllm/engine/arg_utils.py``)."""
    return 8192 if gpu.hbm_bytes >= 70 * GIB and not gpu.name.startswith("a100") else 2048


@dataclass(frozen=True, slots=True)
class Deployment:
    """Where requests run: ``colocated`` servers (prefill and decode on the
    same GPUs), or ``prefill`` and ``decode`` servers apart (``<P>P<D>D``)."""

    kind: str
    servers: int = 1
    prefill: int = 0
    decode: int = 0

    @property
    def name(self) -> str:
        if self.kind == "colocated":
            return "colocated" if self.servers == 1 else f"colocated:{self.servers}"
        return f"{self.prefill}P{self.decode}D"


def parse_deployment(text: Any, *, field_name: str = "deployment") -> Deployment:
    """``"colocated"``, ``"colocated:N"`` (N servers) or ``"<P>P<D>D"``.

    >>> parse_deployment("2P1D"), parse_deployment("colocated:4").name
    (Deployment(kind='disaggregated', servers=1, prefill=2, decode=1), 'colocated:4')
    """
    words = "expected colocated, colocated:N (N servers, 1 to 4,096) or <P>P<D>D such as 2P1D"
    if not isinstance(text, str):
        raise ConfigError(f"{field_name}: {words}; got {text!r}")
    t = text.strip().lower()
    if t == "colocated":
        return Deployment("colocated")
    if t.startswith("colocated:") and t[10:].isdigit() and 1 <= int(t[10:]) <= 4096:
        return Deployment("colocated", servers=int(t[10:]))
    if t.endswith("d") and "p" in t:
        p, _, d = t[:-1].partition("p")
        if p.isdigit() and d.isdigit() and 1 <= int(p) <= 4096 and 1 <= int(d) <= 4096:
            return Deployment("disaggregated", prefill=int(p), decode=int(d))
    raise ConfigError(f"{field_name}: {words}; got {text!r}")


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """The engine's settings (vLLM's flags): ``max_num_seqs``,
    ``max_num_batched_tokens`` (``None``: vLLM's default for the GPU),
    ``chunked_prefill`` (on, as vLLM's V1 engine), ``block_tokens``,
    ``gpu_memory_utilization``, ``memory`` (``False``: unlimited KV, for
    tests and bounds), ``kv_pool_bytes`` (the KV and state memory per GPU,
    instead of what HBM leaves beside the weights: a what-if), the
    ``router`` across servers and the client's ``max_concurrency``
    (``None``: open loop)."""

    max_num_seqs: int = 256
    max_num_batched_tokens: int | None = None
    chunked_prefill: bool = True
    block_tokens: int = 16
    gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION
    memory: bool = True
    router: str = "round-robin"
    max_concurrency: int | None = None
    kv_pool_bytes: int | None = None

    def __post_init__(self) -> None:
        positive_int("max_num_seqs", self.max_num_seqs, upper=1_000_000)
        if self.max_num_batched_tokens is not None:
            positive_int("max_num_batched_tokens", self.max_num_batched_tokens, upper=10_000_000)
        for name in ("chunked_prefill", "memory"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name}: expected true or false, got {getattr(self, name)!r}")
        positive_int("block_tokens", self.block_tokens, upper=1_000_000)
        positive_number("gpu_memory_utilization", self.gpu_memory_utilization, upper=1.0)
        one_of("router", self.router, ROUTERS)
        if self.max_concurrency is not None:
            positive_int("max_concurrency", self.max_concurrency, upper=10_000_000)
        if self.kv_pool_bytes is not None:
            positive_int("kv_pool_bytes", self.kv_pool_bytes, upper=10**15)


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


# ------------------------------------------------------------------ the resolved configuration


@dataclass(frozen=True, slots=True)
class CostSection:
    """What the step predictor charges with (:class:`~depgraph.specs.predictor.ServingPredictor`)."""

    gpu: str
    """The GPU: a catalog name (``depgraph gpus``) or a ``--hardware`` entry."""
    link: str
    """The link of one GPU (``depgraph links``, ``<n>gbps``, ``<n>GBps``)."""
    prefill_mfu: float
    """Prefill model FLOPs utilisation, a fraction."""
    hbm_efficiency: float
    """The share of HBM bandwidth a decode step reads at."""
    step_overhead_s: float
    """Fixed seconds per decode or engine step (launches, scheduling, and the all-reduces unless
    ``collectives``)."""
    collectives: bool
    """Whether the cost model's per-layer all-reduces are added to every prefill and step."""
    expert_routing: str
    """How a MoE model's tokens spread over its experts (:mod:`depgraph.specs.routing`)."""
    calibration: str | None
    """The calibration file whose fitted values these are (``None``: none)."""


@dataclass(frozen=True, slots=True)
class PrefillSection:
    """The prefill side of a disaggregated deployment (a colocated server prefills on its own GPUs)."""

    servers: int
    """Prefill servers; 0: a pool that never queues (the study's)."""
    tp: int
    """Tensor-parallel size of each prefill server."""
    pp: int
    """Pipeline stages of each prefill server."""
    max_num_batched_tokens: int | None
    """A batching prefill server's token budget per step (vLLM's engine that only prefills); ``None``: whole
    prompts, first come first served."""


@dataclass(frozen=True, slots=True)
class DecodeSection:
    """The decode side (colocated: the servers themselves)."""

    servers: int
    """Decode servers (colocated: servers)."""
    tp: int
    """Tensor-parallel size of each server."""
    pp: int
    """Pipeline stages of each server."""
    max_num_seqs: int
    """Running requests per server at most (decode slots)."""
    memory: bool
    """Whether KV blocks and recurrent state are held in what HBM leaves beside the weights (admission on
    blocks, recompute preemption)."""
    kv_pool_bytes: int | None
    """The KV and state memory per GPU instead of what HBM leaves (a what-if); ``None``: from HBM."""
    block_tokens: int
    """Tokens per KV block."""
    slot_scope: str
    """When a disaggregated request holds its slot: ``running`` (from the step it joins) or ``reserved``
    (from the moment decode sets its blocks aside)."""
    router: str
    """How the proxy picks a server (:data:`~depgraph.serving.client.ROUTERS`)."""


@dataclass(frozen=True, slots=True)
class HandoffSection:
    """How a request's state moves from prefill to decode (``mode`` ``None``: colocated, no handoff)."""

    mode: str | None
    """``push``, ``pull`` or ``pull-thread`` (:data:`HANDOFFS`)."""
    relay_s: float
    """Seconds for the router to relay where the blocks are (pull)."""
    posting_base_s: float
    """The decode loop's posting work per request, seconds (pull)."""
    posting_per_block_s: float
    """And per block of the prompt, seconds."""

    def posting_s(self, prompt_tokens: int, block_tokens: int) -> float:
        """The posting work for one request's blocks (:func:`~depgraph.specs.predictor.posting_s`)."""
        return posting_s(prompt_tokens, base_s=self.posting_base_s, per_block_s=self.posting_per_block_s,
                         block_tokens=block_tokens)


@dataclass(frozen=True, slots=True)
class ClientSection:
    """How the client sends requests and what it counts as good."""

    max_concurrency: int | None
    """Requests in flight at most (``vllm bench serve --max-concurrency``); ``None``: an open loop."""
    slo_ttft_s: float | None
    """The TTFT target, seconds (``None``: none)."""
    slo_tpot_s: float | None
    """The TPOT target, seconds (``None``: none)."""


@dataclass(frozen=True, slots=True)
class ServingConfig:
    """A load test's configuration, resolved and checked (:func:`resolve`)."""

    deployment: Deployment | None
    """Where requests run; ``None``: the study's load model (one decode server fed by a prefill pool)."""
    params: LoadModel
    """The flat load model the sections were read from (every field checked)."""
    cost: CostSection
    prefill: PrefillSection
    decode: DecodeSection
    handoff: HandoffSection
    client: ClientSection
    engine: EngineConfig | None
    """A colocated server's vLLM flags; ``None`` disaggregated."""

    @property
    def kind(self) -> str:
        """``"colocated"`` or ``"disaggregated"``."""
        return "colocated" if self.deployment is not None and self.deployment.kind == "colocated" else "disaggregated"

    def cost_model(self) -> CostModel:
        """The cost model the step predictor charges with: the GPU, efficiencies, link and each side's
        parallelism."""
        c = self.cost
        return CostModel(gpu=c.gpu, mfu=c.prefill_mfu, hbm_efficiency=c.hbm_efficiency, link=c.link,
                         prefill_tp=self.prefill.tp, decode_tp=self.decode.tp, prefill_pp=self.prefill.pp,
                         decode_pp=self.decode.pp, expert_routing=c.expert_routing)

    def check_traffic(self, model: ModelSpec, cost: CostModel, longest: int) -> None:
        """Refuse traffic the deployment cannot hold: a disaggregated deployment's decode servers must hold
        their weights and one request of ``longest`` tokens (its last step's blocks) in their memory
        (:class:`~depgraph.errors.MemoryFitError`); a colocated server's are checked by its engine."""
        from ..errors import MemoryFitError
        from .memory import decode_pools, max_slots_in_memory, weights_per_gpu_bytes

        if self.deployment is None or self.kind == "colocated":
            return
        d = self.decode
        whole = -(-longest // d.block_tokens) * d.block_tokens
        kv_pool_bytes = d.kv_pool_bytes
        if kv_pool_bytes is not None and any(pool.request_bytes(whole) > kv_pool_bytes for pool in decode_pools(
                model, tp=d.tp, pp=d.pp, gpu=cost.gpu)):
            raise MemoryFitError(f"kv_pool_bytes: {kv_pool_bytes / 1e9:.3g} GB per GPU holds not one request of "
                                 f"{longest:,} tokens (its KV and state); expected more")
        if (max_slots_in_memory(model, context_tokens=longest, tp=d.tp, gpu=cost.gpu, pp=d.pp) == 0
                or d.memory and kv_pool_bytes is None and any(pool.request_bytes(whole) > pool.pool_bytes for pool in
                                                              decode_pools(model, tp=d.tp, pp=d.pp, gpu=cost.gpu))):
            raise MemoryFitError(f"decode_tp: {model.name}'s weights ({weights_per_gpu_bytes(model, tp=d.tp) / 1e9:.1f} "
                                 f"GB per GPU at TP {d.tp}) leave no room on {cost.gpu.name} for one request of "
                                 f"{longest:,} tokens; raise the TP")


def _sections(deploy: Deployment | None, params: LoadModel, *, handoff: str | None, max_num_seqs: int,
              memory: bool, kv_pool_bytes: int | None, max_concurrency: int | None, slo: dict,
              calibration: str | None, engine: EngineConfig | None) -> ServingConfig:
    p = params
    return ServingConfig(
        deployment=deploy, params=p,
        cost=CostSection(gpu=p.gpu, link=p.link, prefill_mfu=p.prefill_mfu, hbm_efficiency=p.hbm_efficiency,
                         step_overhead_s=p.decode_step_overhead_s, collectives=p.collectives,
                         expert_routing=p.expert_routing, calibration=calibration),
        prefill=PrefillSection(servers=p.prefill_servers, tp=p.ptp, pp=p.prefill_pp,
                               max_num_batched_tokens=p.prefill_max_num_batched_tokens),
        decode=DecodeSection(servers=p.decode_servers if engine is None else deploy.servers, tp=p.dtp, pp=p.decode_pp,
                             max_num_seqs=max_num_seqs, memory=memory, kv_pool_bytes=kv_pool_bytes,
                             block_tokens=p.block_tokens if engine is None else engine.block_tokens,
                             slot_scope=p.slot_scope, router=p.router if engine is None else engine.router),
        handoff=HandoffSection(mode=handoff, relay_s=p.relay_s, posting_base_s=p.posting_base_s,
                               posting_per_block_s=p.posting_per_block_s),
        client=ClientSection(max_concurrency=max_concurrency, slo_ttft_s=slo["ttft_s"], slo_tpot_s=slo["tpot_s"]),
        engine=engine)


def resolve(model: ModelSpec, *, handoff: str | None = None, deployment: str | None = None, max_num_seqs: int = 8,
            max_num_batched_tokens: int | None = None, chunked_prefill: bool = True,
            max_concurrency: int | None = None, router: str = "round-robin", memory: bool | None = None,
            slo_ttft_s: float | None = None, slo_tpot_s: float | None = None, kv_pool_bytes: int | None = None,
            calibration: str | Path | None = None, params: LoadModel | None = None,
            **overrides) -> ServingConfig:
    """The load test's configuration from :func:`~depgraph.serving.simulator.loadtest`'s keywords (the
    same names and defaults; ``overrides`` replace fields of ``params``), with every cross-check in
    one place: a calibration's values in place of the defaults (never given twice, only for the model,
    GPU and all-reduce setting it was fitted on), the handoff a disaggregated deployment needs and a
    colocated one refuses, the flags that apply to one kind only, the server counts a deployment
    names, and each side's TP and stages against the model."""
    from .results import check_slos

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
        memory = engine.memory
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
    return _sections(deploy, params, handoff=None if colocated else handoff, max_num_seqs=max_num_seqs,
                     memory=memory, kv_pool_bytes=kv_pool_bytes, max_concurrency=max_concurrency, slo=slo,
                     calibration=None if calibration is None else str(calibration), engine=engine)


def check_colocated(cfg: ServingConfig) -> None:
    """Refuse the load model's disaggregated settings on a colocated deployment (checked once the
    traffic is known, after the other refusals, as before)."""
    params, deploy = cfg.params, cfg.deployment
    for name, default in (("prefill_servers", 0), ("slot_scope", "running"), ("decode_servers", 1)):
        if getattr(params, name) != default:
            raise ConfigError(f"{name}: applies to the disaggregated load model, not to a {deploy.name} deployment")
    if params.prefill_pp != 1 or params.decode_pp != 1 or params.ptp != params.dtp:
        raise ConfigError("tp: a colocated server runs prefill and decode on the same GPUs: give one tp "
                          "(prefill_tp = decode_tp) and no pipeline stages")
