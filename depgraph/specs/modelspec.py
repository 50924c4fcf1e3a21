"""What a model is to the handoff: its layers, their state, and the bytes
vLLM holds for one request at any tensor-parallel size.

A :class:`ModelSpec` is built from a Hugging Face config by
:mod:`depgraph.specs.families` (:func:`depgraph.load_model`). Every rule
that decides a byte count here follows a vLLM function, cited in
``docs/calibration.md`` ("Handoff bytes, rule by rule").
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from .._validate import positive_int
from ..errors import ConfigError

__all__ = ["LayerSpec", "ModelSpec", "COMPONENTS", "MIXERS", "sharded_handoff_bytes", "whole_handoff_bytes", "RankBytes", "rank_bytes", "held_kv_bytes",
           "MAX_PROMPT_TOKENS", "MAX_SPEC_TOKENS"]

#: Handoff components, in the order they are sent within a layer. The conv
#: tail goes before the recurrent state so that it can arrive first (the
#: study's only case where a component signal can help).
COMPONENTS: tuple[str, ...] = ("kv", "conv", "ssm")

#: Token mixers a layer may have: full or sliding-window attention, Gated
#: DeltaNet, Mamba-1, Mamba-2, attention and Mamba-2 side by side in one
#: layer (Falcon-H1), or none (an MLP or MoE layer of Nemotron-H).
MIXERS: tuple[str, ...] = ("attention", "gdn", "mamba1", "mamba2", "attention+mamba2", "none")

#: Largest prompt a byte count is asked for (above every context vLLM serves today).
MAX_PROMPT_TOKENS = 100_000_000
#: Most speculative tokens per step (vLLM's ``num_speculative_tokens``) a conv state is sized for.
MAX_SPEC_TOKENS = 64

_DTYPE_BYTES = {
    "float32": 4, "fp32": 4, "float": 4,
    "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "half": 2,
    "float8": 1, "fp8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "int8": 1,
}


def _dtype_bytes(field_name: str, value: Any) -> int:
    """Bytes per element of a dtype name as configs and vLLM flags write it."""
    if isinstance(value, str) and value.strip().lower().replace("torch.", "") in _DTYPE_BYTES:
        return _DTYPE_BYTES[value.strip().lower().replace("torch.", "")]
    raise ConfigError(f"{field_name}: expected a dtype ({', '.join(sorted(set(_DTYPE_BYTES)))}); got {value!r}")


@dataclass(frozen=True, slots=True)
class LayerSpec:
    """One decoder layer: its kind, handoff state and parameter counts.

    ``mixer`` is one of :data:`MIXERS`; ``ffn`` is ``"dense"``, ``"moe"`` or
    ``"none"``. ``kind`` is the mixer when there is one, else the ffn
    (``"mlp"`` or ``"moe"``). An attention layer with ``kv_window_tokens``
    is a sliding-window layer: it holds only the last ``kv_window_tokens``
    tokens of KV, less one (:meth:`kv_tokens`).
    """

    index: int
    kind: str
    mixer: str
    ffn: str
    kv_bytes_per_token: int = 0
    ssm_bytes: int = 0
    conv_bytes: int = 0
    mixer_params: int = 0
    ffn_dense_params: int = 0  # always-touched ffn weights (dense MLP, shared expert, router)
    expert_params: int = 0  # weights of one routed expert
    num_experts: int = 0
    experts_per_token: int = 0
    attention_width: int = 0  # query heads x head_dim, for the quadratic term
    recurrent_state_elems: int = 0
    kv_window_tokens: int = 0  # sliding-window attention: the window W (0: the whole context); W - 1 tokens held
    conv_rows: int = 0  # recurrent: rows of the conv tail (kernel - 1) that speculative rows add to (0: none added)
    attention_params: int = 0  # attention+mamba2: the attention share of mixer_params
    # how tensor parallelism shards the state (vLLM's rules: docs/calibration.md, "tensor parallelism")
    query_heads: int = 0  # attention: query heads (each rank needs a whole number)
    kv_heads: int = 0  # attention: KV heads (split across ranks, replicated when fewer than ranks)
    state_heads: int = 0  # recurrent: the heads (Mamba-1: channels) the temporal state is split along
    conv_channels: int = 0  # recurrent: channels of the convolution tail
    conv_groups: int = 0  # Mamba-2: B/C groups (padded to the TP size when one group is shared)
    group_channels: int = 0  # Mamba-2: conv channels per group (2 x state size)

    @property
    def components(self) -> tuple[str, ...]:
        """The handoff components this layer carries, in send order."""
        out = []
        if self.kv_bytes_per_token:
            out.append("kv")
        if self.conv_bytes:
            out.append("conv")
        if self.ssm_bytes:
            out.append("ssm")
        return tuple(out)

    @property
    def active_params(self) -> int:
        """Parameters one token touches (mixer, dense ffn, top-k experts)."""
        return self.mixer_params + self.ffn_dense_params + self.experts_per_token * self.expert_params

    @property
    def total_params(self) -> int:
        return self.mixer_params + self.ffn_dense_params + self.num_experts * self.expert_params

    def kv_tokens(self, context_tokens: int) -> int:
        """Tokens of KV this layer holds for a context of ``context_tokens``:
        all of them, or in a sliding-window layer of window ``W`` the last
        ``W - 1`` (the next token attends to them and itself; vLLM's
        ``SlidingWindowManager`` frees the tokens before them)."""
        if self.kv_window_tokens:
            return min(context_tokens, self.kv_window_tokens - 1)
        return context_tokens

    def _conv_total(self, spec_tokens: int) -> int:
        """Conv-tail bytes with ``spec_tokens`` extra rows (vLLM sizes the tail
        ``kernel - 1 + num_speculative_tokens`` rows under speculative decoding)."""
        if not spec_tokens or not self.conv_rows:
            return self.conv_bytes
        return self.conv_bytes // self.conv_rows * (self.conv_rows + spec_tokens)

    def component_bytes(self, component: str, prompt_tokens: int, *, spec_tokens: int = 0) -> int:
        """Bytes of one component of this layer for a prompt of ``prompt_tokens``."""
        if component == "kv":
            return self.kv_bytes_per_token * self.kv_tokens(prompt_tokens)
        if component == "ssm":
            return self.ssm_bytes
        if component == "conv":
            return self._conv_total(spec_tokens)
        raise ConfigError(f"component: expected one of {', '.join(COMPONENTS)}; got {component!r}")

    def sharded_bytes(self, component: str, prompt_tokens: int, tp: int, *, spec_tokens: int = 0) -> tuple[int, int]:
        """``(bytes on one rank, bytes on all tp ranks)`` of one component at
        tensor-parallel size ``tp``, as vLLM shards it: KV heads split and
        replicated when fewer than the ranks (``max(1, kv_heads // tp)`` per
        rank), the recurrent state split by heads (Mamba-1: by channels), the
        conv tail by channels (a single shared Mamba-2 group padded to one per
        rank). A ``tp`` vLLM could not shard is refused naming the field."""
        if component == "kv":
            if not self.kv_bytes_per_token:
                return 0, 0
            _divides(tp, self.query_heads, "num_attention_heads", self.index)
            if self.kv_heads % tp and tp % self.kv_heads:
                raise ConfigError(f"tp: {tp} neither divides nor is a multiple of num_key_value_heads "
                                  f"({self.kv_heads}) of layer {self.index}; vLLM cannot shard it")
            per_head = self.kv_bytes_per_token // self.kv_heads
            rank = max(1, self.kv_heads // tp) * per_head * self.kv_tokens(prompt_tokens)
            return rank, rank * tp
        if component == "ssm":
            if not self.ssm_bytes:
                return 0, 0
            _divides(tp, self.state_heads, "the recurrent state's heads" if self.mixer != "mamba1"
                     else "the Mamba-1 channels (mamba_expand x hidden_size)", self.index)
            return self.ssm_bytes // tp, self.ssm_bytes
        if component == "conv":
            if not self.conv_bytes:
                return 0, 0
            pad = 0
            if self.conv_groups and self.conv_groups % tp:
                if self.conv_groups != 1:
                    raise ConfigError(f"tp: {tp} does not divide n_groups ({self.conv_groups}) of layer {self.index}; "
                                      "vLLM shards groups whole (or pads a single group)")
                pad = tp - 1
            channels = self.conv_channels + pad * self.group_channels
            _divides(tp, channels, "the convolution channels", self.index)
            total = self._conv_total(spec_tokens) // self.conv_channels * channels
            return total // tp, total
        raise ConfigError(f"component: expected one of {', '.join(COMPONENTS)}; got {component!r}")


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A model as the handoff sees it. Build with :func:`depgraph.load_model`."""

    name: str
    family: str
    hidden_size: int
    vocab_size: int
    dtype_bytes: int
    kv_dtype_bytes: int
    ssm_dtype_bytes: int
    layers: tuple[LayerSpec, ...]
    embedding_params: int
    lm_head_params: int
    #: The longest context the model takes, if the config says: its
    #: ``max_position_embeddings``, scaled by a RoPE ``factor`` as vLLM
    #: derives ``max_model_len`` (docs/calibration.md, "context").
    max_position_embeddings: int | None = None
    source: str = field(default="", compare=False)

    def check_context(self, tokens: int, *, field: str = "prompt_tokens", what: str = "a prompt") -> int:
        """``tokens``, or a ConfigError where they exceed the model's context."""
        if self.max_position_embeddings is not None and tokens > self.max_position_embeddings:
            raise ConfigError(f"{field}: {what} of {tokens:,} tokens is longer than {self.name}'s context of "
                              f"{self.max_position_embeddings:,} tokens (max_position_embeddings, RoPE-scaled as vLLM "
                              "derives max_model_len)")
        return tokens

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def kv_bytes_per_token(self) -> int:
        """KV bytes one more token of context adds while every window still grows
        (all layers' per-token KV; :meth:`kv_bytes` caps sliding windows)."""
        return sum(layer.kv_bytes_per_token for layer in self.layers)

    @property
    def has_sliding_window(self) -> bool:
        return any(layer.kv_window_tokens for layer in self.layers)

    def kv_bytes(self, context_tokens: int) -> int:
        """KV bytes of one request holding ``context_tokens`` tokens (sliding windows capped)."""
        return sum(layer.kv_bytes_per_token * layer.kv_tokens(context_tokens) for layer in self.layers)

    @property
    def active_params(self) -> int:
        """Non-embedding parameters one token touches."""
        return sum(layer.active_params for layer in self.layers)

    @property
    def total_params(self) -> int:
        """Non-embedding parameters in all."""
        return sum(layer.total_params for layer in self.layers)

    @property
    def is_hybrid(self) -> bool:
        return any(layer.ssm_bytes for layer in self.layers)

    def count_kinds(self) -> dict[str, int]:
        """Number of layers of each kind, in first-seen order."""
        counts: dict[str, int] = {}
        for layer in self.layers:
            counts[layer.kind] = counts.get(layer.kind, 0) + 1
        return counts

    def with_kv_dtype(self, kv_dtype: str) -> "ModelSpec":
        """The same model with its KV cache stored in ``kv_dtype`` (e.g. ``"fp8"``;
        vLLM's ``--kv-cache-dtype``)."""
        new_bytes = _dtype_bytes("kv_dtype", kv_dtype)
        layers = tuple(
            replace(layer, kv_bytes_per_token=layer.kv_bytes_per_token // self.kv_dtype_bytes * new_bytes)
            for layer in self.layers
        )
        return replace(self, layers=layers, kv_dtype_bytes=new_bytes)

    def with_ssm_dtype(self, ssm_dtype: str) -> "ModelSpec":
        """The same model with its recurrent (temporal) state stored in
        ``ssm_dtype`` (vLLM's ``--mamba-ssm-cache-dtype``); the conv tail stays
        in the model dtype."""
        new_bytes = _dtype_bytes("ssm_dtype", ssm_dtype)
        layers = tuple(replace(layer, ssm_bytes=layer.ssm_bytes // self.ssm_dtype_bytes * new_bytes)
                       for layer in self.layers)
        return replace(self, layers=layers, ssm_dtype_bytes=new_bytes)


def _divides(tp: int, count: int, what: str, index: int) -> None:
    if count % tp:
        raise ConfigError(f"tp: {tp} does not divide {what} ({count}) of layer {index}; vLLM cannot shard it")


def _checked(model: ModelSpec, prompt_tokens: int, spec_tokens: int) -> tuple[int, int]:
    prompt_tokens = model.check_context(positive_int("prompt_tokens", prompt_tokens, upper=MAX_PROMPT_TOKENS))
    return prompt_tokens, positive_int("spec_tokens", spec_tokens, upper=MAX_SPEC_TOKENS, allow_zero=True)


def whole_handoff_bytes(model: ModelSpec, prompt_tokens: int, spec_tokens: int = 0) -> dict[str, int]:
    """The bytes of each handoff component of one request on one GPU a side (no sharding): what
    :func:`~depgraph.specs.models.handoff_bytes` reports at TP 1."""
    prompt_tokens, spec_tokens = _checked(model, prompt_tokens, spec_tokens)
    return {c: sum(layer.component_bytes(c, prompt_tokens, spec_tokens=spec_tokens) for layer in model.layers)
            for c in ("kv", "ssm", "conv")}


def sharded_handoff_bytes(model: ModelSpec, prompt_tokens: int, tp: int, spec_tokens: int = 0
                          ) -> tuple[dict[str, int], dict[str, int]]:
    """One decode rank's bytes of each handoff component, and all ``tp`` ranks' (KV-head replication
    and group padding included): what :func:`~depgraph.specs.models.handoff_bytes` reports."""
    prompt_tokens, spec_tokens = _checked(model, prompt_tokens, spec_tokens)
    tp = positive_int("tp", tp, upper=1024)
    rank = dict.fromkeys(("kv", "ssm", "conv"), 0)  # the order handoff_bytes gives
    total = dict(rank)
    for layer in model.layers:
        for c in rank:
            r, t = layer.sharded_bytes(c, prompt_tokens, tp, spec_tokens=spec_tokens)
            rank[c] += r
            total[c] += t
    return rank, total


@dataclass(frozen=True, slots=True)
class RankBytes:
    """What one GPU of a server at tensor-parallel size ``tp`` holds per request for ``layers``: KV bytes
    per token of the whole-context layers (``full_kv_bytes_per_token``), each sliding window's KV bytes per
    token (``windows``: ``(W, bytes per token)``, sorted by ``W``), and the recurrent state and convolution
    tail (``state_bytes``), all whole bytes at the GPU's shard (KV heads replicated past their count)."""

    full_kv_bytes_per_token: int
    windows: tuple[tuple[int, int], ...]
    state_bytes: int

    def kv_bytes(self, tokens: int) -> int:
        """KV bytes for a request of ``tokens`` tokens (a window layer holds at most ``W``)."""
        return held_kv_bytes(self.full_kv_bytes_per_token, self.windows, tokens)


def held_kv_bytes(full_kv_bytes_per_token: int, windows: tuple[tuple[int, int], ...], tokens: int) -> int:
    """KV bytes one GPU holds for a request of ``tokens`` tokens: the whole-context layers' bytes per token
    times the tokens, each sliding window's ``(W, bytes per token)`` times at most ``W`` (the one rule the
    KV pools, the step cost and a slot's memory count by)."""
    held = full_kv_bytes_per_token * tokens
    if windows:
        held += sum(b * min(tokens, w) for w, b in windows)
    return held


def rank_bytes(layers: Sequence[LayerSpec], tp: int) -> RankBytes:
    """:class:`RankBytes` of ``layers`` at tensor-parallel size ``tp`` (one place for the rule the step
    cost, the decode memory pools and the decode step read)."""
    full, windows, state = 0, {}, 0
    for layer in layers:
        kv = layer.sharded_bytes("kv", 1, tp)[0] if "kv" in layer.components else 0
        if layer.kv_window_tokens:
            windows[int(layer.kv_window_tokens)] = windows.get(int(layer.kv_window_tokens), 0) + kv
        else:
            full += kv
        state += sum(layer.sharded_bytes(c, 1, tp)[0] for c in ("ssm", "conv") if c in layer.components)
    return RankBytes(full_kv_bytes_per_token=int(full), windows=tuple(sorted(windows.items())), state_bytes=int(state))
