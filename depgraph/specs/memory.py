"""vLLM V1's start-up memory budget: how much of a GPU the KV cache gets, in blocks and tokens.

vLLM sizes its KV cache once, at start-up, by profiling (``Worker.determine_available_memory`` in
``vllm/v1/worker/gpu_worker.py`` with ``memory_profiling`` / ``MemoryProfilingResult`` in
``vllm/utils/mem_utils.py``)::

    requested  = total x gpu_memory_utilization           (total: torch.cuda.mem_get_info, GPU.hbm_bytes)
    kv_cache   = requested - weights - activation peak - non-torch [- CUDA graphs, v0.21+]

and cuts it into blocks (``get_kv_cache_config_from_groups`` and ``get_num_blocks`` in
``vllm/v1/core/kv_cache_utils.py``): a block of a layer is ``block_size`` tokens of its KV (a Mamba or
GDN layer: its whole recurrent state), every layer's block the same bytes (``page_size_bytes``), so
``num_gpu_blocks = kv_cache // page_size // layers per group``. A hybrid model's attention block grows
until its page holds a Mamba state (``HybridAttentionMambaModelConfig.verify_and_update_config`` in
``vllm/model_executor/models/config.py``) and the Mamba page is padded to it. The byte rules are
depgraph's own (:meth:`~depgraph.specs.modelspec.LayerSpec.sharded_bytes`); what this module adds is
vLLM's accounting around them.

The two profiled terms cannot be derived from a config; they are estimated with constants fitted to
vLLM 0.19.0 start-up logs (``data/measured/vllm-logs.csv``; docs/models.md, "Memory"):

>>> import depgraph as dg
>>> m = vllm_memory(dg.load_model("qwen3-32b"), gpu="h100-sxm", tp=2, max_model_len=32_768)
>>> round(m.kv_cache_bytes / GIB, 2), m.num_gpu_blocks, m.kv_cache_tokens, round(m.max_concurrency(), 2)
(36.45, 18663, 298608, 9.11)

Llama-3.1-8B (``data/measured/configs``) at 0.95 and 16,384 tokens on an H100 gives 476,512 tokens and
29.08x where vLLM 0.19.0 logged 476,016 tokens and 29.05x (docs/models.md, "Memory").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from .._validate import positive_int, positive_number
from ..errors import ConfigError, MemoryFitError
from .hardware import GPU, load_gpu
from .modelspec import LayerSpec, ModelSpec
from .parallel import check_pp, stage_placement

__all__ = ["VllmMemory", "vllm_memory", "stage_kv_cache_bytes", "stage_budgets", "StageBudget", "batch_defaults",
           "weights_per_gpu_bytes", "stage_weights_bytes",
           "stage_layers", "GPU_MEMORY_UTILIZATION", "BLOCK_SIZE", "KERNEL_BLOCK_ALIGNMENT", "GIB",
           "SAMPLER_LOGIT_COPIES", "FORWARD_INTERMEDIATE_COPIES", "NON_TORCH_BYTES_TP1", "NON_TORCH_BYTES_TP",
           "NON_TORCH_BYTES_PP", "FIT_DATASET", "MAX_MODEL_LEN", "prefix_cache_block"]

GIB = 1024 ** 3

#: vLLM's ``--gpu-memory-utilization`` default (``CacheConfig.gpu_memory_utilization``).
GPU_MEMORY_UTILIZATION = 0.9
#: vLLM's attention block on CUDA, in tokens (``CacheConfig.block_size`` left unset: 16).
BLOCK_SIZE = 16
#: A hybrid model's attention block is a multiple of this many tokens (FlashAttention's kernel block,
#: ``kernel_block_alignment_size`` in ``HybridAttentionMambaModelConfig.verify_and_update_config``).
KERNEL_BLOCK_ALIGNMENT = 16
#: Longest ``max_model_len`` asked for.
MAX_MODEL_LEN = 100_000_000

#: The start-up logs every constant below is fitted to (shipped as ``data/measured/vllm-logs.csv``).
FIT_DATASET = ("vLLM 0.19.0 on H100 80GB (total 79.19 GiB), OpenAI server defaults (max_num_batched_tokens 8,192, "
               "max_num_seqs 1,024): github.com/llm-d-incubation/llm-d-planner, accuracy/results/v0.19.0 "
               "(accuracy_report.md and logs/)")

#: The sampler's profiled peak in float32 logits of ``max_num_seqs x vocab``: vLLM's profile run samples one
#: token for each of ``max_num_seqs`` dummy requests (``GPUModelRunner._dummy_sampler_run``), holding the
#: logits and their float32 copies, probabilities and log-probabilities at once. 3.72 copies: fitted to
#: Llama-3.1-8B (1.89 GiB logged) and Qwen2.5-7B-Instruct (2.21 GiB) at TP 1, 2 and 4 (:data:`FIT_DATASET`);
#: Qwen3-8B (2.21 GiB) and phi-4 (1.52 GiB) of the same report agree within 1%.
SAMPLER_LOGIT_COPIES = 3.72
#: The forward pass's profiled peak in model-dtype tensors of ``max_num_batched_tokens x intermediate``
#: (the gated MLP's up-projection, its activation, the residual stream): 4.86, fitted (least squares) to
#: CodeLlama-7b at TP 1 (0.77 GiB, a small vocabulary, so the forward pass is the peak) and Llama-3.1-8B's
#: first pipeline stage at PP 2 (1.10 GiB, no sampler there) (:data:`FIT_DATASET`).
FORWARD_INTERMEDIATE_COPIES = 4.86
#: Memory outside torch's allocator that grows from the worker's first snapshot to the end of profiling
#: (``MemoryProfilingResult.non_torch_increase``), per GPU: at TP 1, 0.25 GiB (Llama-3.1-8B 0.25, Qwen2.5-7B
#: 0.24); at TP 2 and 4, 2.1 GiB (2.06 to 2.13: the all-reduce buffers); one GPU of a PP 2 or 4 pipeline,
#: 0.07 GiB (:data:`FIT_DATASET`).
NON_TORCH_BYTES_TP1 = int(0.25 * GIB)
NON_TORCH_BYTES_TP = int(2.1 * GIB)
NON_TORCH_BYTES_PP = int(0.07 * GIB)


def batch_defaults(gpu: str | GPU) -> tuple[int, int]:
    """``(max_num_batched_tokens, max_num_seqs)`` vLLM V1 takes for an OpenAI-compatible server when not
    told (``EngineArgs.get_batch_defaults`` in ``vllm/engine/arg_utils.py``): 8,192 and 1,024 on a GPU whose
    driver reports at least 70 GiB and that is not an A100, else 2,048 and 256.

    >>> batch_defaults("h100-sxm"), batch_defaults("a100-80g"), batch_defaults("l40s")
    ((8192, 1024), (2048, 256), (2048, 256))
    """
    gpu = load_gpu(gpu)
    big = gpu.hbm_bytes >= 70 * GIB and not gpu.name.startswith("a100")
    return (8192, 1024) if big else (2048, 256)


def stage_layers(model: ModelSpec, pp: int) -> list[list[LayerSpec]]:
    """The layers of each of ``pp`` pipeline stages (:func:`~depgraph.specs.parallel.stage_placement`)."""
    placement = stage_placement(model.num_layers, check_pp("pp", pp, model.num_layers))
    out: list[list[LayerSpec]] = [[] for _ in range(pp)]
    for layer, stage in zip(model.layers, placement):
        out[stage].append(layer)
    return out


def stage_weights_bytes(model: ModelSpec, *, tp: int = 1, pp: int = 1) -> list[float]:
    """Per stage, the bytes of weights one of its ``tp`` GPUs holds: every parameter (experts and
    embeddings included) in the model dtype, split evenly over the ranks; the first stage holds the
    embeddings, the last the LM head."""
    if pp == 1:
        return [(model.total_params + model.embedding_params + model.lm_head_params) * model.dtype_bytes / tp]
    return [(sum(layer.total_params for layer in layers) + (model.embedding_params if k == 0 else 0)
             + (model.lm_head_params if k == pp - 1 else 0)) * model.dtype_bytes / tp
            for k, layers in enumerate(stage_layers(model, pp))]


def weights_per_gpu_bytes(model: ModelSpec, *, tp: int = 1, pp: int = 1) -> float:
    """Bytes of weights one of ``tp`` GPUs holds (with ``pp`` stages, one of the heaviest stage's)."""
    return max(stage_weights_bytes(model, tp=tp, pp=pp))


@dataclass(frozen=True, slots=True)
class VllmMemory:
    """One GPU's start-up budget as vLLM logs it (every byte count per GPU; with pipeline stages, the
    stage holding the fewest blocks, whose count every stage then uses, as ``get_kv_cache_configs`` does).

    ``requested_bytes = total_bytes x gpu_memory_utilization``; ``kv_cache_bytes`` is what is left after
    ``weights_bytes``, ``activation_bytes``, ``non_torch_bytes`` and ``cudagraph_bytes`` ("Available KV cache
    memory"); ``num_gpu_blocks`` blocks of ``page_size_bytes`` per layer of ``group_size`` layers;
    ``kv_cache_tokens`` is vLLM's "GPU KV cache size: N tokens" (blocks per KV cache group times the
    smallest group block, ``block_size``)."""

    total_bytes: int
    gpu_memory_utilization: float
    requested_bytes: int
    weights_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    cudagraph_bytes: int
    kv_cache_bytes: int
    block_size: int
    page_size_bytes: int
    num_gpu_blocks: int
    kv_cache_tokens: int
    max_model_len: int
    max_num_batched_tokens: int
    max_num_seqs: int
    group_size: int
    groups: tuple[tuple[str, int], ...]
    """The KV cache groups: ``(kind, window)``, kind ``"full"``, ``"window"`` (``window`` tokens) or
    ``"mamba"``; ``block_size`` tokens a block (a Mamba block holds a whole state)."""

    def max_concurrency(self, request_tokens: int | None = None) -> float:
        """Requests of ``request_tokens`` (default ``max_model_len``) the blocks hold at once: vLLM's
        "Maximum concurrency for L tokens per request: Xx" (``get_max_concurrency_for_kv_cache_config``:
        the blocks over the blocks one request may need in every group, a window layer its window plus a
        batch of tokens and one block, a Mamba layer one block)."""
        tokens = self.max_model_len if request_tokens is None else positive_int("request_tokens", request_tokens,
                                                                               upper=MAX_MODEL_LEN)
        return self.num_gpu_blocks / self.blocks_per_request(tokens)

    def blocks_per_request(self, request_tokens: int) -> int:
        """Blocks of every group one request of ``request_tokens`` may need (``max_memory_usage_bytes`` over
        the groups, in blocks)."""
        need = 0
        for kind, window in self.groups:
            if kind == "full":
                need += -(-request_tokens // self.block_size)
            elif kind == "window":
                held = min(window - 1 + self.max_num_batched_tokens, request_tokens)
                need += -(-held // self.block_size) + 1
            else:
                need += 1
        return need


def _spec_kinds(layers: Sequence[LayerSpec], tp: int) -> list[tuple[tuple[str, int], int]]:
    """Each vLLM KV cache layer of ``layers`` at ``tp``: ``((kind, window), bytes)``, bytes per token for an
    attention layer, per state for a Mamba/GDN one (Falcon-H1's parallel layer is one of each)."""
    out = []
    for layer in layers:
        if layer.kv_bytes_per_token:
            kind = ("window", int(layer.kv_window_tokens)) if layer.kv_window_tokens else ("full", 0)
            out.append((kind, layer.sharded_bytes("kv", 1, tp)[0]))
        if layer.ssm_bytes or layer.conv_bytes:
            state = sum(layer.sharded_bytes(c, 1, tp)[0] for c in ("ssm", "conv") if c in layer.components)
            out.append((("mamba", 0), state))
    return out


def _intermediate_per_rank(model: ModelSpec, layers: Sequence[LayerSpec], tp: int) -> float:
    """The widest per-token MLP intermediate one rank computes: a gated MLP's ``3 x hidden x intermediate``
    parameters (a MoE layer's routed experts and shared/dense part together), over ``tp``."""
    widest = max((layer.ffn_dense_params + layer.experts_per_token * layer.expert_params for layer in layers),
                 default=0)
    return widest / (3 * model.hidden_size) / tp


def _activation_bytes(model: ModelSpec, layers: Sequence[LayerSpec], *, tp: int, last: bool,
                      max_num_batched_tokens: int, max_num_seqs: int) -> int:
    """The profiled torch peak of one GPU (``torch_peak_increase``): the larger of the forward pass over
    ``max_num_batched_tokens`` tokens and, on the last stage, the sampler's logits for ``max_num_seqs``
    requests (with the hidden states they are computed from). The sampler's logits are gathered whole on
    every rank, so that term does not shrink with TP."""
    forward = FORWARD_INTERMEDIATE_COPIES * max_num_batched_tokens * model.dtype_bytes \
        * _intermediate_per_rank(model, layers, tp)
    sampler = 0.0
    if last:
        sampler = SAMPLER_LOGIT_COPIES * min(max_num_seqs, max_num_batched_tokens) * model.vocab_size * 4 \
            + max_num_batched_tokens * model.hidden_size * model.dtype_bytes
    return int(max(forward, sampler))


def _non_torch_bytes(tp: int, pp: int) -> int:
    if tp > 1:
        return NON_TORCH_BYTES_TP
    return NON_TORCH_BYTES_PP if pp > 1 else NON_TORCH_BYTES_TP1


def _layout(specs: list[tuple[tuple[str, int], int]], block_size: int, where: str):
    """vLLM's KV cache groups for one stage: ``(block_size, page_size_bytes, group_size, groups)``."""
    attn = [b for (kind, _), b in specs if kind != "mamba"]
    mamba = [b for (kind, _), b in specs if kind == "mamba"]
    if mamba and attn:  # HybridAttentionMambaModelConfig: the attention page at least the (largest) Mamba page
        attn_1tok, state = max(attn), max(mamba)
        aligned = KERNEL_BLOCK_ALIGNMENT * -(-state // (KERNEL_BLOCK_ALIGNMENT * attn_1tok))
        block_size = max(block_size, aligned)
    if len(set(attn)) > 1 and not mamba and len({k for k, _ in specs}) == 1:
        # UniformTypeKVCacheSpecs: one type, layers of different widths in one group, a block of each
        return block_size, sum(attn) * block_size, 1, ((specs[0][0][0], specs[0][0][1]),)
    pages = {k: (b * block_size if k[0] != "mamba" else b) for k, b in specs}
    page = max(pages.values()) if not attn else max(attn) * block_size
    for (kind, _), b in specs:
        size = b * block_size if kind != "mamba" else b
        if kind != "mamba" and page % size:
            raise ConfigError(f"{where}: attention layers of different KV widths ({sorted(set(attn))} bytes per "
                              "token) with other layer kinds; vLLM cannot unify their page sizes")
        if kind == "mamba" and size > page:
            raise ConfigError(f"{where}: a recurrent state of {size:,} bytes is larger than the attention page")
    counts: dict[tuple[str, int], int] = {}
    for kind, _ in specs:
        counts[kind] = counts.get(kind, 0) + 1
    if len(counts) == 1:
        return block_size, page, len(specs), tuple(counts)
    lo, hi = min(counts.values()), max(counts.values())
    group_size = hi if hi < lo * 1.5 else lo  # _get_kv_cache_groups_uniform_page_size
    groups = tuple(kind for kind, n in counts.items() for _ in range(-(-n // group_size)))
    return block_size, page, group_size, groups


@dataclass(frozen=True, slots=True)
class StageBudget:
    """One GPU of one pipeline stage: its share of ``requested_bytes`` and what is left for the KV cache
    (``kv_cache_bytes``, negative when the rest does not fit)."""

    total_bytes: int
    requested_bytes: int
    weights_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    cudagraph_bytes: int
    kv_cache_bytes: int
    max_num_batched_tokens: int
    max_num_seqs: int


def stage_budgets(model: ModelSpec, *, gpu: str | GPU = "h100-sxm", tp: int = 1, pp: int = 1,
                  gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION, max_num_batched_tokens: int | None = None,
                  max_num_seqs: int | None = None, cudagraph_bytes: int = 0) -> list[StageBudget]:
    """One :class:`StageBudget` per pipeline stage (vLLM's ``determine_available_memory`` on one of its
    GPUs), ``max_num_batched_tokens`` and ``max_num_seqs`` vLLM's for the GPU unless given."""
    gpu = load_gpu(gpu)
    tp = positive_int("tp", tp, upper=1024)
    pp = check_pp("pp", pp, model.num_layers)
    gmu = positive_number("gpu_memory_utilization", gpu_memory_utilization, upper=1.0)
    cudagraph_bytes = positive_int("cudagraph_bytes", cudagraph_bytes, upper=10 ** 15, allow_zero=True)
    default_tokens, default_seqs = batch_defaults(gpu)
    mnbt = positive_int("max_num_batched_tokens", default_tokens if max_num_batched_tokens is None
                        else max_num_batched_tokens, upper=10_000_000)
    seqs = positive_int("max_num_seqs", default_seqs if max_num_seqs is None else max_num_seqs, upper=1_000_000)
    total = int(gpu.hbm_bytes)
    requested = int(total * gmu)
    out = []
    for k, (layers, weights) in enumerate(zip(stage_layers(model, pp), stage_weights_bytes(model, tp=tp, pp=pp))):
        activation = _activation_bytes(model, layers, tp=tp, last=k == pp - 1, max_num_batched_tokens=mnbt,
                                       max_num_seqs=seqs)
        non_torch = _non_torch_bytes(tp, pp)
        kv = requested - int(weights) - activation - non_torch - cudagraph_bytes
        out.append(StageBudget(total, requested, int(weights), activation, non_torch, cudagraph_bytes, kv, mnbt, seqs))
    return out


def stage_kv_cache_bytes(model: ModelSpec, *, gpu: str | GPU = "h100-sxm", tp: int = 1, pp: int = 1,
                         gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION,
                         max_num_batched_tokens: int | None = None, max_num_seqs: int | None = None,
                         cudagraph_bytes: int = 0) -> list[int]:
    """Per pipeline stage, the KV cache bytes one of its GPUs gets (vLLM's "Available KV cache memory":
    :func:`vllm_memory`'s ``kv_cache_bytes`` for that stage), negative where the weights, activations and
    non-torch memory alone exceed ``gpu_memory_utilization`` of the GPU. The pool the serving engine's KV
    blocks and recurrent states share (:mod:`depgraph.serving.memory`).

    >>> import depgraph as dg
    >>> [round(b / GIB, 2) for b in stage_kv_cache_bytes(dg.load_model("qwen3-32b"), gpu="h200", tp=8)]
    [113.87]
    """
    return [b.kv_cache_bytes for b in stage_budgets(
        model, gpu=load_gpu(gpu), tp=tp, pp=pp, gpu_memory_utilization=gpu_memory_utilization,
        max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs, cudagraph_bytes=cudagraph_bytes)]


def prefix_cache_block(model: ModelSpec, *, tp: int = 1, block_size: int = BLOCK_SIZE) -> tuple[int, bool]:
    """The block vLLM's prefix cache works in for ``model`` at ``tp``, and whether the model has recurrent
    layers (Mamba-2, Gated DeltaNet), whose prefix hits vLLM's ``align`` Mamba cache mode limits to the
    points where a recurrent state was kept (:mod:`depgraph.serving.prefixcache`). An attention-only model:
    ``block_size``; a hybrid one: the attention block raised until one block's KV page holds a recurrent
    state (``Platform._align_hybrid_block_size``, as :func:`vllm_memory` lays the cache out).

    >>> import depgraph as dg
    >>> prefix_cache_block(dg.load_model("qwen3-32b")), prefix_cache_block(dg.load_model("qwen3.6-35b-a3b", kv_dtype="fp8"))
    ((16, False), (2096, True))
    """
    specs = _spec_kinds(model.layers, tp)
    hybrid = any(kind == "mamba" for (kind, _), _ in specs)
    if not specs:
        return block_size, hybrid
    return _layout(specs, block_size, model.name)[0], hybrid


def vllm_memory(model: ModelSpec, *, gpu: str | GPU = "h100-sxm", tp: int = 1, pp: int = 1,
                gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION, max_model_len: int | None = None,
                max_num_batched_tokens: int | None = None, max_num_seqs: int | None = None,
                block_size: int = BLOCK_SIZE, cudagraph_bytes: int = 0,
                kv_cache_memory_bytes: int | None = None) -> VllmMemory:
    """vLLM V1's start-up budget for ``model`` on ``tp`` x ``pp`` GPUs of ``gpu`` (:class:`VllmMemory`).

    ``max_model_len`` defaults to the model's context; ``max_num_batched_tokens`` and ``max_num_seqs`` to
    vLLM's for the GPU (:func:`batch_defaults`). ``cudagraph_bytes``: CUDA-graph memory taken from the KV
    cache before it is sized; 0, as in vLLM before 0.21 (graphs captured after the KV cache, in the share
    ``gpu_memory_utilization`` leaves); from 0.21 vLLM estimates it at start-up and logs "Estimated CUDA
    graph memory" (pass that figure). ``kv_cache_memory_bytes``: vLLM's ``--kv-cache-memory-bytes``, the KV
    cache given outright (profiling skipped, ``gpu_memory_utilization`` not applied; the other terms are still
    reported). A ``max_model_len`` one request cannot hold is refused, as vLLM refuses it
    (:class:`~depgraph.errors.MemoryFitError`)."""
    gpu = load_gpu(gpu)
    block_size = positive_int("block_size", block_size, upper=1_000_000)
    if kv_cache_memory_bytes is not None:
        kv_cache_memory_bytes = positive_int("kv_cache_memory_bytes", kv_cache_memory_bytes, upper=10 ** 15)
    budgets = stage_budgets(model, gpu=gpu, tp=tp, pp=pp, gpu_memory_utilization=gpu_memory_utilization,
                             max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs,
                             cudagraph_bytes=cudagraph_bytes)
    tp, pp, gmu = int(tp), int(pp), float(gpu_memory_utilization)
    mnbt, seqs = budgets[0].max_num_batched_tokens, budgets[0].max_num_seqs
    if max_model_len is None:
        if model.max_position_embeddings is None:
            raise ConfigError(f"max_model_len: {model.name}'s config gives no context length; give max_model_len")
        max_model_len = model.max_position_embeddings
    max_model_len = model.check_context(positive_int("max_model_len", max_model_len, upper=MAX_MODEL_LEN),
                                        field="max_model_len", what="a max_model_len")
    total, requested = budgets[0].total_bytes, budgets[0].requested_bytes
    stages = []
    for k, (layers, b) in enumerate(zip(stage_layers(model, pp), budgets)):
        specs = _spec_kinds(layers, tp)
        if not specs:
            raise ConfigError(f"pp: stage {k} of {model.name} holds no attention or recurrent layer; vLLM "
                              "needs a KV cache on every stage")
        bs, page, group_size, groups = _layout(specs, block_size, model.name)
        kv = b.kv_cache_bytes if kv_cache_memory_bytes is None else kv_cache_memory_bytes
        blocks = max(0, kv // page // group_size)
        stages.append((blocks, b.weights_bytes, b.activation_bytes, b.non_torch_bytes, kv, bs, page, group_size,
                       groups))
    blocks, weights, activation, non_torch, kv, bs, page, group_size, groups = min(stages, key=lambda s: s[0])
    if kv <= 0:
        raise MemoryFitError(f"gpu_memory_utilization: {model.name} at TP {tp} x PP {pp} needs {weights / GIB:.2f} "
                             f"GiB of weights, {activation / GIB:.2f} GiB of activations and {non_torch / GIB:.2f} "
                             f"GiB outside torch per GPU, more than {gmu:g} of {gpu.name}'s {total / GIB:.2f} GiB; "
                             "raise tp, pp or gpu_memory_utilization")
    min_block = bs if any(kind != "mamba" for kind, _ in groups) else max_model_len
    out = VllmMemory(total_bytes=total, gpu_memory_utilization=gmu, requested_bytes=requested, weights_bytes=weights,
                     activation_bytes=activation, non_torch_bytes=non_torch, cudagraph_bytes=budgets[0].cudagraph_bytes,
                     kv_cache_bytes=int(kv), block_size=bs, page_size_bytes=int(page), num_gpu_blocks=int(blocks),
                     kv_cache_tokens=int(blocks // len(groups) * min_block), max_model_len=max_model_len,
                     max_num_batched_tokens=mnbt, max_num_seqs=seqs, group_size=group_size, groups=groups)
    need = out.blocks_per_request(max_model_len)
    if need > out.num_gpu_blocks:
        raise MemoryFitError(f"max_model_len: one request of {max_model_len:,} tokens needs {need:,} blocks, more "
                             f"than the {out.num_gpu_blocks:,} the KV cache holds ({kv / GIB:.2f} GiB per GPU on "
                             f"{gpu.name} at TP {tp} x PP {pp}); lower max_model_len or raise tp")
    return out
