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

from .._validate import boolean, one_of, positive_int
from ..errors import ConfigError
from ..specs.cost import CostModel, calibrated_fields
from ..specs.models import ModelSpec
from ..specs.parallel import check_pp
from ..specs.predictor import ServingPredictor
from .client import ROUTERS
from .memory import check_sides
from .params import HANDOFFS, Deployment, EngineConfig, LoadModel, default_max_num_seqs, parse_deployment

__all__ = ["ServingConfig", "CacheSection", "CostSection", "PrefillSection", "DecodeSection", "HandoffSection", "ClientSection",
           "resolve"]



# ------------------------------------------------------------------ the resolved configuration


@dataclass(frozen=True, slots=True)
class CostSection:
    """What the step predictor charges with (:class:`~depgraph.specs.predictor.ServingPredictor`)."""

    gpu: str
    """The GPU: a catalog name (``depgraph gpus``) or a ``--hardware`` entry."""
    link: str
    """The link of one GPU (``depgraph links``, ``<n>gbps``, ``<n>GBps``)."""
    prefill_mfu: float | None
    """Prefill model FLOPs utilisation, a fraction (``None``: the cost model's, the GPU's fit)."""
    hbm_efficiency: float | None
    """The share of HBM bandwidth a decode step reads at (``None``: the cost model's, the GPU's fit)."""
    step_overhead_s: float
    """Fixed seconds per decode or engine step (launches, scheduling, and the all-reduces unless
    ``collectives``)."""
    collectives: bool
    """Whether the cost model's per-layer all-reduces are added to every prefill and step."""
    expert_routing: str
    """How a MoE model's tokens spread over its experts (:mod:`depgraph.specs.routing`)."""
    calibration: str | None
    """The calibration file whose fitted values these are (``None``: none)."""
    fitted_defaults: bool = True
    """Whether the cost model's terms left unset take the GPU's fitted values (``False``: its plain
    constants, as the push vs pull study's load model)."""


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
    """Whether KV blocks and recurrent state are held in the KV cache vLLM sizes at start-up (what the GPU's
    memory leaves beside the weights, activations and non-torch memory; admission on blocks, recompute
    preemption)."""
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
    policy: str = "whole"
    """``whole`` (one bulk transfer per request after prefill; NICs do not contend) or a readiness policy
    (:data:`~depgraph.serving.handoff.HANDOFF_POLICIES`): message by message on NICs that contend."""
    hook_scope: str = "request"
    """Under a per-layer policy, who waits for state not yet in: ``request`` (the request joins a step
    only when no operator of it would wait) or ``batch`` (vLLM's ``wait_for_layer_load``: it joins once
    its first operator can run, and the whole step waits for its later layers)."""
    admission: str = "step"
    """``step`` (join the batch at a step boundary) or ``async`` (its first token on its own, as soon as
    the policy allows, with no interference; then it joins the batch)."""
    nic: str = "per-gpu"
    """``per-gpu`` (a NIC per GPU at each end) or ``per-node`` (one per server)."""
    token_edge: bool = False
    """Under a per-layer policy, whether the first decode step consumes the token the prefill emits (its
    first layer waits for the prefill's end, as :attr:`~depgraph.specs.cost.CostModel.token_edge` in the
    graph); ``False``: the first study's Figure 4 reading, decode layers may run as their state arrives."""


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
class CacheSection:
    """Automatic prefix caching (:mod:`depgraph.serving.prefixcache`) and what the traffic shares."""

    enable_prefix_caching: bool = True
    """Whether every server that holds KV keeps a prefix cache (vLLM's ``--enable-prefix-caching``, on by
    default in the V1 engine): colocated and prefill servers skip the prompt blocks they hold, and a decode
    server's held blocks are not moved by the handoff."""
    prefix_share_tokens: int = 0
    """Tokens of a system prompt every request starts with (a trace without ``hash_ids``, or generated
    traffic); 0: every prompt is its own."""
    hash_block_tokens: int = 512
    """Tokens per block of a trace's ``hash_ids`` (Mooncake's 512)."""


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
    cache: CacheSection = CacheSection()
    """Prefix caching, on every server that holds KV."""

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
                         decode_pp=self.decode.pp, expert_routing=c.expert_routing,
                         fitted_defaults=c.fitted_defaults)

    def predictor(self, model: ModelSpec, cost: CostModel) -> ServingPredictor:
        """The step predictor of this configuration: ``cost``'s durations with the step overhead, the
        all-reduce setting and the handoff's posting work."""
        return ServingPredictor(model, cost, step_overhead_s=self.cost.step_overhead_s,
                                collectives=self.cost.collectives, posting_base_s=self.handoff.posting_base_s,
                                posting_per_block_s=self.handoff.posting_per_block_s,
                                block_tokens=self.decode.block_tokens)

    def check_traffic(self, model: ModelSpec, cost: CostModel, longest: int, *,
                      longest_prompt: int | None = None) -> None:
        """Refuse traffic the servers cannot hold (:class:`~depgraph.errors.MemoryFitError`, from
        :func:`~depgraph.serving.memory.check_server_memory`, the one check of every load model): each
        decode server must hold its weights and one request of ``longest`` tokens (with memory, its last
        step's blocks; ``kv_pool_bytes``: in that pool), each prefill server its weights and one prompt of
        ``longest_prompt`` tokens. Memory off (the study's default load model, ``memory=False``) removes the
        limit on how many requests' KV is held at once, not these: a GPU that cannot hold the weights and
        one request runs nothing. A colocated server's are checked by its engine, with the same function
        (:func:`~depgraph.serving.engine.colocated_pool_bytes`)."""
        from .memory import check_server_memory

        if self.kind == "colocated":
            return
        d, p = self.decode, self.prefill
        if self.deployment is None:
            role = ("the push vs pull study's load model (one decode server fed by an unbounded prefill pool): ",
                    "the push vs pull study's load model (its prefill pool's servers): ")
            hints = ("raise --tp or --decode-tp, or give a GPU with more memory (--gpu)",
                     "raise --tp or --prefill-tp, or give a GPU with more memory (--gpu)")
        else:
            role = ("", "a prefill server: ")
            hints = ("raise the TP", "raise the prefill TP")
        check_server_memory(model, gpu=cost.gpu, tp=d.tp, pp=d.pp, longest=longest, field="decode_tp",
                            role=role[0], hint=hints[0], block_tokens=d.block_tokens if d.memory else 1,
                            kv_pool_bytes=d.kv_pool_bytes, max_num_seqs=d.max_num_seqs)
        if longest_prompt is not None:
            check_server_memory(model, gpu=cost.gpu, tp=p.tp, pp=p.pp, longest=longest_prompt, field="prefill_tp",
                                role=role[1], hint=hints[1], max_num_batched_tokens=p.max_num_batched_tokens)


