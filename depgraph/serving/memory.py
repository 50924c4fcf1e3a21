"""Decode memory: what one slot holds per GPU, and how many slots fit in HBM.

One place for the rule the capacity plan and the load model both apply: a
decode GPU at tensor-parallel size ``tp`` holds ``1 / tp`` of the weights
(every parameter, experts and embeddings included, in the model dtype) and,
per running request, its shard of the KV and recurrent state
(:func:`depgraph.specs.models.handoff_bytes_per_rank`: KV heads replicated
once the GPUs outnumber them, as vLLM does). The engine may use
``gpu_memory_utilization`` of HBM (vLLM's default 0.9).

>>> import depgraph as dg
>>> from depgraph.serving.memory import max_slots_in_memory
>>> max_slots_in_memory(dg.load_model("qwen3-32b"), context_tokens=16_128, tp=8, gpu="h200")
224

With pipeline depth ``pp`` each GPU holds only its stage's layers (as
:func:`~depgraph.specs.parallel.stage_placement` cuts them; the first stage
the embeddings, the last the LM head), so a slot's share and the weights are
per stage and the stage that fits the fewest slots bounds the server (here the same eight
GPUs as TP 8, cut the other way, hold as many):

>>> max_slots_in_memory(dg.load_model("qwen3-32b"), context_tokens=16_128, tp=4, pp=2, gpu="h200")
224
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .._validate import positive_int, positive_number
from ..errors import ConfigError
from ..specs.hardware import GPU, load_gpu
from ..specs.models import ModelSpec, handoff_bytes_per_rank
from ..specs.modelspec import held_kv_bytes, rank_bytes
from ..specs.parallel import check_pp, stage_placement

__all__ = ["slot_bytes", "weights_per_gpu_bytes", "max_slots_in_memory", "check_sides", "GPU_MEMORY_UTILIZATION",
           "StagePool", "decode_pools"]

#: The share of HBM the engine may use for weights and state (vLLM's ``--gpu-memory-utilization`` default).
GPU_MEMORY_UTILIZATION = 0.9


def check_sides(model: ModelSpec, prefill_tp: int, decode_tp: int) -> None:
    """Refuse a tensor-parallel size either side could not shard the model at
    (heads or channels not divisible), naming the side."""
    for side, tp in (("prefill_tp", prefill_tp), ("decode_tp", decode_tp)):
        try:
            handoff_bytes_per_rank(model, prompt_tokens=1, tp=tp)
        except ConfigError as exc:
            raise ConfigError(f"{side}: {str(exc).removeprefix('tp: ')}") from None


def _stages(model: ModelSpec, pp: int) -> list[list]:
    placement = stage_placement(model.num_layers, check_pp("pp", pp, model.num_layers))
    out: list[list] = [[] for _ in range(pp)]
    for layer, stage in zip(model.layers, placement):
        out[stage].append(layer)
    return out


def _stage_slot_bytes(model: ModelSpec, context_tokens: int, tp: int, pp: int) -> list[dict[str, float]]:
    """Per stage, ``{"kv", "ssm", "conv", "total"}`` one slot holds on one of its ``tp`` GPUs: the KV
    as the engine's KV pool holds it (:func:`~depgraph.specs.modelspec.rank_bytes`: a sliding-window layer
    at most ``W`` tokens, the new token's included), the recurrent state and convolution tail per rank."""
    handoff_bytes_per_rank(model, prompt_tokens=1, tp=tp)  # refuses a tp the model cannot be sharded at
    stages = []
    for layers in (_stages(model, pp) if pp > 1 else [model.layers]):
        out = {"kv": float(rank_bytes(layers, tp).kv_bytes(context_tokens))}
        out.update({c: float(sum(layer.sharded_bytes(c, context_tokens, tp)[0] for layer in layers
                                 if c in layer.components)) for c in ("ssm", "conv")})
        out["total"] = sum(out.values())
        stages.append(out)
    return stages


