"""Decode memory: what one slot holds per GPU, and how many slots fit in the KV cache.

One place for the rule the capacity plan and the load model both apply: a
decode GPU at tensor-parallel size ``tp`` holds, per running request, its
shard of the KV and recurrent state (:func:`depgraph.specs.models.handoff_bytes_per_rank`:
KV heads replicated once the GPUs outnumber them, as vLLM does), in the KV
cache vLLM sizes at start-up: ``gpu_memory_utilization`` (vLLM's default 0.9)
of the memory the driver reports, less the weights (``1 / tp`` of every
parameter), the profiled activation peak and the memory outside torch
(:func:`depgraph.specs.memory.stage_kv_cache_bytes`).

>>> import depgraph as dg
>>> from depgraph.serving.memory import max_slots_in_memory
>>> max_slots_in_memory(dg.load_model("qwen3-32b"), context_tokens=16_128, tp=8, gpu="h200")
231

With pipeline depth ``pp`` each GPU holds only its stage's layers (as
:func:`~depgraph.specs.parallel.stage_placement` cuts them; the first stage
the embeddings, the last the LM head), so a slot's share and the weights are
per stage and the stage that fits the fewest slots bounds the server (here the same eight
GPUs as TP 8, cut the other way, hold as many):

>>> max_slots_in_memory(dg.load_model("qwen3-32b"), context_tokens=16_128, tp=4, pp=2, gpu="h200")
231
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .._validate import positive_int, positive_number
from ..errors import ConfigError, MemoryFitError
from ..specs.hardware import GPU, load_gpu
from ..specs.memory import GPU_MEMORY_UTILIZATION, stage_kv_cache_bytes, stage_layers, stage_weights_bytes
from ..specs.memory import weights_per_gpu_bytes
from ..specs.models import ModelSpec, handoff_bytes_per_rank
from ..specs.modelspec import held_kv_bytes, rank_bytes

__all__ = ["slot_bytes", "weights_per_gpu_bytes", "max_slots_in_memory", "check_sides", "GPU_MEMORY_UTILIZATION",
           "StagePool", "decode_pools", "check_server_memory"]


def check_sides(model: ModelSpec, prefill_tp: int, decode_tp: int) -> None:
    """Refuse a tensor-parallel size either side could not shard the model at
    (heads or channels not divisible), naming the side."""
    for side, tp in (("prefill_tp", prefill_tp), ("decode_tp", decode_tp)):
        try:
            handoff_bytes_per_rank(model, prompt_tokens=1, tp=tp)
        except ConfigError as exc:
            raise ConfigError(f"{side}: {str(exc).removeprefix('tp: ')}") from None


def _stage_slot_bytes(model: ModelSpec, context_tokens: int, tp: int, pp: int) -> list[dict[str, float]]:
    """Per stage, ``{"kv", "ssm", "conv", "total"}`` one slot holds on one of its ``tp`` GPUs: the KV
    as the engine's KV pool holds it (:func:`~depgraph.specs.modelspec.rank_bytes`: a sliding-window layer
    at most ``W`` tokens, the new token's included), the recurrent state and convolution tail per rank."""
    handoff_bytes_per_rank(model, prompt_tokens=1, tp=tp)  # refuses a tp the model cannot be sharded at
    stages = []
    for layers in (stage_layers(model, pp) if pp > 1 else [model.layers]):
        out = {"kv": float(rank_bytes(layers, tp).kv_bytes(context_tokens))}
        out.update({c: float(sum(layer.sharded_bytes(c, context_tokens, tp)[0] for layer in layers
                                 if c in layer.components)) for c in ("ssm", "conv")})
        out["total"] = sum(out.values())
        stages.append(out)
    return stages


def slot_bytes(model: ModelSpec, context_tokens: int, *, tp: int = 1, pp: int = 1) -> dict[str, float]:
    """``{"kv", "ssm", "conv", "total"}``: bytes one slot of ``context_tokens`` holds on each of ``tp`` GPUs
    (with ``pp`` stages, on a GPU of the stage holding the most)."""
    return max(_stage_slot_bytes(model, context_tokens, tp, pp), key=lambda parts: parts["total"])