def _sections(deploy: Deployment | None, params: LoadModel, *, handoff: str | None, max_num_seqs: int,
              memory: bool, kv_pool_bytes: int | None, max_concurrency: int | None, slo: dict,
              calibration: str | None, engine: EngineConfig | None, policy: dict | None = None,
              cache: CacheSection = CacheSection()) -> ServingConfig:
    p = params
    return ServingConfig(
        deployment=deploy, params=p,
        cost=CostSection(gpu=p.gpu, link=p.link, prefill_mfu=p.prefill_mfu, hbm_efficiency=p.hbm_efficiency,
                         step_overhead_s=p.decode_step_overhead_s, collectives=p.collectives,
                         expert_routing=p.expert_routing, calibration=calibration,
                         fitted_defaults=p.fitted_defaults),
        prefill=PrefillSection(servers=p.prefill_servers, tp=p.ptp, pp=p.prefill_pp,
                               max_num_batched_tokens=p.prefill_max_num_batched_tokens),
        decode=DecodeSection(servers=p.decode_servers if engine is None else deploy.servers, tp=p.dtp, pp=p.decode_pp,
                             max_num_seqs=max_num_seqs, memory=memory, kv_pool_bytes=kv_pool_bytes,
                             block_tokens=p.block_tokens if engine is None else engine.block_tokens,
                             slot_scope=p.slot_scope, router=p.router if engine is None else engine.router),
        handoff=HandoffSection(mode=handoff, relay_s=p.relay_s, posting_base_s=p.posting_base_s,
                               posting_per_block_s=p.posting_per_block_s, **(policy or {})),
        client=ClientSection(max_concurrency=max_concurrency, slo_ttft_s=slo["ttft_s"], slo_tpot_s=slo["tpot_s"]),
        engine=engine, cache=cache)