def _stage_weights_bytes(model: ModelSpec, tp: int, pp: int) -> list[float]:
    """Per stage, the bytes of weights one of its ``tp`` GPUs holds."""
    if pp == 1:
        return [(model.total_params + model.embedding_params + model.lm_head_params) * model.dtype_bytes / tp]
    stages = _stages(model, pp)
    return [(sum(layer.total_params for layer in layers) + (model.embedding_params if k == 0 else 0)
             + (model.lm_head_params if k == pp - 1 else 0)) * model.dtype_bytes / tp
            for k, layers in enumerate(stages)]


def slot_bytes(model: ModelSpec, context_tokens: int, *, tp: int = 1, pp: int = 1) -> dict[str, float]:
    """``{"kv", "ssm", "conv", "total"}``: bytes one slot of ``context_tokens`` holds on each of ``tp`` GPUs
    (with ``pp`` stages, on a GPU of the stage holding the most)."""
    return max(_stage_slot_bytes(model, context_tokens, tp, pp), key=lambda parts: parts["total"])


def weights_per_gpu_bytes(model: ModelSpec, *, tp: int = 1, pp: int = 1) -> float:
    """Bytes of weights one of ``tp`` GPUs holds (with ``pp`` stages, one of the heaviest stage's)."""
    return max(_stage_weights_bytes(model, tp, pp))


def max_slots_in_memory(model: ModelSpec, *, context_tokens: int, tp: int, gpu: str | GPU,
                        gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION, pp: int = 1) -> int:
    """The most requests of ``context_tokens`` one decode server (``tp`` x ``pp`` GPUs) can hold at
    once: the fewest any stage fits, 0 when a stage's weights alone do not fit."""
    tp = positive_int("tp", tp, upper=1024)
    gpu = load_gpu(gpu)
    positive_number("gpu_memory_utilization", gpu_memory_utilization, upper=1.0)
    fits = []
    for weights, parts in zip(_stage_weights_bytes(model, tp, pp), _stage_slot_bytes(model, context_tokens, tp, pp)):
        free = gpu_memory_utilization * gpu.hbm_bytes - weights
        per = parts["total"]
        fits.append(0 if free <= 0 else math.floor(free / per) if per else 1_000_000)
    return min(fits)


@dataclass(frozen=True, slots=True)
class StagePool:
    """What one GPU of a pipeline stage holds for the running requests: ``pool_bytes`` (its share of HBM
    beside the weights), and per request the KV of its tokens (``full_kv_bytes_per_token`` over the
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
                 gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION) -> list[StagePool]:
    """One :class:`StagePool` per pipeline stage of a server of ``tp`` x ``pp`` GPUs: the same per-rank
    shards as :func:`slot_bytes` (a window layer holding at most ``W`` tokens, as
    :meth:`~depgraph.specs.cost.StepCost.kv_bytes`), the same weights as :func:`weights_per_gpu_bytes`.

    >>> import depgraph as dg
    >>> [p] = decode_pools(dg.load_model("qwen3-32b"), tp=8, gpu="h200")
    >>> p.full_kv_bytes_per_token, p.state_bytes, round(p.pool_bytes / 1e9, 1)
    (32768, 0, 118.7)
    """
    tp = positive_int("tp", tp, upper=1024)
    gpu = load_gpu(gpu)
    positive_number("gpu_memory_utilization", gpu_memory_utilization, upper=1.0)
    handoff_bytes_per_rank(model, prompt_tokens=1, tp=tp)  # refuses a tp the model cannot be sharded at
    out = []
    for weights, layers in zip(_stage_weights_bytes(model, tp, pp), _stages(model, pp)):
        held = rank_bytes(layers, tp)
        out.append(StagePool(pool_bytes=math.floor(gpu_memory_utilization * gpu.hbm_bytes - weights),
                             full_kv_bytes_per_token=held.full_kv_bytes_per_token, windows=held.windows,
                             state_bytes=held.state_bytes))
    return out