def max_slots_in_memory(model: ModelSpec, *, context_tokens: int, tp: int, gpu: str | GPU,
                        gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION, pp: int = 1,
                        max_num_seqs: int | None = None, max_num_batched_tokens: int | None = None) -> int:
    """The most requests of ``context_tokens`` one decode server (``tp`` x ``pp`` GPUs) can hold at
    once: the fewest any stage's KV cache fits (:func:`~depgraph.specs.memory.stage_kv_cache_bytes`, its
    profiled batch ``max_num_batched_tokens`` and ``max_num_seqs``, vLLM's for the GPU by default), 0 when
    a stage's weights, activations and memory outside torch alone do not fit."""
    tp = positive_int("tp", tp, upper=1024)
    gpu = load_gpu(gpu)
    positive_number("gpu_memory_utilization", gpu_memory_utilization, upper=1.0)
    fits = []
    pools = stage_kv_cache_bytes(model, gpu=gpu, tp=tp, pp=pp, gpu_memory_utilization=gpu_memory_utilization,
                                 max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens)
    for free, parts in zip(pools, _stage_slot_bytes(model, context_tokens, tp, pp)):
        per = parts["total"]
        fits.append(0 if free <= 0 else math.floor(free / per) if per else 1_000_000)
    return min(fits)


@dataclass(frozen=True, slots=True)
class StagePool:
    """What one GPU of a pipeline stage holds for the running requests: ``pool_bytes`` (its KV cache, as
    vLLM sizes it at start-up), and per request the KV of its tokens (``full_kv_bytes_per_token`` over the
    whole-context layers, plus each sliding-window layer's bytes per token up to its window: ``windows``,
    ``(W, bytes per token)``) and its recurrent state (``state_bytes``), all at this GPU's shard."""

    pool_bytes: int
    full_kv_bytes_per_token: int
    windows: tuple[tuple[int, int], ...]
    state_bytes: int

    def request_bytes(self, tokens: int) -> int:
        """Bytes one request holding KV blocks for ``tokens`` tokens takes here (its state included)."""
        return held_kv_bytes(self.full_kv_bytes_per_token, self.windows, tokens) + self.state_bytes


def decode_pools(model: ModelSpec, *, tp: int, pp: int = 1, gpu: str | GPU,
                 gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION, max_num_seqs: int | None = None,
                 max_num_batched_tokens: int | None = None) -> list[StagePool]:
    """One :class:`StagePool` per pipeline stage of a server of ``tp`` x ``pp`` GPUs: the same per-rank
    shards as :func:`slot_bytes` (a window layer holding at most ``W`` tokens, as
    :meth:`~depgraph.specs.cost.StepCost.kv_bytes`), the pool the KV cache vLLM sizes at start-up
    (:func:`~depgraph.specs.memory.stage_kv_cache_bytes`, profiled with ``max_num_batched_tokens`` and
    ``max_num_seqs``; vLLM's for the GPU by default).

    >>> import depgraph as dg
    >>> [p] = decode_pools(dg.load_model("qwen3-32b"), tp=8, gpu="h200")
    >>> p.full_kv_bytes_per_token, p.state_bytes, round(p.pool_bytes / 2**30, 2)
    (32768, 0, 113.87)
    """
    tp = positive_int("tp", tp, upper=1024)
    gpu = load_gpu(gpu)
    positive_number("gpu_memory_utilization", gpu_memory_utilization, upper=1.0)
    handoff_bytes_per_rank(model, prompt_tokens=1, tp=tp)  # refuses a tp the model cannot be sharded at
    out = []
    pools = stage_kv_cache_bytes(model, gpu=gpu, tp=tp, pp=pp, gpu_memory_utilization=gpu_memory_utilization,
                                 max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens)
    for free, layers in zip(pools, stage_layers(model, pp)):
        held = rank_bytes(layers, tp)
        out.append(StagePool(pool_bytes=int(free),
                             full_kv_bytes_per_token=held.full_kv_bytes_per_token, windows=held.windows,
                             state_bytes=held.state_bytes))
    return out