def resolve(model: ModelSpec, *, handoff: str | None = None, deployment: str | None = None,
            max_num_seqs: int | None = None,
            max_num_batched_tokens: int | None = None, chunked_prefill: bool = True,
            max_concurrency: int | None = None, router: str = "round-robin", memory: bool | None = None,
            slo_ttft_s: float | None = None, slo_tpot_s: float | None = None, kv_pool_bytes: int | None = None,
            calibration: str | Path | None = None, params: LoadModel | None = None,
            calibration_corner: str | None = None, policy: str | None = None, hook_scope: str | None = None,
            admission: str | None = None, nic: str | None = None, token_edge: bool | None = None,
            enable_prefix_caching: bool = True, prefix_share_tokens: int = 0, hash_block_tokens: int = 512,
            **overrides) -> ServingConfig:
    """The load test's configuration from :func:`~depgraph.serving.simulator.loadtest`'s keywords (the
    same names and defaults; ``overrides`` replace fields of ``params``), with every cross-check in
    one place: a calibration's values in place of the defaults (never given twice, only for the model,
    GPU and all-reduce setting it was fitted on), the handoff a disaggregated deployment needs and a
    colocated one refuses, the flags that apply to one kind only, the server counts a deployment
    names, a colocated server's one TP and no stages, and each side's TP and stages against the model.
    What depends on the requests (the longest must fit in memory) is
    :meth:`ServingConfig.check_traffic`'s."""
    from .results import check_slos

    if calibration_corner is not None and calibration is None:
        raise ConfigError("calibration_corner: runs a calibration's values at an end of their intervals; give "
                          "the calibration")
    if calibration is not None:
        from ..specs.calibration import CORNERS, check_fits, made_with, read_calibration

        cal = read_calibration(calibration)
        for name in cal["values"]:
            if name in overrides:
                raise ConfigError(f"{name}: given and also in the calibration {calibration}; give one")
        base = params or LoadModel()
        setup = cal.get("setup") or {}
        if params is None:  # what the fit was made on, where the call does not say: its GPU and TP, its all-reduce
            for key in ("gpu", "tp", "prefill_tp", "decode_tp"):  # setting and cost terms
                if key not in overrides and setup.get(key):
                    overrides = {**overrides, key: setup[key]}
            overrides = {**made_with(setup), **overrides}
        check_fits(cal, model=model, gpu=overrides.get("gpu", base.gpu),
                   collectives=overrides.get("collectives", base.collectives))
        if calibration_corner is not None:
            one_of("calibration_corner", calibration_corner, CORNERS)
            if not cal["intervals"]:
                raise ConfigError(f"calibration_corner: the calibration {calibration} has no intervals (fitted with "
                                  "--bootstrap 0, or from reported statistics alone)")
        overrides = {**overrides, **calibrated_fields(cal, target="load", corner=calibration_corner)}
    if max_num_seqs is None:  # vLLM's default for the servers' GPU
        max_num_seqs = default_max_num_seqs(overrides.get("gpu", (params or LoadModel()).gpu))
    deploy = None if deployment is None else parse_deployment(deployment)
    colocated = deploy is not None and deploy.kind == "colocated"
    if not colocated:
        handoff = one_of("handoff", handoff, HANDOFFS)
    elif handoff is not None:
        raise ConfigError(f"handoff: a {deploy.name} deployment has no handoff; leave it out")
    slo = check_slos(slo_ttft_s, slo_tpot_s)
    engine = None
    if memory is not None:
        boolean("memory", memory)
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
    if colocated:
        _check_colocated(deploy, params)
    handoff_policy = _handoff_policy(params, policy=policy, hook_scope=hook_scope, admission=admission, nic=nic,
                                     token_edge=token_edge, colocated=colocated)
    boolean("enable_prefix_caching", enable_prefix_caching)
    prefix_share_tokens = positive_int("prefix_share_tokens", prefix_share_tokens, upper=10_000_000, allow_zero=True)
    if router == "prefix-aware" and not enable_prefix_caching:
        raise ConfigError("router: prefix-aware routes to the server whose prefix cache holds the most of a "
                          "prompt; it needs prefix caching on (leave --no-enable-prefix-caching out)")
    cache = CacheSection(enable_prefix_caching=enable_prefix_caching, prefix_share_tokens=prefix_share_tokens,
                         hash_block_tokens=positive_int("hash_block_tokens", hash_block_tokens, upper=1_000_000))
    return _sections(deploy, params, handoff=None if colocated else handoff, max_num_seqs=max_num_seqs,
                     memory=memory, kv_pool_bytes=kv_pool_bytes, max_concurrency=max_concurrency, slo=slo,
                     calibration=None if calibration is None else str(calibration), engine=engine,
                     policy=handoff_policy, cache=cache)


