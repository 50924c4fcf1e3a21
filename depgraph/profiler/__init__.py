"""``depgraph profile``: the operators the cost model charges, timed on this machine's GPU in minutes.

The profiler builds one layer of each kind a model has (attention with a dense
MLP, attention with experts, a Gated DeltaNet or Mamba-2 layer, ...) from the
model's ``config.json`` as depgraph parses it: random tensors of the shapes and
dtype one tensor-parallel rank holds, no weights downloaded. It times, with
PyTorch (CUDA events, warm-ups, the median of the repeats):

- ``projections``: a layer's step apart from the attention kernel (norms, the
  mixer's projections, rotary, the MLP or the experts, the residual adds; in a
  recurrent layer also its convolution and recurrence, a PyTorch reference);
- ``attention``: the attention kernel and its KV-cache write, a prompt's
  prefill and a decode batch over its contexts;
- ``all_reduce``: NCCL's all-reduce of a layer's activations, when several GPUs
  are visible.

The result is one CSV (:data:`~depgraph.specs.profile_fit.PROFILE_COLUMNS`, with
the GPU, driver, torch version, memory and clocks in ``# key = value`` lines at
its top) that ``depgraph calibrate --profile`` fits the cost model to and
``depgraph validate --profile`` checks it against. docs/profiling.md says what
PyTorch's kernels are and how they differ from vLLM's.

This module plans the work without PyTorch (:func:`plan_profile`,
:func:`layer_shapes`); :mod:`depgraph.profiler.measure` times it and needs
PyTorch (``pip install 'depgraph[profile]'``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

from ..errors import ConfigError
from ..specs.models import LayerSpec, ModelSpec

__all__ = ["LayerShapes", "Point", "ProfilePlan", "layer_shapes", "representative_layers", "plan_profile", "GRIDS",
           "TORCH_MISSING"]

#: What ``depgraph profile`` says, in one line, where PyTorch is not installed.
TORCH_MISSING = ("depgraph profile needs PyTorch: pip install 'depgraph[profile]' (or pip install torch; "
                 "a CUDA build for a GPU)")

#: The default grids: prompts timed for prefill, decode batches, decode contexts, warm-up calls and timed
#: repeats, all-reduce sizes (tokens of the model's hidden width), for a GPU, a ``--quick`` run and a CPU
#: smoke test (``--device cpu``: tiny shapes, the same code).
GRIDS = {
    "gpu": dict(tokens=(512, 1024, 2048, 4096), batches=(1, 4, 16, 64, 256), contexts=(512, 2048, 8192),
                warmup=5, repeats=25, allreduce_tokens=(1, 16, 128, 1024, 4096)),
    "quick": dict(tokens=(512, 4096), batches=(1, 16, 256), contexts=(1024, 8192), warmup=2, repeats=10,
                  allreduce_tokens=(1, 128, 4096)),
    "cpu": dict(tokens=(16, 64), batches=(1, 4), contexts=(16, 64), warmup=1, repeats=3,
                allreduce_tokens=(1, 16)),
}
#: Causal-decay recurrences are run in chunks of this many tokens in prefill (the chunked form Mamba-2's
#: and Gated DeltaNet's kernels use; the reference's own choice, not a measured one).
RECURRENT_CHUNK_TOKENS = 64


def _ceil_div(a: int, b: int) -> int:
    return -(-int(a) // int(b))


@dataclass(frozen=True, slots=True)
class LayerShapes:
    """One layer's operands on one of ``tp`` ranks, derived from the :class:`~depgraph.specs.models.LayerSpec`
    so that its GEMMs hold the parameters the cost model charges (the counts depgraph parses from the
    config): widths are per rank (heads and intermediate sizes split; KV heads fewer than the ranks
    replicated, as vLLM does)."""

    index: int
    kind: str
    hidden: int
    dtype_bytes: int
    tp: int = 1  # the tensor-parallel size whose one rank's share this is
    attn_in: int = 0  # the QKV projection's output width (with any extra: a gate, q/k norms)
    attn_out: int = 0  # the output projection's input width (query heads x head_dim)
    q_heads: int = 0
    kv_heads: int = 0
    head_dim: int = 0
    window: int = 0  # a sliding window's keys (0: the whole context)
    rec_in: int = 0  # a recurrent mixer's input projection width
    rec_heads: int = 0
    rec_dk: int = 0
    rec_dv: int = 0
    conv_channels: int = 0
    conv_kernel: int = 0
    state_dtype_bytes: int = 0
    delta_rule: bool = False  # Gated DeltaNet's update (else Mamba-2's scalar-decay one)
    ffn_inter: int = 0  # a dense (or shared-expert) gated MLP's intermediate width
    experts: int = 0
    router: int = 0  # the router GEMM's output width on this rank
    top_k: int = 0
    expert_inter: int = 0

    @property
    def attends(self) -> bool:
        return self.attn_out > 0

    @property
    def recurrent(self) -> bool:
        return self.rec_heads > 0

    def weight_bytes(self) -> int:
        """Bytes of the weights the profiler allocates for this layer."""
        h = self.hidden
        params = h * self.attn_in + self.attn_out * h + h * self.rec_in + self.rec_heads * self.rec_dv * h
        params += 3 * h * self.ffn_inter + h * self.router + self.experts * 3 * h * self.expert_inter
        params += self.conv_channels * self.conv_kernel
        return params * self.dtype_bytes


def _dv(elems_per_head: int) -> int:
    """A recurrent head's value width: the largest power of two at most the square root of its state
    (Gated DeltaNet 128 x 128, Mamba-2 a head_dim of 64 by a state of 128; the value and key widths only
    shape the reference's tensors, whose elements are the layer's state whatever the split)."""
    return 1 << max(0, int(math.isqrt(max(1, elems_per_head))).bit_length() - 1)


def layer_shapes(model: ModelSpec, layer: LayerSpec, tp: int = 1) -> LayerShapes:
    """The operands of ``layer`` on one of ``tp`` ranks (:class:`LayerShapes`)."""
    h, d = model.hidden_size, model.dtype_bytes
    out: dict = dict(index=layer.index, kind=layer.kind, hidden=h, dtype_bytes=d, tp=tp)
    attn_params = layer.attention_params or (layer.mixer_params if layer.attention_width else 0)
    if layer.attention_width:
        qh, kvh = layer.query_heads, layer.kv_heads
        hd = layer.attention_width // qh
        if qh % tp:
            raise ConfigError(f"--tp: {model.name} has {qh} query heads, not a whole number on each of {tp} ranks")
        std_in, std_out = (qh + 2 * kvh) * hd, qh * hd
        extra = max(0, attn_params - h * (std_in + std_out)) // h  # a gate, q/k norms: more output columns
        # the GEMM holds the rank's share of the parameters, as the cost model charges them (vLLM replicates
        # KV heads fewer than the ranks in its QKV weights too, a few % more at TP 8 that the model leaves out);
        # the attention kernel reads the replicated KV heads, as the cost model's KV reads do
        out.update(attn_in=_ceil_div(std_in + extra, tp), attn_out=std_out // tp, q_heads=qh // tp,
                   kv_heads=max(1, kvh // tp), head_dim=hd, window=layer.kv_window_tokens)
    if layer.recurrent_state_elems:
        heads = layer.state_heads
        per_head = layer.recurrent_state_elems // heads
        dv = 1 if layer.mixer == "mamba1" else _dv(per_head)  # Mamba-1: a state of d_state per channel
        value = heads * dv
        rec_params = layer.mixer_params - attn_params
        channels = layer.conv_channels
        kernel = layer.conv_bytes // max(1, channels * d) + 1 if channels else 0
        rec_in = max(1, (rec_params - value * h - channels * kernel) // h)
        out.update(rec_in=_ceil_div(rec_in, tp), rec_heads=max(1, heads // tp), rec_dk=per_head // dv, rec_dv=dv,
                   conv_channels=_ceil_div(channels, tp), conv_kernel=kernel,
                   state_dtype_bytes=max(1, layer.ssm_bytes // layer.recurrent_state_elems),
                   delta_rule=layer.mixer == "gdn")
    router = h * layer.num_experts
    dense = max(0, layer.ffn_dense_params - router)
    if dense:
        out["ffn_inter"] = _ceil_div(dense // (3 * h), tp)
    if layer.num_experts:  # the router's share too (vLLM keeps it whole: a GEMM of hidden x experts, small)
        out.update(experts=layer.num_experts, router=_ceil_div(layer.num_experts, tp),
                   top_k=layer.experts_per_token, expert_inter=_ceil_div(layer.expert_params // (3 * h), tp))
    return LayerShapes(**out)


def representative_layers(model: ModelSpec) -> list[LayerSpec]:
    """The first layer of each kind ``model`` has (its mixer, its FFN, windowed or not), in layer order:
    the layers the profiler times."""
    seen: dict[tuple, LayerSpec] = {}
    for layer in model.layers:
        seen.setdefault((layer.kind, layer.mixer, layer.ffn, bool(layer.kv_window_tokens)), layer)
    return sorted(seen.values(), key=lambda layer: layer.index)


@dataclass(frozen=True, slots=True)
class Point:
    """One timing: ``operator`` (projections, attention, all_reduce) at ``phase`` (prefill, decode) of the
    layer ``shapes`` (``None`` for an all-reduce), for ``tokens`` (a prompt, a decode batch, an
    all-reduce's rows) over ``context`` cached tokens each; an all-reduce of ``nbytes`` over ``ranks``."""

    operator: str
    phase: str
    shapes: LayerShapes | None
    tokens: int
    context: int = 0
    nbytes: int = 0
    ranks: int = 0

    def describe(self) -> str:
        if self.operator == "all_reduce":
            return f"all-reduce of {self.nbytes / 1e6:.3g} MB over {self.ranks} ranks"
        where = f"layer {self.shapes.index} ({self.shapes.kind}" + \
            (f", TP {self.shapes.tp} share)" if self.shapes.tp > 1 else ")")
        if self.phase == "prefill":
            return f"{where} {self.operator}, prefill of {self.tokens:,} tokens"
        ctx = f" over {self.context:,} tokens" if self.operator == "attention" else ""
        return f"{where} {self.operator}, decode of {self.tokens:,} requests{ctx}"


@dataclass(frozen=True)
class ProfilePlan:
    """What a profile will time: its ``points``, the ``warmup`` calls and timed ``repeats`` of each, and
    the layers' ``skipped`` work with the reason (a sliding-window layer's attention)."""

    model: ModelSpec
    tp: int
    points: tuple[Point, ...]
    warmup: int
    repeats: int
    skipped: tuple[str, ...]


def _grid(name: str, values: Iterable[int] | None, default: tuple[int, ...], upper: int) -> tuple[int, ...]:
    values = tuple(default if values is None else values)
    if not values:
        raise ConfigError(f"{name}: expected at least one value")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= upper:
            raise ConfigError(f"{name}: expected whole numbers from 1 to {upper:,}, got {v!r}")
    return tuple(sorted(set(values)))


#: Decode projections are timed at the TP and at these multiples of it (smaller shares of the same layer,
#: where the model divides): a dense layer's memory-bound decode step reads the same weights at every
#: batch, so only reads of other sizes tell its fixed cost from its read bandwidth (Vidur's profiles get
#: them from other TPs too).
DECODE_TP_SHARES = (1, 2, 4, 8)


def _check_tp(model: ModelSpec, layers: list[LayerSpec], tp: int) -> None:
    """Refuse a TP the cost model cannot read the rows at (a profile calibrate would refuse after)."""
    from ..specs.profile_fit import check_layer_tp

    for layer in layers:
        layer_shapes(model, layer, tp)
        check_layer_tp(model, layer, tp)


def _takes_tp(model: ModelSpec, layers: list[LayerSpec], tp: int) -> bool:
    try:
        _check_tp(model, layers, tp)
    except ConfigError:
        return False
    return True


def plan_profile(model: ModelSpec, *, tp: int = 1, grid: str = "gpu", tokens: Iterable[int] | None = None,
                 batches: Iterable[int] | None = None, contexts: Iterable[int] | None = None,
                 ranks: int = 0, warmup: int | None = None, repeats: int | None = None) -> ProfilePlan:
    """The points a profile of ``model`` at ``tp`` times (:data:`GRIDS` ``grid``, or the given ``tokens``,
    ``batches`` and ``contexts``): for each of its :func:`representative_layers`, the projections and the
    attention kernel at each prompt, the projections at each decode batch (also at the
    :data:`DECODE_TP_SHARES` multiples of ``tp`` the model takes) and the attention kernel at each batch
    and context; with ``ranks`` >= 2, all-reduces of the grid's rows of the hidden width (16-bit) over 2,
    4, ... GPUs and ``ranks``."""
    from .._validate import positive_int

    if grid not in GRIDS:
        raise ConfigError(f"grid: expected one of {', '.join(GRIDS)}, got {grid!r}")
    g = GRIDS[grid]
    tp = positive_int("--tp", tp, upper=1024)
    ranks = positive_int("--ranks", ranks, upper=1024, allow_zero=True)
    if ranks == 1:
        raise ConfigError("--ranks: an all-reduce needs at least 2 GPUs (0: none)")
    tokens = _grid("--tokens", tokens, g["tokens"], 1_048_576)
    batches = _grid("--batch", batches, g["batches"], 65_536)
    contexts = _grid("--context", contexts, g["contexts"], 1_048_576)
    longest = max(max(tokens), max(contexts) + 1)
    model.check_context(longest, field="--tokens/--context", what="a profiled sequence")
    warmup = g["warmup"] if warmup is None else positive_int("--warmup", warmup, upper=10_000, allow_zero=True)
    repeats = g["repeats"] if repeats is None else positive_int("--repeats", repeats, upper=100_000)
    reps = representative_layers(model)
    _check_tp(model, reps, tp)  # the cost model must take the TP the rows are read at
    shares = [t for t in (tp * k for k in DECODE_TP_SHARES) if t == tp or _takes_tp(model, reps, t)]
    points: list[Point] = []
    skipped: list[str] = []
    for layer in reps:
        s = layer_shapes(model, layer, tp)
        # a sliding window's kernel where the window does not bind: the same as a full one's (PyTorch's SDPA
        # has no sliding-window kernel); where it binds, not timed, and said so
        fits = (lambda keys: s.attends and (not s.window or keys <= s.window))
        if s.attends and s.window and (max(tokens) > s.window or max(contexts) + 1 > s.window):
            skipped.append(f"layer {s.index} ({s.kind}): its sliding-window attention kernel past its window of "
                           f"{s.window:,} tokens (SDPA has no sliding-window kernel; only points within it are timed)")
        for n in tokens:
            points.append(Point("projections", "prefill", s, n))
            if fits(n):
                points.append(Point("attention", "prefill", s, n))
        for b in batches:
            points.append(Point("projections", "decode", s, b))
            points += [Point("attention", "decode", s, b, c) for c in contexts if fits(c + 1)]
        for t in shares[1:] if not s.recurrent else ():  # smaller shares: reads of other sizes (a recurrent
            points += [Point("projections", "decode", layer_shapes(model, layer, t), b)  # layer's rows are
                       for b in batches]  # compared, never fitted: none)
    if ranks >= 2:  # over 2, 4, ... ranks and ``ranks``: a launch's latency and each ring step's apart
        hidden_bytes = model.hidden_size * 2
        counts = sorted({r for r in (2, 4, 8, 16, 32, 64, 128, 256, 512) if r < ranks} | {ranks})
        points += [Point("all_reduce", "", None, n, nbytes=n * hidden_bytes, ranks=r)
                   for r in counts for n in g["allreduce_tokens"]]
    return ProfilePlan(model, tp, tuple(points), warmup, repeats, tuple(skipped))
