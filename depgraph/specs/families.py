"""Hugging Face ``config.json`` readers, one per architecture family.

A config is read by its ``model_type`` (under ``text_config`` where a
multimodal wrapper nests it), never as another family's; only a config that
names no ``model_type`` is recognised by its fields. Defaults are those
transformers and vLLM apply. The families, their fields and the vLLM rule
each byte count follows are listed in ``docs/calibration.md`` ("Handoff
bytes, rule by rule"):

* Qwen3-Next / Qwen3.5 / Qwen3.6: Gated DeltaNet and full attention
  (``layer_types`` or ``full_attention_interval``);
* Nemotron-H: Mamba-2, attention, MLP and MoE layers
  (``hybrid_override_pattern`` or ``layers_block_type``);
* Jamba: Mamba-1 and attention (``attn_layer_period`` / ``attn_layer_offset``),
  MoE every ``expert_layer_period`` layers;
* Falcon-H1: attention and Mamba-2 side by side in every layer;
* Granite-4.0-H (``granitemoehybrid``): Mamba-2 and attention by
  ``layer_types``, MoE with a shared expert;
* Bamba: Mamba-2 with attention at ``attn_layer_indices``;
* dense (or MoE) attention: Llama, Mistral, Mixtral, Qwen2, Qwen3, gpt-oss,
  with sliding-window layers (``layer_types`` with ``sliding_attention``,
  or ``sliding_window``).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

from .._validate import positive_int
from ..errors import ConfigError
from .modelspec import LayerSpec, ModelSpec, _dtype_bytes

__all__ = ["model_from_config", "SUPPORTED_FAMILIES", "UNSUPPORTED_ARCHITECTURES"]

#: Largest config values accepted, so that a typo cannot ask for petabytes.
_MAX_DIM = 1_000_000
_MAX_LAYERS = 10_000
#: Largest context a config may state (max_position_embeddings x a RoPE factor).
_MAX_CONTEXT = 1 << 40


class _Fields:
    """Typed access to a config mapping; errors name the file and field."""

    def __init__(self, config: Mapping[str, Any], where: str, prefix: str = "") -> None:
        self.config = config
        self.where = where
        self.prefix = prefix

    def name(self, key: str) -> str:
        return f"{self.where}: {self.prefix}{key}"

    def error(self, key: str, message: str) -> ConfigError:
        return ConfigError(f"{self.name(key)}: {message}")

    def has(self, key: str) -> bool:
        return self.config.get(key) is not None

    def int(self, key: str, default: int | None = None, *, allow_zero: bool = False, upper: int = _MAX_DIM) -> int:
        value = self.config.get(key)
        if value is None:
            if default is None:
                raise self.error(key, "missing (a required integer)")
            return default
        return positive_int(self.name(key), value, upper=upper, allow_zero=allow_zero)

    def auto_int(self, key: str, auto: int) -> int:
        """An integer field that may say ``"auto"`` (or be absent) for ``auto``."""
        if self.config.get(key) == "auto":
            return auto
        return self.int(key, auto)

    def number(self, key: str, *, upper: float) -> float:
        value = self.config.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or not 0 < value <= upper:
            raise self.error(key, f"expected a number > 0 and <= {upper:g}, got {value!r}")
        return float(value)

    def str(self, key: str, default: str | None = None) -> str:
        value = self.config.get(key)
        if value is None:
            if default is None:
                raise self.error(key, "missing (a required string)")
            return default
        if not isinstance(value, str):
            raise self.error(key, f"expected a string, got {value!r}")
        return value

    def bool(self, key: str, default: bool) -> bool:
        """A JSON boolean (``true``/``false``); a string such as ``"false"`` is refused, not read as true."""
        value = self.config.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.error(key, f"expected true or false (a JSON boolean), got {value!r}")
        return value

    def dtype_bytes(self, key: str, default: int) -> int:
        value = self.config.get(key)
        if value is None:
            return default
        return _dtype_bytes(self.name(key), value)

    def int_list(self, key: str, *, upper: int) -> list[int]:
        value = self.config.get(key)
        if not isinstance(value, list):
            raise self.error(key, f"expected a list of layer indices, got {value!r}")
        return [positive_int(f"{self.name(key)}[{i}]", v, upper=upper, allow_zero=True) for i, v in enumerate(value)]

    def word_list(self, key: str, n: int, allowed: tuple[str, ...]) -> list[str]:
        """A list of ``n`` words (``layer_types``), each one of ``allowed``."""
        value = self.config.get(key)
        if not isinstance(value, list) or len(value) != n:
            got = f"{len(value)} entries" if isinstance(value, list) else repr(value)
            raise self.error(key, f"expected a list of {n} entries (num_hidden_layers), got {got}")
        for i, word in enumerate(value):
            if word not in allowed:
                raise ConfigError(f"{self.name(key)}[{i}]: expected one of {', '.join(allowed)}; got {word!r}")
        return list(value)


def model_from_config(config: Mapping[str, Any], *, name: str = "custom", source: str = "") -> ModelSpec:
    """Build a :class:`ModelSpec` from a parsed Hugging Face config mapping."""
    where = source or "config"
    if not isinstance(config, Mapping):
        raise ConfigError(f"{where}: expected a JSON object at the top level, got {type(config).__name__}")
    prefix = ""
    cfg = config
    if isinstance(config.get("text_config"), Mapping):
        cfg, prefix = config["text_config"], "text_config."
    elif config.get("text_config") is not None:
        raise ConfigError(f"{where}: text_config: expected a JSON object, got {config.get('text_config')!r}")
    f = _Fields(cfg, where, prefix)
    model_type = f.str("model_type", "") or (_Fields(config, where).str("model_type", "") if prefix else "")
    dtype_field = "torch_dtype" if f.has("torch_dtype") else "dtype"
    top_dtype = next((k for k in ("torch_dtype", "dtype") if isinstance(config.get(k), str)), None)
    if not f.has(dtype_field) and prefix and top_dtype is not None:  # the outer config's, as transformers reads it
        dtype_bytes = _dtype_bytes(f"{where}: {top_dtype}", config[top_dtype])
    else:
        dtype_bytes = f.dtype_bytes(dtype_field, 2)
    if dtype_bytes == 4:  # vLLM serves a float32 checkpoint in bfloat16 (or float16) under --dtype auto
        dtype_bytes = 2

    family = _family_of(f, model_type)
    layers, ssm_bytes = _FAMILY_READERS[family](f, dtype_bytes, model_type)
    _check_sizes(layers, where)

    hidden = f.int("hidden_size")
    vocab = f.int("vocab_size", upper=100_000_000)
    return ModelSpec(
        name=name,
        family=family,
        hidden_size=hidden,
        vocab_size=vocab,
        dtype_bytes=dtype_bytes,
        kv_dtype_bytes=dtype_bytes,
        ssm_dtype_bytes=ssm_bytes,
        layers=tuple(layers),
        embedding_params=vocab * hidden,
        # A tied head is the embedding matrix, but decode still reads it once per step.
        lm_head_params=vocab * hidden,
        max_position_embeddings=_context(f),
        source=source,
    )


#: RoPE types whose ``max_position_embeddings`` already states the scaled context (vLLM applies no factor).
_ROPE_UNSCALED = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")
#: Keys of a ``rope_parameters`` nested by layer type (vLLM's ``is_rope_parameters_nested``).
_ROPE_NESTING = ("full_attention", "sliding_attention", "linear_attention", "chunked_attention", "main", "compress")


def _context(f: _Fields) -> int | None:
    """The longest context vLLM lets the model serve (the largest
    ``max_model_len``; vLLM's ``_get_and_verify_max_len``):
    ``max_position_embeddings``, times the RoPE ``factor`` of
    ``rope_parameters`` (transformers 5; else ``rope_scaling``) unless the
    RoPE type already states the scaled length (YaRN, LongRoPE, Llama 3, ...)."""
    if not f.has("max_position_embeddings"):
        return None
    length = f.int("max_position_embeddings", upper=_MAX_CONTEXT)
    key = "rope_parameters" if f.has("rope_parameters") else "rope_scaling"
    rope = f.config.get(key)
    if rope is None:
        return length
    if not isinstance(rope, Mapping):
        raise f.error(key, f"expected an object (or null), got {rope!r}")
    nested = bool(rope) and all(k in _ROPE_NESTING for k in rope)
    factor = 1.0
    for name, params in (rope.items() if nested else [("", rope)]):
        where = f"{f.prefix}{key}." + (f"{name}." if name else "")
        if not isinstance(params, Mapping):
            raise ConfigError(f"{f.where}: {where.rstrip('.')}: expected an object, got {params!r}")
        kind = params.get("rope_type", params.get("type", "default"))
        if not isinstance(kind, str):
            raise ConfigError(f"{f.where}: {where}rope_type: expected a string, got {kind!r}")
        if kind not in _ROPE_UNSCALED and params.get("factor") is not None:
            factor = _Fields(params, f.where, where).number("factor", upper=1e6)
    return min(int(length * factor), _MAX_CONTEXT)


# ------------------------------------------------------------ building blocks


def _attention(f: _Fields, dtype_bytes: int, *, gated_q: bool = False, window: int = 0,
               head_dim_keys: tuple[str, ...] = ("head_dim", "attention_head_dim")) -> dict[str, int]:
    """An attention mixer; its head size from the first of ``head_dim_keys``
    the config sets (``attention_head_dim`` is Nemotron-H's name), else
    ``hidden_size / num_attention_heads`` (all Granite-4.0-H reads)."""
    hidden = f.int("hidden_size")
    heads = f.int("num_attention_heads")
    kv_heads = f.int("num_key_value_heads", heads)
    if heads % kv_heads:
        raise f.error("num_key_value_heads", f"expected a divisor of num_attention_heads ({heads}), got {kv_heads}")
    key = next((k for k in head_dim_keys if f.has(k)), None)
    if key is not None:
        head_dim = f.int(key)
    else:
        if hidden % heads:
            raise f.error("head_dim", f"missing, and hidden_size ({hidden}) is not a multiple of "
                          f"num_attention_heads ({heads})")
        head_dim = hidden // heads
    q_out = heads * head_dim * (2 if gated_q else 1)
    params = hidden * q_out + 2 * hidden * kv_heads * head_dim + heads * head_dim * hidden
    return {
        "kv_bytes_per_token": 2 * kv_heads * head_dim * dtype_bytes,
        "query_heads": heads,
        "kv_heads": kv_heads,
        "mixer_params": params,
        "attention_width": heads * head_dim,
        "kv_window_tokens": window,
    }


def _ffn(f: _Fields, *, moe: bool, gated: bool, shared_key: str = "shared_expert_intermediate_size",
         expert_key: str = "moe_intermediate_size", dense_key: str = "intermediate_size",
         defaults: tuple[int, int] | None = None) -> dict[str, int]:
    """A dense MLP of ``dense_key`` width, or routed experts of ``expert_key``
    width (``intermediate_size`` where the config has no ``expert_key``, as
    Mixtral, Jamba, Granite and gpt-oss write it) plus a router and a shared
    expert of ``shared_key`` width. ``defaults`` are the family's
    ``(experts, experts per token)`` where the config leaves them out."""
    hidden = f.int("hidden_size")
    mats = 3 if gated else 2
    if not moe:
        return {"ffn_dense_params": mats * hidden * f.int(dense_key)}
    experts_key = next((k for k in ("num_experts", "n_routed_experts", "num_local_experts") if f.has(k)), "num_experts")
    num_experts = f.int(experts_key, defaults and defaults[0])
    top_key = next((k for k in ("num_experts_per_tok", "experts_per_token") if f.has(k)), "num_experts_per_tok")
    top_k = f.int(top_key, defaults and defaults[1])
    if top_k > num_experts:
        raise f.error(top_key, f"expected at most {experts_key} ({num_experts}), got {top_k}")
    expert_width = f.int(expert_key if f.has(expert_key) else "intermediate_size")
    shared_width = f.int(shared_key, 0, allow_zero=True)
    return {
        "ffn_dense_params": mats * hidden * shared_width + hidden * num_experts,
        "expert_params": mats * hidden * expert_width,
        "num_experts": num_experts,
        "experts_per_token": top_k,
    }


def _kernel(f: _Fields, key: str) -> int:
    kernel = f.int(key, 4)
    if kernel < 2:
        raise f.error(key, f"expected an integer >= 2, got {kernel}")
    return kernel


def _mamba2(f: _Fields, dtype_bytes: int, ssm_bytes: int, *, heads: int, head_dim: int, inner: int, groups: int,
            state: int, kernel: int, keys: tuple[str, str]) -> dict[str, int]:
    """A Mamba-2 mixer (vLLM's ``MambaStateShapeCalculator.mamba2_state_shape``):
    temporal state ``heads x head_dim x state`` in the ssm dtype, conv tail
    ``(kernel - 1) x (inner + 2 x groups x state)`` in the model dtype.
    ``keys`` name the heads and groups fields for messages."""
    heads_key, groups_key = keys
    if heads % groups:
        raise f.error(groups_key, f"expected a divisor of {heads_key} ({heads}), got {groups}")
    hidden = f.int("hidden_size")
    conv_dim = inner + 2 * groups * state
    return {
        "ssm_bytes": heads * head_dim * state * ssm_bytes,
        "conv_bytes": (kernel - 1) * conv_dim * dtype_bytes,
        "conv_rows": kernel - 1,
        "mixer_params": hidden * (2 * inner + 2 * groups * state + heads) + conv_dim * kernel + inner * hidden,
        "recurrent_state_elems": heads * head_dim * state,
        "state_heads": heads,
        "conv_channels": conv_dim,
        "conv_groups": groups,
        "group_channels": 2 * state,
    }


def _mamba2_from(f: _Fields, dtype_bytes: int, ssm_bytes: int, *, d_ssm: bool = False) -> dict[str, int]:
    """Mamba-2 as Bamba, Granite-4.0-H and Falcon-H1 write it (``mamba_*``
    fields; ``mamba_d_head: "auto"`` is the inner width over the heads). The
    inner width is ``mamba_expand x hidden_size``; with ``d_ssm`` (Falcon-H1)
    ``mamba_d_ssm`` when the config sets it, as each vLLM model reads it."""
    hidden = f.int("hidden_size")
    inner = f.int("mamba_d_ssm") if d_ssm and f.has("mamba_d_ssm") else f.int("mamba_expand", 2) * hidden
    heads = f.int("mamba_n_heads", 128)
    if inner % heads and (not d_ssm or f.config.get("mamba_d_head", "auto") == "auto"):  # as transformers refuses
        raise f.error("mamba_n_heads", f"expected a divisor of the Mamba inner width ({inner}), got {heads}")
    head_dim = f.auto_int("mamba_d_head", inner // heads)
    return _mamba2(f, dtype_bytes, ssm_bytes, heads=heads, head_dim=head_dim, inner=inner,
                   groups=f.int("mamba_n_groups", 1), state=f.int("mamba_d_state", 256),
                   kernel=_kernel(f, "mamba_d_conv"), keys=("mamba_n_heads", "mamba_n_groups"))


def _mamba1(f: _Fields, dtype_bytes: int, ssm_bytes: int) -> dict[str, int]:
    """A Mamba-1 mixer as Jamba writes it (vLLM's ``mamba1_state_shape``):
    temporal state ``inner x d_state``, conv tail ``(d_conv - 1) x inner``,
    ``inner = mamba_expand x hidden_size``."""
    hidden = f.int("hidden_size")
    inner = f.int("mamba_expand", 2) * hidden
    state = f.int("mamba_d_state", 16)
    kernel = _kernel(f, "mamba_d_conv")
    dt_rank = f.auto_int("mamba_dt_rank", math.ceil(hidden / 16))
    return {
        "ssm_bytes": inner * state * ssm_bytes,
        "conv_bytes": (kernel - 1) * inner * dtype_bytes,
        "conv_rows": 0,  # mamba1_state_shape takes no num_spec: the tail does not grow with speculative tokens
        # in_proj (x and gate), conv, x_proj (dt, B, C), dt_proj, A and D, out_proj
        "mixer_params": hidden * 2 * inner + inner * kernel + inner * (dt_rank + 2 * state) + dt_rank * inner
        + inner * state + inner + inner * hidden,
        "recurrent_state_elems": inner * state,
        "state_heads": inner,
        "conv_channels": inner,
    }


#: Largest state one layer may hold for one request (recurrent state, conv tail; today's largest are a few MB),
#: KV one layer may add per token (today's largest, full multi-head attention, about 32 kB), and weights one
#: layer may have: so that fields each within range cannot multiply into exabytes.
_MAX_LAYER_STATE_BYTES = 1e10
_MAX_LAYER_KV_BYTES_PER_TOKEN = 1e7
_MAX_LAYER_PARAMS = 1e13


def _check_sizes(layers: list[LayerSpec], where: str) -> None:
    """Refuse a layer whose state or weights, products of fields each within range, are beyond any GPU."""
    for layer in layers:
        for key, cap, fields in (
                ("kv_bytes_per_token", _MAX_LAYER_KV_BYTES_PER_TOKEN, "num_key_value_heads x head_dim"),
                ("ssm_bytes", _MAX_LAYER_STATE_BYTES, "the recurrent heads x head size x state size"),
                ("conv_bytes", _MAX_LAYER_STATE_BYTES, "the conv kernel x channels"),
                ("mixer_params", _MAX_LAYER_PARAMS, "the hidden, head and state sizes"),
                ("expert_params", _MAX_LAYER_PARAMS, "hidden_size x the expert width")):
            if getattr(layer, key) > cap:
                raise ConfigError(f"{where}: layer {layer.index}: {key.replace('_', ' ')} would be "
                                  f"{getattr(layer, key):.3g}, beyond {cap:g}; check {fields}")


def _layer(i: int, mixer: str, ffn: str, *parts: Mapping[str, int]) -> LayerSpec:
    merged: dict[str, int] = {}
    for part in parts:
        for k, v in part.items():
            merged[k] = merged.get(k, 0) + v if k == "mixer_params" else v

    kind = mixer if mixer != "none" else ("mlp" if ffn == "dense" else "moe")
    return LayerSpec(index=i, kind=kind, mixer=mixer, ffn=ffn, **merged)


def _ssm_dtype(f: _Fields, dtype_bytes: int, model_type: str) -> int:
    """The temporal state's dtype under vLLM's default ``--mamba-ssm-cache-dtype
    auto`` (``MambaStateDtypeCalculator``: the conv dtype, i.e. the model
    dtype), except where a model's config hook says otherwise: Nemotron-H
    takes the config's ``mamba_ssm_cache_dtype``, else float32; Qwen3.5 /
    Qwen3.6 the config's ``mamba_ssm_dtype``. Other families' config fields
    are not read by vLLM, so not here either."""
    if model_type.startswith("nemotron_h"):
        return f.dtype_bytes("mamba_ssm_cache_dtype", 4)
    if model_type.startswith("qwen3_5"):
        return f.dtype_bytes("mamba_ssm_dtype", dtype_bytes)
    return dtype_bytes


# ------------------------------------------------------------ families


def _qwen3_next(f: _Fields, dtype_bytes: int, model_type: str) -> tuple[list[LayerSpec], int]:
    n = f.int("num_hidden_layers", upper=_MAX_LAYERS)
    if f.has("layer_types"):
        is_full = [t == "full_attention" for t in f.word_list("layer_types", n, ("full_attention", "linear_attention"))]
    else:  # every fourth layer full attention unless the config says otherwise (transformers' and vLLM's default)
        interval = f.int("full_attention_interval", 4, upper=_MAX_LAYERS)
        is_full = [(i + 1) % interval == 0 for i in range(n)]
    # a config naming no model_type but read as this family keeps its own mamba_ssm_dtype, as Qwen3.5/3.6's does
    ssm_bytes = _ssm_dtype(f, dtype_bytes, model_type or "qwen3_5")
    hidden = f.int("hidden_size")
    key_heads = f.int("linear_num_key_heads")
    value_heads = f.int("linear_num_value_heads")
    key_dim = f.int("linear_key_head_dim")
    value_dim = f.int("linear_value_head_dim")
    kernel = _kernel(f, "linear_conv_kernel_dim")
    conv_dim = 2 * key_heads * key_dim + value_heads * value_dim
    gdn = {
        "ssm_bytes": value_heads * key_dim * value_dim * ssm_bytes,
        "conv_bytes": (kernel - 1) * conv_dim * dtype_bytes,
        "conv_rows": kernel - 1,
        "mixer_params": hidden * (2 * key_heads * key_dim + 2 * value_heads * value_dim)
        + hidden * 2 * value_heads
        + conv_dim * kernel
        + value_heads * value_dim * hidden,
        "recurrent_state_elems": value_heads * key_dim * value_dim,
        "state_heads": value_heads,
        "conv_channels": conv_dim,
    }
    attn = _attention(f, dtype_bytes, gated_q=f.bool("attn_output_gate", True))
    moe = f.has("num_experts") and f.int("num_experts") > 1
    ffn = _ffn(f, moe=moe, gated=True)
    kind = "moe" if moe else "dense"
    return [_layer(i, "attention" if full else "gdn", kind, attn if full else gdn, ffn)
            for i, full in enumerate(is_full)], ssm_bytes


#: layers_block_type words (as current transformers saves Nemotron-H) and their pattern characters.
_NEMOTRON_BLOCKS = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}


def _nemotron_pattern(f: _Fields) -> str:
    """``hybrid_override_pattern``, or the same read from ``layers_block_type`` (the list transformers 5
    writes instead, one of ``mamba``, ``attention``, ``mlp``, ``moe`` a layer)."""
    if f.has("hybrid_override_pattern") or not f.has("layers_block_type"):
        return f.str("hybrid_override_pattern")
    blocks = f.config["layers_block_type"]
    if not isinstance(blocks, list):
        raise f.error("layers_block_type", f"expected a list of {', '.join(_NEMOTRON_BLOCKS)}, got {type(blocks).__name__}")
    for i, b in enumerate(blocks):
        if not isinstance(b, str) or b not in _NEMOTRON_BLOCKS:
            raise ConfigError(f"{f.name('layers_block_type')}[{i}]: expected one of {', '.join(_NEMOTRON_BLOCKS)}; got {b!r}")
    return "".join(_NEMOTRON_BLOCKS[b] for b in blocks)


def _nemotron_h(f: _Fields, dtype_bytes: int, model_type: str) -> tuple[list[LayerSpec], int]:
    pattern = _nemotron_pattern(f)
    # transformers 5 writes layers_block_type and no num_hidden_layers (a property there: the list's length)
    listed = not f.has("hybrid_override_pattern") and f.has("layers_block_type")
    if listed and not f.has("num_hidden_layers"):
        if not 0 < len(pattern) <= _MAX_LAYERS:
            raise f.error("layers_block_type", f"expected 1 to {_MAX_LAYERS:,} layers, got {len(pattern):,}")
        return _nemotron_layers(f, dtype_bytes, model_type, pattern)
    n = f.int("num_hidden_layers", upper=_MAX_LAYERS)
    if len(pattern) != n:
        key = "layers_block_type" if listed else "hybrid_override_pattern"
        raise f.error(key, f"expected {n} {'entries' if listed else 'characters'} (num_hidden_layers), "
                           f"got {len(pattern)}")
    return _nemotron_layers(f, dtype_bytes, model_type, pattern)


def _nemotron_layers(f: _Fields, dtype_bytes: int, model_type: str, pattern: str) -> tuple[list[LayerSpec], int]:
    for i, ch in enumerate(pattern):
        if ch not in "M*-E":
            raise ConfigError(f"{f.name('hybrid_override_pattern')}[{i}]: expected M (Mamba-2), * (attention), "
                              f"- (MLP) or E (MoE); got {ch!r}")
    ssm_bytes = _ssm_dtype(f, dtype_bytes, model_type or "nemotron_h")
    gated = f.str("mlp_hidden_act", "relu2") not in ("relu2", "relu", "gelu")
    parts: dict[str, dict[str, int]] = {}
    if "M" in pattern:
        heads, head_dim = f.int("mamba_num_heads"), f.int("mamba_head_dim")
        parts["M"] = _mamba2(f, dtype_bytes, ssm_bytes, heads=heads, head_dim=head_dim, inner=heads * head_dim,
                             groups=f.int("n_groups", 8),  # transformers' NemotronHConfig default
                             state=f.int("ssm_state_size"), kernel=_kernel(f, "conv_kernel"),
                             keys=("mamba_num_heads", "n_groups"))
    if "*" in pattern:
        parts["*"] = _attention(f, dtype_bytes)
    if "-" in pattern:
        parts["-"] = _ffn(f, moe=False, gated=gated)
    if "E" in pattern:
        parts["E"] = _ffn(f, moe=True, gated=gated, shared_key="moe_shared_expert_intermediate_size")
    kinds = {"M": ("mamba2", "none"), "*": ("attention", "none"), "-": ("none", "dense"), "E": ("none", "moe")}
    return [_layer(i, *kinds[ch], parts[ch]) for i, ch in enumerate(pattern)], ssm_bytes


def _jamba(f: _Fields, dtype_bytes: int, model_type: str) -> tuple[list[LayerSpec], int]:
    n = f.int("num_hidden_layers", upper=_MAX_LAYERS)
    attn_period = f.int("attn_layer_period", 8, upper=_MAX_LAYERS)
    attn_offset = f.int("attn_layer_offset", 4, allow_zero=True, upper=_MAX_LAYERS)
    expert_period = f.int("expert_layer_period", 2, upper=_MAX_LAYERS)
    expert_offset = f.int("expert_layer_offset", 1, allow_zero=True, upper=_MAX_LAYERS)
    for key, offset, period in (("attn_layer_offset", attn_offset, attn_period),
                                ("expert_layer_offset", expert_offset, expert_period)):
        if offset >= period:
            raise f.error(key, f"expected less than its period ({period}), got {offset}")
    ssm_bytes = _ssm_dtype(f, dtype_bytes, model_type)
    attn, mamba = _attention(f, dtype_bytes), _mamba1(f, dtype_bytes, ssm_bytes)
    moe = f.int("num_experts", 16) > 1
    expert_ffn = _ffn(f, moe=True, gated=True, defaults=(16, 2)) if moe else None
    dense_ffn = _ffn(f, moe=False, gated=True)
    layers = []
    for i in range(n):
        is_attn = i % attn_period == attn_offset
        is_moe = moe and i % expert_period == expert_offset
        layers.append(_layer(i, "attention" if is_attn else "mamba1", "moe" if is_moe else "dense",
                             attn if is_attn else mamba, expert_ffn if is_moe else dense_ffn))
    return layers, ssm_bytes


def _falcon_h1(f: _Fields, dtype_bytes: int, model_type: str) -> tuple[list[LayerSpec], int]:
    n = f.int("num_hidden_layers", upper=_MAX_LAYERS)
    ssm_bytes = _ssm_dtype(f, dtype_bytes, model_type)
    attn = _attention(f, dtype_bytes)
    mamba = _mamba2_from(f, dtype_bytes, ssm_bytes, d_ssm=True)
    ffn = _ffn(f, moe=False, gated=True)
    parallel = {**mamba, **{k: v for k, v in attn.items() if k != "mixer_params"},
                "mixer_params": attn["mixer_params"] + mamba["mixer_params"], "attention_params": attn["mixer_params"]}
    return [_layer(i, "attention+mamba2", "dense", parallel, ffn) for i in range(n)], ssm_bytes


def _granite_h(f: _Fields, dtype_bytes: int, model_type: str) -> tuple[list[LayerSpec], int]:
    n = f.int("num_hidden_layers", upper=_MAX_LAYERS)
    # transformers 4 writes mamba / attention, transformers 5 linear_attention / full_attention
    words = ("mamba", "attention", "linear_attention", "full_attention")
    types = f.word_list("layer_types", n, words) if f.has("layer_types") else ["mamba"] * n
    types = ["attention" if t in ("attention", "full_attention") else "mamba" for t in types]
    ssm_bytes = _ssm_dtype(f, dtype_bytes, model_type)
    parts = {"mamba": _mamba2_from(f, dtype_bytes, ssm_bytes) if "mamba" in types else {},
             "attention": _attention(f, dtype_bytes, head_dim_keys=()) if "attention" in types else {}}
    # transformers' GraniteMoeHybridConfig defaults: 8 experts, top 2, a shared MLP 1,024 wide
    moe = f.int("num_local_experts", 8, allow_zero=True) > 0
    shared = f.int("shared_intermediate_size", 1024, allow_zero=True)
    if moe:  # routed experts of intermediate_size plus a shared expert of shared_intermediate_size
        ffn = _ffn(f, moe=True, gated=True, shared_key="shared_intermediate_size", defaults=(8, 2))
        ffn["ffn_dense_params"] += 0 if f.has("shared_intermediate_size") else 3 * f.int("hidden_size") * shared
    elif shared:  # the shared MLP alone
        ffn = _ffn(f, moe=False, gated=True, dense_key="shared_intermediate_size")
    else:
        raise f.error("shared_intermediate_size", "expected a positive width when num_local_experts is 0 "
                      "(a layer needs an MLP)")
    kind = "moe" if moe else "dense"
    return [_layer(i, "mamba2" if t == "mamba" else "attention", kind, parts[t], ffn) for i, t in enumerate(types)], \
        ssm_bytes


def _bamba(f: _Fields, dtype_bytes: int, model_type: str) -> tuple[list[LayerSpec], int]:
    n = f.int("num_hidden_layers", upper=_MAX_LAYERS)
    attn_at = set(f.int_list("attn_layer_indices", upper=n - 1)) if f.has("attn_layer_indices") else set()
    ssm_bytes = _ssm_dtype(f, dtype_bytes, model_type)
    attn = _attention(f, dtype_bytes) if attn_at else {}
    # vLLM's last Bamba (0.23) sized the conv tail without num_spec: no speculative rows
    mamba = {**_mamba2_from(f, dtype_bytes, ssm_bytes), "conv_rows": 0}
    ffn = _ffn(f, moe=False, gated=True)
    return [_layer(i, "attention" if i in attn_at else "mamba2", "dense", attn if i in attn_at else mamba, ffn)
            for i in range(n)], ssm_bytes


#: Dense model types whose vLLM model windows layer by layer from ``layer_types`` (llama.py; Mistral is a Llama).
_PER_LAYER_WINDOWS = ("llama", "mistral")
#: Dense model types whose ``sliding_window`` counts only with ``use_sliding_window`` (transformers' Qwen2/Qwen3 configs).
_QWEN_WINDOWS = ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe")


def _windows(f: _Fields, n: int, model_type: str) -> list[int]:
    """The KV window of every layer (0 for full attention), as vLLM applies
    ``sliding_window``: gpt-oss windows every even layer (its model ignores
    ``layer_types``); otherwise a window on every layer when ``layer_types``
    is absent or all ``sliding_attention`` (the engine's cache-wide window,
    ``EngineArgs.create_engine_config``); a mix is honoured layer by layer
    by Llama and Mistral, refused by Qwen2/Qwen3 unless ``max_window_layers``
    covers every layer (then served as full attention), and served as full
    attention by Mixtral. Qwen2/Qwen3 configs derive ``layer_types`` from
    ``use_sliding_window`` and ``max_window_layers`` as transformers does."""
    types = f.word_list("layer_types", n, ("full_attention", "sliding_attention")) if f.has("layer_types") else None
    window_key = "sliding_window"
    if model_type in _QWEN_WINDOWS and not f.bool("use_sliding_window", False):
        return [0] * n  # transformers drops the window without use_sliding_window
    window = f.int(window_key, upper=_MAX_CONTEXT) if f.has(window_key) else 0
    if model_type == "gpt_oss":
        if not window:
            raise f.error(window_key, "missing (a required integer: gpt-oss windows every even layer)")
        return [window if i % 2 == 0 else 0 for i in range(n)]
    start = None
    if model_type in _QWEN_WINDOWS:
        start = f.int("max_window_layers", 28, allow_zero=True, upper=_MAX_LAYERS)  # transformers' default
        if types is None and window:
            types = ["sliding_attention" if i >= start else "full_attention" for i in range(n)]
    if types is None or all(t == "sliding_attention" for t in types):
        if types is not None and not window:
            raise f.error(window_key, "missing (a required integer: layer_types has sliding_attention layers)")
        return [window] * n
    if "sliding_attention" not in types:
        return [0] * n
    if model_type in _PER_LAYER_WINDOWS or not model_type:
        if not window:
            raise f.error(window_key, "missing (a required integer: layer_types has sliding_attention layers)")
        return [window if t == "sliding_attention" else 0 for t in types]
    if start is not None and start != n:
        raise f.error("max_window_layers", f"{start} windows some but not all of the {n} layers; vLLM's "
                      f"{model_type} model refuses it (set it to 0 or num_hidden_layers)")
    return [0] * n  # a mixed layout this model serves with full attention


def _dense(f: _Fields, dtype_bytes: int, model_type: str) -> tuple[list[LayerSpec], int]:
    n = f.int("num_hidden_layers", upper=_MAX_LAYERS)
    if not f.has("num_attention_heads"):
        raise f.error("num_attention_heads", "missing; the config matches no supported family "
                      f"(supported: {'; '.join(SUPPORTED_FAMILIES)})")
    windows = _windows(f, n, model_type)
    moe = any(f.has(k) and f.int(k) > 1 for k in ("num_experts", "num_local_experts", "n_routed_experts"))
    ffn = _ffn(f, moe=moe, gated=f.str("hidden_act", "silu") not in ("relu2", "relu", "gelu"))
    attn = {w: _attention(f, dtype_bytes, window=w) for w in set(windows)}
    return [_layer(i, "attention", "moe" if moe else "dense", attn[w], ffn) for i, w in enumerate(windows)], dtype_bytes


Reader = Callable[[_Fields, int, str], "tuple[list[LayerSpec], int]"]
_FAMILY_READERS: dict[str, Reader] = {
    "qwen3-next": _qwen3_next, "nemotron-h": _nemotron_h, "jamba": _jamba, "falcon-h1": _falcon_h1,
    "granite-h": _granite_h, "bamba": _bamba, "dense": _dense,
}
#: model_type -> family (Qwen3.5 and Qwen3.6 write qwen3_5*, Nemotron-H nemotron_h*).
_BY_PREFIX = (("nemotron_h", "nemotron-h"), ("qwen3_next", "qwen3-next"), ("qwen3_5", "qwen3-next"))
_BY_TYPE = {"jamba": "jamba", "falcon_h1": "falcon-h1", "granitemoehybrid": "granite-h", "bamba": "bamba",
            **dict.fromkeys(("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gpt_oss"),
                            "dense")}
#: Hybrid architectures vLLM serves that depgraph does not read, named in the refusal.
UNSUPPORTED_ARCHITECTURES = {"zamba2": "Zamba2", "plamo2": "PLaMo2", "lfm2": "LFM2", "minimax_m1": "MiniMax-M1",
                             "mamba": "Mamba (pure Mamba-1)", "mamba2": "Mamba2 (pure Mamba-2)",
                             "falcon_mamba": "FalconMamba", "phi4flash": "Phi-4-mini-flash"}
SUPPORTED_FAMILIES = (
    "Qwen3-Next / Qwen3.5 / Qwen3.6 (qwen3_next, qwen3_5*)",
    "Nemotron-H (nemotron_h)",
    "Jamba (jamba)",
    "Falcon-H1 (falcon_h1)",
    "Granite-4.0-H (granitemoehybrid)",
    "Bamba (bamba)",
    "dense or MoE attention, sliding windows included (llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, "
    "qwen3_moe, gpt_oss)",
)


def _family_of(f: _Fields, model_type: str) -> str:
    """The family a config is read as: by its ``model_type``, never another
    family's; by its fields only where it names none."""
    for prefix, family in _BY_PREFIX:
        if model_type.startswith(prefix):
            return family
    if model_type in _BY_TYPE:
        return _BY_TYPE[model_type]
    if model_type:
        known = f" ({UNSUPPORTED_ARCHITECTURES[model_type]})" if model_type in UNSUPPORTED_ARCHITECTURES else ""
        raise f.error("model_type", f"{model_type!r}{known} is not a supported architecture; "
                      f"supported: {'; '.join(SUPPORTED_FAMILIES)}")
    if f.has("hybrid_override_pattern") or f.has("layers_block_type"):
        return "nemotron-h"
    if f.has("full_attention_interval") or f.has("linear_num_value_heads") or (
            isinstance(f.config.get("layer_types"), list) and "linear_attention" in f.config["layer_types"]):
        return "qwen3-next"
    if f.has("attn_layer_period"):
        return "jamba"
    if f.has("attn_layer_indices"):
        return "bamba"
    return "dense"
