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
"""

from __future__ import annotations

import math

from .._validate import positive_int, positive_number
from ..errors import ConfigError
from ..specs.hardware import GPU, load_gpu
from ..specs.models import ModelSpec, handoff_bytes_per_rank

__all__ = ["slot_bytes", "weights_per_gpu_bytes", "max_slots_in_memory", "check_sides", "GPU_MEMORY_UTILIZATION"]

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


def slot_bytes(model: ModelSpec, context_tokens: int, *, tp: int = 1) -> dict[str, float]:
    """``{"kv", "ssm", "conv", "total"}``: bytes one slot of ``context_tokens`` holds on each of ``tp`` GPUs."""
    parts = handoff_bytes_per_rank(model, prompt_tokens=context_tokens, tp=tp)
    out = {k: float(v) for k, v in parts.items()}
    out["total"] = sum(out.values())
    return out


def weights_per_gpu_bytes(model: ModelSpec, *, tp: int = 1) -> float:
    """Bytes of weights one of ``tp`` GPUs holds."""
    return (model.total_params + model.embedding_params + model.lm_head_params) * model.dtype_bytes / tp


def max_slots_in_memory(model: ModelSpec, *, context_tokens: int, tp: int, gpu: str | GPU,
                        gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION) -> int:
    """The most requests of ``context_tokens`` one decode server (``tp`` GPUs) can hold at once:
    0 when the weights alone do not fit."""
    tp = positive_int("tp", tp, upper=1024)
    gpu = load_gpu(gpu)
    positive_number("gpu_memory_utilization", gpu_memory_utilization, upper=1.0)
    free = gpu_memory_utilization * gpu.hbm_bytes - weights_per_gpu_bytes(model, tp=tp)
    per = slot_bytes(model, context_tokens, tp=tp)["total"]
    if free <= 0:
        return 0
    return math.floor(free / per) if per else 1_000_000