def _handoff_policy(params: LoadModel, *, policy, hook_scope, admission, nic, token_edge, colocated: bool) -> dict:
    """The handoff's readiness policy and decode-side rules, checked against the deployment."""
    from ..specs.parallel import NIC_MODES
    from .handoff import ADMISSIONS, HANDOFF_POLICIES, HOOK_SCOPES, WHOLE

    if colocated:
        for name, value in (("policy", policy), ("hook_scope", hook_scope), ("admission", admission), ("nic", nic),
                            ("token_edge", token_edge or None)):
            if value is not None:
                raise ConfigError(f"{name}: a colocated deployment has no handoff; leave it out")
        return {}
    policy = WHOLE if policy is None else one_of("policy", policy, HANDOFF_POLICIES)
    if policy == WHOLE:
        for name, value in (("hook_scope", hook_scope), ("admission", admission), ("nic", nic),
                            ("token_edge", token_edge or None)):  # an explicit False is the default
            if value is not None:
                raise ConfigError(f"{name}: sets how a per-layer handoff is waited on; give a policy "
                                  f"({', '.join(HANDOFF_POLICIES[1:])})")
        return {"policy": policy}
    if params.prefill_pp != 1 or params.decode_pp != 1:
        raise ConfigError(f"policy: a {policy} handoff is modelled without pipeline stages (give prefill_pp 1 and "
                          "decode_pp 1, or policy whole)")
    if params.prefill_max_num_batched_tokens is not None and policy != "compute-then-move":
        raise ConfigError(f"policy: batching prefill servers (max_num_batched_tokens) hand off after a prompt's "
                          f"last chunk; a {policy} handoff streams layers as a whole-prompt prefill computes them: "
                          "give compute-then-move, or leave max_num_batched_tokens out")
    return {"policy": policy,
            "hook_scope": "request" if hook_scope is None else one_of("hook_scope", hook_scope, HOOK_SCOPES),
            "admission": "step" if admission is None else one_of("admission", admission, ADMISSIONS),
            "nic": "per-gpu" if nic is None else one_of("nic", nic, NIC_MODES),
            "token_edge": False if token_edge is None else boolean("token_edge", token_edge)}


def _check_colocated(deploy: Deployment, params: LoadModel) -> None:
    """Refuse the load model's disaggregated settings on a colocated deployment."""
    for name, default in (("prefill_servers", 0), ("slot_scope", "running"), ("decode_servers", 1)):
        if getattr(params, name) != default:
            raise ConfigError(f"{name}: applies to the disaggregated load model, not to a {deploy.name} deployment")
    if params.prefill_pp != 1 or params.decode_pp != 1 or params.ptp != params.dtp:
        raise ConfigError("tp: a colocated server runs prefill and decode on the same GPUs: give one tp "
                          "(prefill_tp = decode_tp) and no pipeline stages")
