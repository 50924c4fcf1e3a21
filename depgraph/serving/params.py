"""The load test's flat parameters, as users give them: where requests run (:class:`Deployment`),
vLLM's engine flags (:class:`EngineConfig`) and every assumption of the load model (:class:`LoadModel`),
each field checked where it enters. :func:`~depgraph.serving.config.resolve` makes one configuration of them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._validate import one_of, positive_int, positive_number
from ..errors import ConfigError
from ..specs.cost import DEFAULT_GPU
from ..specs.hardware import DEFAULT_LINK, GPU, LINK_HELP, load_gpu, load_link
from ..specs.memory import batch_defaults
from ..specs.parallel import check_pp, check_tp_pair
from ..specs.predictor import posting_s
from ..specs.routing import ROUTING_HELP, parse_routing
from .client import ROUTERS
from .memory import GPU_MEMORY_UTILIZATION

__all__ = ["Deployment", "parse_deployment", "EngineConfig", "default_max_num_batched_tokens", "default_max_num_seqs",
           "ROUTERS",
           "HANDOFFS", "SLOT_SCOPES", "LoadModel", "FieldFlag", "LOAD_MODEL_FLAGS"]

HANDOFFS = ("push", "pull", "pull-thread")
SLOT_SCOPES = ("running", "reserved")

def default_max_num_batched_tokens(gpu: GPU) -> int:
    """vLLM's default token budget of an OpenAI-compatible server for ``gpu``: the first of
    :func:`~depgraph.specs.memory.batch_defaults` (``EngineArgs.get_batch_defaults`` in
    ``vllm/engine/arg_utils.py``: 8,192 on a GPU whose driver reports at least 70 GiB and that is not
    an A100, else 2,048)."""
    return batch_defaults(gpu)[0]


def default_max_num_seqs(gpu: GPU | str) -> int:
    """vLLM's default ``--max-num-seqs`` of an OpenAI-compatible server for ``gpu``: the second of
    :func:`~depgraph.specs.memory.batch_defaults` (1,024 on an H100 or H200, else 256). What a measured
    server ran with when its flags did not say: a burst of 1,000 requests (``vllm bench serve``'s
    defaults) runs all at once on an H200, not 256 at a time."""
    return batch_defaults(load_gpu(gpu))[1]


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
    """The engine's settings (vLLM's flags): ``max_num_seqs`` (``None``: vLLM's default for the GPU,
    :func:`default_max_num_seqs`), ``max_num_batched_tokens`` (``None``: vLLM's default for the GPU),
    ``chunked_prefill`` (on, as vLLM's V1 engine), ``block_tokens``,
    ``gpu_memory_utilization``, ``memory`` (``False``: unlimited KV, for
    tests and bounds), ``kv_pool_bytes`` (the KV and state memory per GPU,
    instead of what HBM leaves beside the weights: a what-if), the
    ``router`` across servers and the client's ``max_concurrency``
    (``None``: open loop)."""

    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    chunked_prefill: bool = True
    block_tokens: int = 16
    gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION
    memory: bool = True
    router: str = "round-robin"
    max_concurrency: int | None = None
    kv_pool_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.max_num_seqs is not None:
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

    The defaults are vLLM's on a real GPU, with the cost model's validated terms: ``gpu = "h100-sxm"``
    (:data:`~depgraph.specs.cost.DEFAULT_GPU`, every command's), ``tp = 1``, ``prefill_mfu = None``
    and ``hbm_efficiency = None`` (the cost model's: the GPU's fit to measured operator profiles,
    ``depgraph validate``), ``collectives = True`` (the cost model's all-reduces, fitted to the
    measured NCCL table, on every prefill and step), ``decode_step_overhead_s = 0`` (no time per
    step beyond the per-layer and per-kernel fixed costs the profiles measured: vLLM V1 prepares the
    next step while the GPU runs this one; docs/validation.md gives what measured serving runs say
    of it) and ``fitted_defaults = True`` (``False``: the cost model's plain constants, as the push
    vs pull study's load model, which the study's scenario pins with its own values:
    ``h200``, TP 8, MFU 0.4, HBM efficiency 1.0, 4.4 ms a step, no all-reduces;
    ``depgraph.studies.runlength.PUSHPULL_LOAD_MODEL``).

    ``prefill_tp`` and ``decode_tp`` set the
    sides apart: prefill over the first, decode steps and slot memory over
    the second, a handoff over as many NICs as the smaller has),
    ``prefill_pp = decode_pp = 1`` (pipeline stages: an activation hop of the
    cost model's 0.05 ms per stage boundary on a prefill and on a decode
    step, slot memory per stage, the handoff spread over the stages' NICs;
    one batch in flight, vLLM's overlap of several is not modelled),
    ``collectives``: ``False`` leaves the all-reduces out, for an MFU and
    step overhead fitted with them inside (a calibration without them, the
    study's 4.4 ms),
    ``link = "ib-ndr"`` (400 Gbit/s = 50 GB/s)
    per GPU (the push vs pull study's servers' bandwidth too; its scenario names ``50GBps``, the
    same bandwidth without the per-message latency).
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
    ``posting_base_s`` and ``posting_per_block_s``: the
    decode loop's posting work per request is ``base + per_block x blocks``
    (``block_tokens = 16``); 11.06 ms + 29.1 µs per block gives the push vs pull study's
    14.7 ms at 2,000 tokens and, at 16k tokens, the 40.9 ms that turns the
    study's push 7.0 ms per token into pull's 10.4 ms at 8 req/s (with its 4.4 ms a step;
    no measurement of a pull handoff's posting work was found to fit them to).
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

    gpu: str = DEFAULT_GPU
    tp: int = 1
    prefill_tp: int | None = None  # None: tp
    decode_tp: int | None = None  # None: tp
    link: str = DEFAULT_LINK
    prefill_mfu: float | None = None
    hbm_efficiency: float | None = None
    prefill_servers: int = 0
    prefill_max_num_batched_tokens: int | None = None
    decode_servers: int = 1
    router: str = "round-robin"
    prefill_pp: int = 1
    decode_pp: int = 1
    collectives: bool = True
    decode_step_overhead_s: float = 0.0
    posting_base_s: float = 11.06e-3
    posting_per_block_s: float = 29.1e-6
    block_tokens: int = 16
    relay_s: float = 1e-3
    slot_scope: str = "running"
    expert_routing: str = "uniform"
    fitted_defaults: bool = True

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
        for name in ("collectives", "fitted_defaults"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name}: expected true or false, got {getattr(self, name)!r}")
        for name in ("prefill_mfu", "hbm_efficiency"):
            if getattr(self, name) is not None:
                positive_number(name, getattr(self, name), upper=1.0)
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


@dataclass(frozen=True, slots=True)
class FieldFlag:
    """How a command line sets one :class:`LoadModel` field (as the workload registry's parameters set a
    workload's): its flag, what it parses to (``int``, ``str``, or a switch), its help."""

    field: str
    """The :class:`LoadModel` field."""
    flag: str
    """The command-line flag."""
    kind: type | bool | None
    """``int`` or ``str``; ``None``: a switch that sets the field true; ``False``: one that sets it false."""
    help: str | None = None
    """What the flag does, in words (``None``: its name says it; the formatter adds its default)."""
    metavar: str | None = None
    """The flag's value in the help."""

    @property
    def dest(self) -> str:
        """The attribute argparse stores the flag's value in."""
        return self.flag[2:].replace("-", "_")


#: The load model's fields a command line sets, each with its flag: the load test and the capacity plan
#: add their flags from this table and read the fields back by it (one name, type and help a field).
LOAD_MODEL_FLAGS: dict[str, FieldFlag] = {f.field: f for f in (
    FieldFlag("tp", "--tp", int, metavar="P"),
    *(FieldFlag(f"{side}_tp", f"--{side}-tp", int, f"tensor-parallel size of the {side} side (default --tp)",
                metavar=side[0].upper()) for side in ("prefill", "decode")),
    *(FieldFlag(f"{side}_pp", f"--{side}-pp", int, f"pipeline stages of the {side} side (default 1)", metavar="S")
      for side in ("prefill", "decode")),
    FieldFlag("collectives", "--no-collectives", False,
              "leave the cost model's per-layer all-reduces out of every prefill and decode step (for an MFU and "
              "step overhead fitted with them inside; by default they are in, fitted to measured NCCL times)"),
    FieldFlag("link", "--link", str, f"{LINK_HELP} (default ib-ndr: 400 Gbit/s)"),
    FieldFlag("gpu", "--gpu", str, f"GPU of the prefill and decode servers (default {DEFAULT_GPU})"),
    FieldFlag("expert_routing", "--expert-routing", str, f"{ROUTING_HELP} (default uniform)", metavar="MODEL"),
    FieldFlag("prefill_servers", "--prefill-servers", int, "prefill servers (0: the prefill pool never queues)"),
    FieldFlag("slot_scope", "--slot-scope", str, "running or reserved"),
)}