def check_server_memory(model: ModelSpec, *, gpu: str | GPU, tp: int, pp: int = 1, longest: int, field: str,
                        request_field: str | None = None, role: str = "", hint: str = "raise the TP",
                        block_tokens: int = 1, kv_pool_bytes: int | None = None,
                        gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION, max_num_seqs: int | None = None,
                        max_num_batched_tokens: int | None = None) -> list[StagePool]:
    """Refuse a server of ``tp`` x ``pp`` GPUs of ``gpu`` that cannot run one request of ``longest`` tokens
    (:class:`~depgraph.errors.MemoryFitError`, the one check every load model applies to each of its
    sides); return its :func:`decode_pools`.

    Refused when the weights, the profiled activations and the memory outside torch leave no KV cache in
    ``gpu_memory_utilization`` of the GPU (always: ``kv_pool_bytes`` and a load model without KV
    accounting still need the weights in memory; ``field`` names the error), or when the KV cache
    (``kv_pool_bytes`` per GPU where given) cannot hold one request's KV and recurrent state at
    ``longest`` tokens rounded up to whole blocks of ``block_tokens`` (``request_field``, default
    ``field``). ``role`` opens the sentence (which server), ``hint`` closes it (what to raise).

    >>> import depgraph as dg
    >>> check_server_memory(dg.load_model("qwen3-32b"), gpu="l40s", tp=1, longest=1088, field="decode_tp")
    Traceback (most recent call last):
    ...
    depgraph.errors.MemoryFitError: decode_tp: qwen3-32b's weights (65.5 GB per GPU at TP 1), activations and memory outside torch do not fit in 0.9 of l40s's 47.7 GB (23.5 GB short) and leave no room for one request of 1,088 tokens; raise the TP
    >>> [p] = check_server_memory(dg.load_model("qwen3-32b"), gpu="l40s", tp=2, longest=1088, field="decode_tp")
    >>> p.pool_bytes > p.request_bytes(1088)
    True
    """
    gpu = load_gpu(gpu)
    pools = decode_pools(model, tp=tp, pp=pp, gpu=gpu, gpu_memory_utilization=gpu_memory_utilization,
                         max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens)
    at = f"TP {tp}" + (f" x PP {pp}" if pp > 1 else "")
    weights = weights_per_gpu_bytes(model, tp=tp, pp=pp)
    head = f"{role}{model.name}'s weights ({weights / 1e9:.1f} GB per GPU at {at})"
    short = min(pool.pool_bytes for pool in pools)
    if short <= 0:
        raise MemoryFitError(f"{field}: {head}, activations and memory outside torch do not fit in "
                             f"{gpu_memory_utilization:g} of {gpu.name}'s {gpu.hbm_bytes / 1e9:,.3g} GB "
                             f"({-short / 1e9:,.3g} GB short) and leave no room for one request of {longest:,} "
                             f"tokens; {hint}")
    tokens = -(-longest // block_tokens) * block_tokens
    need = max(pool.request_bytes(tokens) for pool in pools)
    if kv_pool_bytes is not None:
        if need > kv_pool_bytes:
            raise MemoryFitError(f"kv_pool_bytes: {kv_pool_bytes / 1e9:.3g} GB per GPU holds not one request of "
                                 f"{longest:,} tokens ({need / 1e9:.3g} GB of KV and state); expected more")
        return pools
    for pool in pools:
        if pool.request_bytes(tokens) > pool.pool_bytes:
            raise MemoryFitError(f"{request_field or field}: {head} leave no room on {gpu.name} for one request "
                                 f"of {longest:,} tokens: it needs {pool.request_bytes(tokens) / 1e9:,.2f} GB of KV "
                                 f"and state per GPU, {pool.pool_bytes / 1e9:,.2f} GB is left; {hint}")
    return pools
