"""Model catalog and Hugging Face ``config.json`` loader.

A :class:`ModelSpec` is derived entirely from config fields: the kind of
every layer, the bytes each handoff component occupies (``kv`` per prompt
token, ``ssm`` and ``conv`` per request) and the parameter counts the cost
model needs. Three families are understood:

* Qwen3-Next / Qwen3.5 / Qwen3.6 (``layer_types`` or
  ``full_attention_interval``; Gated DeltaNet linear attention plus full
  attention, fields possibly nested under ``text_config``);
* Nemotron-H (``hybrid_override_pattern``: ``M`` Mamba-2, ``*`` attention,
  ``-`` MLP, ``E`` MoE);
* dense (or MoE) transformers in the Llama / Qwen3 style.

Examples
--------
>>> import depgraph as dg
>>> m = dg.load_model("Qwen3.6-35B-A3B")
>>> m.num_layers, m.count_kinds()
(40, {'gdn': 30, 'attention': 10})
>>> dg.handoff_bytes(m, prompt_tokens=1024)
{'kv': 20971520, 'ssm': 62914560, 'conv': 1474560}
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from .._files import read_limited
from .._validate import parse_json, positive_int
from ..errors import ConfigError

__all__ = [
    "LayerSpec",
    "ModelSpec",
    "COMPONENTS",
    "catalog",
    "load_model",
    "model_from_config",
    "handoff_bytes",
    "handoff_bytes_per_rank",
    "MAX_CONFIG_FILE_BYTES",
]

#: Largest ``config.json`` read, in bytes (default 8 MiB). A Hugging Face
#: config is a few kilobytes; one listing ``layer_types`` for 10,000 layers
#: and a long quantization section stays well under 1 MB. A larger file (or
#: a FIFO, a directory, ``/dev/zero``) is refused before it is parsed.
MAX_CONFIG_FILE_BYTES = 8 * 1024 * 1024

#: Handoff components, in the order they are sent within a layer. The conv
#: tail goes before the recurrent state so that it can arrive first (the
#: study's only case where a component signal can help).
COMPONENTS: tuple[str, ...] = ("kv", "conv", "ssm")

_DTYPE_BYTES = {
    "float32": 4, "fp32": 4, "float": 4,
    "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "half": 2,
    "float8": 1, "fp8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "int8": 1,
}

#: Largest config values accepted, so that a typo cannot ask for petabytes.
_MAX_DIM = 1_000_000
_MAX_LAYERS = 10_000


@dataclass(frozen=True, slots=True)
class LayerSpec:
    """One decoder layer: its kind, handoff state and parameter counts.

    ``mixer`` is ``"attention"``, ``"gdn"`` (Gated DeltaNet), ``"mamba2"`` or
    ``"none"``; ``ffn`` is ``"dense"``, ``"moe"`` or ``"none"``. ``kind`` is
    the mixer when there is one, else the ffn (``"mlp"`` or ``"moe"``).
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
    # how tensor parallelism shards the state (vLLM's rules: docs/calibration.md, "tensor parallelism")
    query_heads: int = 0  # attention: query heads (each rank needs a whole number)
    kv_heads: int = 0  # attention: KV heads (split across ranks, replicated when fewer than ranks)
    state_heads: int = 0  # recurrent: the heads the temporal state is split along
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

    def sharded_bytes(self, component: str, prompt_tokens: int, tp: int) -> tuple[int, int]:
        """``(bytes on one rank, bytes on all tp ranks)`` of one component at
        tensor-parallel size ``tp``, as vLLM shards it: KV heads split and
        replicated when fewer than the ranks (``max(1, kv_heads // tp)`` per
        rank), the recurrent state split by heads, the conv tail by channels
        (a single shared Mamba-2 group padded to one per rank). A ``tp`` vLLM
        could not shard is refused naming the field."""
        if component == "kv":
            if not self.kv_bytes_per_token:
                return 0, 0
            _divides(tp, self.query_heads, "num_attention_heads", self.index)
            if self.kv_heads % tp and tp % self.kv_heads:
                raise ConfigError(f"tp: {tp} neither divides nor is a multiple of num_key_value_heads "
                                  f"({self.kv_heads}) of layer {self.index}; vLLM cannot shard it")
            rank = max(1, self.kv_heads // tp) * (self.kv_bytes_per_token // self.kv_heads) * prompt_tokens
            return rank, rank * tp
        if component == "ssm":
            if not self.ssm_bytes:
                return 0, 0
            _divides(tp, self.state_heads, "the recurrent heads", self.index)
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
            total = self.conv_bytes // self.conv_channels * channels
            return total // tp, total
        raise ConfigError(f"component: expected one of {', '.join(COMPONENTS)}; got {component!r}")

    def component_bytes(self, component: str, prompt_tokens: int) -> int:
        """Bytes of one component of this layer for a prompt of ``prompt_tokens``."""
        if component == "kv":
            return self.kv_bytes_per_token * prompt_tokens
        if component == "ssm":
            return self.ssm_bytes
        if component == "conv":
            return self.conv_bytes
        raise ConfigError(f"component: expected one of {', '.join(COMPONENTS)}; got {component!r}")


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A model as the handoff sees it. Build with :func:`load_model`."""

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
    #: The longest context the model takes (its ``max_position_embeddings``), if the config says.
    max_position_embeddings: int | None = None
    source: str = field(default="", compare=False)

    def check_context(self, tokens: int, *, field: str = "prompt_tokens", what: str = "a prompt") -> int:
        """``tokens``, or a ConfigError where they exceed the model's context."""
        if self.max_position_embeddings is not None and tokens > self.max_position_embeddings:
            raise ConfigError(f"{field}: {what} of {tokens:,} tokens is longer than {self.name}'s context of "
                              f"{self.max_position_embeddings:,} tokens (max_position_embeddings)")
        return tokens

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def kv_bytes_per_token(self) -> int:
        return sum(layer.kv_bytes_per_token for layer in self.layers)

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
        """The same model with its KV cache stored in ``kv_dtype`` (e.g. ``"fp8"``)."""
        new_bytes = _dtype_bytes("kv_dtype", kv_dtype)
        layers = tuple(
            replace(layer, kv_bytes_per_token=layer.kv_bytes_per_token // self.kv_dtype_bytes * new_bytes)
            for layer in self.layers
        )
        return replace(self, layers=layers, kv_dtype_bytes=new_bytes)


def _divides(tp: int, count: int, what: str, index: int) -> None:
    if count % tp:
        raise ConfigError(f"tp: {tp} does not divide {what} ({count}) of layer {index}; vLLM cannot shard it")


def handoff_bytes(model: ModelSpec, *, prompt_tokens: int, tp: int = 1) -> dict[str, int]:
    """Bytes of each handoff component for one request of ``prompt_tokens``,
    summed over the ``tp`` decode ranks (KV-head replication and group
    padding included; :func:`handoff_bytes_per_rank` gives one rank's).

    >>> import depgraph as dg
    >>> dg.handoff_bytes(dg.load_model("qwen3-32b"), prompt_tokens=1)["kv"]
    262144
    >>> dg.handoff_bytes(dg.load_model("qwen3.6-35b-a3b"), prompt_tokens=1024, tp=8)["kv"]  # 2 KV heads, 8 ranks
    83886080
    """
    if tp != 1:
        return _sharded(model, prompt_tokens, tp)[1]
    prompt_tokens = model.check_context(positive_int("prompt_tokens", prompt_tokens, upper=100_000_000))
    return {
        "kv": sum(layer.kv_bytes_per_token for layer in model.layers) * prompt_tokens,
        "ssm": sum(layer.ssm_bytes for layer in model.layers),
        "conv": sum(layer.conv_bytes for layer in model.layers),
    }


def handoff_bytes_per_rank(model: ModelSpec, *, prompt_tokens: int, tp: int = 1) -> dict[str, int]:
    """One decode rank's share of :func:`handoff_bytes` at tensor-parallel size ``tp``."""
    return _sharded(model, prompt_tokens, tp)[0]


def _sharded(model: ModelSpec, prompt_tokens: int, tp: int) -> tuple[dict[str, int], dict[str, int]]:
    prompt_tokens = model.check_context(positive_int("prompt_tokens", prompt_tokens, upper=100_000_000))
    tp = positive_int("tp", tp, upper=1024)
    rank = dict.fromkeys(("kv", "ssm", "conv"), 0)  # the order handoff_bytes gives
    total = dict(rank)
    for layer in model.layers:
        for c in rank:
            r, t = layer.sharded_bytes(c, prompt_tokens, tp)
            rank[c] += r
            total[c] += t
    return rank, total


# ---------------------------------------------------------------- catalog


def catalog() -> dict[str, str]:
    """Catalog names mapped to the config file shipped for each."""
    root = resources.files("depgraph.specs") / "data" / "models"
    return {p.name[: -len(".json")]: str(p) for p in sorted(root.iterdir(), key=lambda p: p.name) if p.name.endswith(".json")}


def load_model(name_or_path: str | Path, *, kv_dtype: str | None = None) -> ModelSpec:
    """Load a catalog model by name (case-insensitive) or a ``config.json`` path.

    Parameters
    ----------
    name_or_path
        ``"qwen3.6-35b-a3b"``, ``"nemotron-3-nano-30b-a3b"``, ``"qwen3-32b"``
        or the path of a Hugging Face ``config.json`` (or of a folder holding one).
    kv_dtype
        Store the KV cache in this dtype instead of the model dtype
        (``"fp8"``, ``"bfloat16"``, ...).

    >>> import depgraph as dg
    >>> dg.load_model("NEMOTRON-3-NANO-30B-A3B").count_kinds()
    {'mamba2': 23, 'moe': 23, 'attention': 6}
    >>> dg.load_model("qwen3-32b", kv_dtype="fp8").kv_bytes_per_token
    131072
    """
    if isinstance(name_or_path, ModelSpec):
        model = name_or_path
    else:
        if not isinstance(name_or_path, (str, Path)):
            raise ConfigError(f"model: expected a catalog name or a config.json path, got {name_or_path!r}")
        entries = catalog()
        key = str(name_or_path).strip().lower()
        if key in entries:
            path, name = Path(entries[key]), key
        else:
            path = config_path(name_or_path)
            if path is None:
                raise ConfigError(
                    f"model: {str(name_or_path)!r} is neither a catalog model ({', '.join(entries)}) "
                    "nor a readable config.json path"
                )
            name = path.parent.name if path.name == "config.json" else path.stem
        raw = read_limited(path, what="model config", max_bytes=MAX_CONFIG_FILE_BYTES,
                           cap="depgraph.specs.models.MAX_CONFIG_FILE_BYTES")
        model = model_from_config(parse_json(raw, where=str(path)), name=name, source=str(path))
    if kv_dtype is not None:
        model = model.with_kv_dtype(kv_dtype)
    return model


def config_path(path: str | Path) -> Path | None:
    """The ``config.json`` that :func:`load_model` reads for ``path`` (a
    folder means its ``config.json``), or ``None`` when nothing is there.
    What is there may still be refused when read (not a regular file, too
    large); a FIFO is not opened here."""
    try:
        path = Path(path)
        if path.is_dir():
            path = path / "config.json"
        return path if path.exists() else None
    except (OSError, ValueError):  # a name too long, an embedded NUL
        return None


# ---------------------------------------------------------------- parsing


class _Fields:
    """Typed access to a config mapping; errors name the file and field."""

    def __init__(self, config: Mapping[str, Any], where: str, prefix: str = "") -> None:
        self.config = config
        self.where = where
        self.prefix = prefix

    def _name(self, key: str) -> str:
        return f"{self.where}: {self.prefix}{key}"

    def has(self, key: str) -> bool:
        return self.config.get(key) is not None

    def int(self, key: str, default: int | None = None, *, allow_zero: bool = False, upper: int = _MAX_DIM) -> int:
        value = self.config.get(key)
        if value is None:
            if default is None:
                raise ConfigError(f"{self._name(key)}: missing (a required integer)")
            return default
        return positive_int(self._name(key), value, upper=upper, allow_zero=allow_zero)

    def str(self, key: str, default: str | None = None) -> str:
        value = self.config.get(key)
        if value is None:
            if default is None:
                raise ConfigError(f"{self._name(key)}: missing (a required string)")
            return default
        if not isinstance(value, str):
            raise ConfigError(f"{self._name(key)}: expected a string, got {value!r}")
        return value

    def bool(self, key: str, default: bool) -> bool:
        """A JSON boolean (``true``/``false``); a string such as ``"false"`` is refused, not read as true."""
        value = self.config.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise ConfigError(f"{self._name(key)}: expected true or false (a JSON boolean), got {value!r}")
        return value

    def dtype_bytes(self, key: str, default: int) -> int:
        value = self.config.get(key)
        if value is None:
            return default
        return _dtype_bytes(self._name(key), value)


def _dtype_bytes(field_name: str, value: Any) -> int:
    if isinstance(value, str) and value.strip().lower().replace("torch.", "") in _DTYPE_BYTES:
        return _DTYPE_BYTES[value.strip().lower().replace("torch.", "")]
    raise ConfigError(f"{field_name}: expected a dtype ({', '.join(sorted(set(_DTYPE_BYTES)))}); got {value!r}")


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

    build = _FAMILY_BUILDERS[_family_of(f, model_type)]
    family, layers, ssm_bytes = build(f, dtype_bytes)

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
        max_position_embeddings=f.int("max_position_embeddings", upper=1 << 40) if f.has("max_position_embeddings")
        else None,
        source=source,
    )


def _attention_parts(f: _Fields, dtype_bytes: int, *, gated_q: bool = False) -> dict[str, int]:
    hidden = f.int("hidden_size")
    heads = f.int("num_attention_heads")
    kv_heads = f.int("num_key_value_heads", heads)
    if heads % kv_heads:
        raise ConfigError(
            f"{f.where}: {f.prefix}num_key_value_heads: expected a divisor of num_attention_heads ({heads}), got {kv_heads}"
        )
    if f.has("head_dim"):
        head_dim = f.int("head_dim")
    elif f.has("attention_head_dim"):  # Nemotron-H's name for it
        head_dim = f.int("attention_head_dim")
    else:
        if hidden % heads:
            raise ConfigError(
                f"{f.where}: {f.prefix}head_dim: missing, and hidden_size ({hidden}) is not a multiple of "
                f"num_attention_heads ({heads})"
            )
        head_dim = hidden // heads
    q_out = heads * head_dim * (2 if gated_q else 1)
    params = hidden * q_out + 2 * hidden * kv_heads * head_dim + heads * head_dim * hidden
    return {
        "kv_bytes_per_token": 2 * kv_heads * head_dim * dtype_bytes,
        "query_heads": heads,
        "kv_heads": kv_heads,
        "mixer_params": params,
        "attention_width": heads * head_dim,
    }


def _ffn_parts(f: _Fields, *, moe: bool, gated: bool, prefix_shared: str = "shared_expert_intermediate_size") -> dict[str, int]:
    hidden = f.int("hidden_size")
    mats = 3 if gated else 2
    if not moe:
        return {"ffn_dense_params": mats * hidden * f.int("intermediate_size")}
    experts_key = next((k for k in ("num_experts", "n_routed_experts", "num_local_experts") if f.has(k)), "num_experts")
    num_experts = f.int(experts_key)
    top_k = f.int("num_experts_per_tok")
    if top_k > num_experts:
        raise ConfigError(
            f"{f.where}: {f.prefix}num_experts_per_tok: expected at most {experts_key} ({num_experts}), got {top_k}"
        )
    expert_width = f.int("moe_intermediate_size")
    shared_width = f.int(prefix_shared, 0, allow_zero=True)
    return {
        "ffn_dense_params": mats * hidden * shared_width + hidden * num_experts,
        "expert_params": mats * hidden * expert_width,
        "num_experts": num_experts,
        "experts_per_token": top_k,
    }


def _qwen3_next(f: _Fields, dtype_bytes: int) -> tuple[str, list[LayerSpec], int]:
    n = f.int("num_hidden_layers", upper=_MAX_LAYERS)
    if f.has("layer_types"):
        types = f.config["layer_types"]
        if not isinstance(types, list) or len(types) != n:
            raise ConfigError(
                f"{f.where}: {f.prefix}layer_types: expected a list of {n} entries (num_hidden_layers), got "
                f"{types if not isinstance(types, list) else f'{len(types)} entries'}"
            )
        allowed = ("full_attention", "linear_attention")
        for i, t in enumerate(types):
            if t not in allowed:
                raise ConfigError(f"{f.where}: {f.prefix}layer_types[{i}]: expected one of {', '.join(allowed)}; got {t!r}")
        is_full = [t == "full_attention" for t in types]
    else:  # every fourth layer full attention unless the config says otherwise (transformers' and vLLM's default)
        interval = f.int("full_attention_interval", 4, upper=_MAX_LAYERS)
        is_full = [(i + 1) % interval == 0 for i in range(n)]
    # vLLM keeps the recurrent state in the model dtype unless told otherwise (docs/calibration.md)
    ssm_bytes = dtype_bytes
    for key in ("mamba_ssm_dtype", "mamba_ssm_cache_dtype"):
        if f.has(key):
            ssm_bytes = f.dtype_bytes(key, 4)
            break
    hidden = f.int("hidden_size")
    key_heads = f.int("linear_num_key_heads")
    value_heads = f.int("linear_num_value_heads")
    key_dim = f.int("linear_key_head_dim")
    value_dim = f.int("linear_value_head_dim")
    kernel = f.int("linear_conv_kernel_dim", 4)
    if kernel < 2:
        raise ConfigError(f"{f.where}: {f.prefix}linear_conv_kernel_dim: expected an integer >= 2, got {kernel}")
    conv_dim = 2 * key_heads * key_dim + value_heads * value_dim
    gdn = {
        "ssm_bytes": value_heads * key_dim * value_dim * ssm_bytes,
        "conv_bytes": (kernel - 1) * conv_dim * dtype_bytes,
        "mixer_params": hidden * (2 * key_heads * key_dim + 2 * value_heads * value_dim)
        + hidden * 2 * value_heads
        + conv_dim * kernel
        + value_heads * value_dim * hidden,
        "recurrent_state_elems": value_heads * key_dim * value_dim,
        "state_heads": value_heads,
        "conv_channels": conv_dim,
    }
    gated_q = f.bool("attn_output_gate", True)
    attn = _attention_parts(f, dtype_bytes, gated_q=gated_q)
    moe = f.has("num_experts") and f.int("num_experts") > 1
    ffn = _ffn_parts(f, moe=moe, gated=True)
    layers = []
    for i, full in enumerate(is_full):
        mixer = "attention" if full else "gdn"
        layers.append(LayerSpec(index=i, kind=mixer, mixer=mixer, ffn="moe" if moe else "dense", **(attn if full else gdn), **ffn))
    return "qwen3-next", layers, ssm_bytes


#: layers_block_type words (as current transformers saves Nemotron-H) and their pattern characters.
_NEMOTRON_BLOCKS = {"mamba": "M", "attention": "*", "mlp": "-", "moe": "E"}


def _nemotron_pattern(f: _Fields) -> str:
    """``hybrid_override_pattern``, or the same read from ``layers_block_type``."""
    if f.has("hybrid_override_pattern") or not f.has("layers_block_type"):
        return f.str("hybrid_override_pattern")
    blocks = f.config["layers_block_type"]
    if not isinstance(blocks, list):
        raise ConfigError(f"{f.where}: {f.prefix}layers_block_type: expected a list of "
                          f"{', '.join(_NEMOTRON_BLOCKS)}, got {type(blocks).__name__}")
    for i, b in enumerate(blocks):
        if b not in _NEMOTRON_BLOCKS:
            raise ConfigError(f"{f.where}: {f.prefix}layers_block_type[{i}]: expected one of "
                              f"{', '.join(_NEMOTRON_BLOCKS)}; got {b!r}")
    return "".join(_NEMOTRON_BLOCKS[b] for b in blocks)


def _nemotron_h(f: _Fields, dtype_bytes: int) -> tuple[str, list[LayerSpec], int]:
    n = f.int("num_hidden_layers", upper=_MAX_LAYERS)
    pattern = _nemotron_pattern(f)
    if len(pattern) != n:
        raise ConfigError(
            f"{f.where}: {f.prefix}hybrid_override_pattern: expected {n} characters (num_hidden_layers), got {len(pattern)}"
        )
    for i, ch in enumerate(pattern):
        if ch not in "M*-E":
            raise ConfigError(
                f"{f.where}: {f.prefix}hybrid_override_pattern[{i}]: expected M (Mamba-2), * (attention), "
                f"- (MLP) or E (MoE); got {ch!r}"
            )
    ssm_bytes = 4
    for key in ("mamba_ssm_cache_dtype", "mamba_ssm_dtype"):
        if f.has(key):
            ssm_bytes = f.dtype_bytes(key, 4)
            break
    hidden = f.int("hidden_size")
    gated = f.str("mlp_hidden_act", "relu2") not in ("relu2", "relu", "gelu")
    parts: dict[str, dict[str, int]] = {}
    if "M" in pattern:
        heads = f.int("mamba_num_heads")
        head_dim = f.int("mamba_head_dim")
        state = f.int("ssm_state_size")
        groups = f.int("n_groups", 8)  # transformers' NemotronHConfig default
        kernel = f.int("conv_kernel", 4)
        if kernel < 2:
            raise ConfigError(f"{f.where}: {f.prefix}conv_kernel: expected an integer >= 2, got {kernel}")
        if heads % groups:
            raise ConfigError(f"{f.where}: {f.prefix}n_groups: expected a divisor of mamba_num_heads ({heads}), got {groups}")
        inner = heads * head_dim
        conv_dim = inner + 2 * groups * state
        parts["M"] = {
            "ssm_bytes": heads * head_dim * state * ssm_bytes,
            "conv_bytes": (kernel - 1) * conv_dim * dtype_bytes,
            "mixer_params": hidden * (2 * inner + 2 * groups * state + heads) + conv_dim * kernel + inner * hidden,
            "recurrent_state_elems": heads * head_dim * state,
            "state_heads": heads,
            "conv_channels": conv_dim,
            "conv_groups": groups,
            "group_channels": 2 * state,
        }
    if "*" in pattern:
        parts["*"] = _attention_parts(f, dtype_bytes)
    if "-" in pattern:
        parts["-"] = _ffn_parts(f, moe=False, gated=gated)
    if "E" in pattern:
        parts["E"] = _ffn_parts(f, moe=True, gated=gated, prefix_shared="moe_shared_expert_intermediate_size")
    kinds = {"M": ("mamba2", "mamba2", "none"), "*": ("attention", "attention", "none"),
             "-": ("mlp", "none", "dense"), "E": ("moe", "none", "moe")}
    layers = []
    for i, ch in enumerate(pattern):
        kind, mixer, ffn = kinds[ch]
        layers.append(LayerSpec(index=i, kind=kind, mixer=mixer, ffn=ffn, **parts[ch]))
    return "nemotron-h", layers, ssm_bytes


def _dense(f: _Fields, dtype_bytes: int) -> tuple[str, list[LayerSpec], int]:
    n = f.int("num_hidden_layers", upper=_MAX_LAYERS)
    if f.has("layer_types"):  # transformers writes it into re-saved dense configs too
        types = f.config["layer_types"]
        if not isinstance(types, list) or len(types) != n:
            raise ConfigError(f"{f.where}: {f.prefix}layer_types: expected a list of {n} entries (num_hidden_layers)")
        for i, t in enumerate(types):
            if t != "full_attention":
                raise ConfigError(
                    f"{f.where}: {f.prefix}layer_types[{i}]: {t!r} layers are not supported yet (a dense model's "
                    "layers must all be full_attention; sliding-window attention is not modelled)")
    if not f.has("num_attention_heads"):
        raise ConfigError(
            f"{f.where}: {f.prefix}num_attention_heads: missing; the config matches no supported family "
            "(Qwen3-Next/3.5/3.6 needs layer_types or full_attention_interval, Nemotron-H needs "
            "hybrid_override_pattern, dense needs num_attention_heads)"
        )
    attn = _attention_parts(f, dtype_bytes)
    moe = any(f.has(k) and f.int(k) > 1 for k in ("num_experts", "num_local_experts", "n_routed_experts"))
    ffn = _ffn_parts(f, moe=moe, gated=f.str("hidden_act", "silu") not in ("relu2", "relu", "gelu"))
    layers = [LayerSpec(index=i, kind="attention", mixer="attention", ffn="moe" if moe else "dense", **attn, **ffn) for i in range(n)]
    return "dense", layers, 4


#: The architectures depgraph reads, by model_type (Qwen3.5 and Qwen3.6 write qwen3_5*).
_DENSE_TYPES = ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe")
#: Hybrid architectures vLLM serves that depgraph does not read yet, named in the refusal.
_NOT_YET = {"jamba": "Jamba (Mamba-1)", "falcon_h1": "Falcon-H1", "granitemoehybrid": "Granite-4.0-H",
            "bamba": "Bamba", "zamba2": "Zamba2", "plamo2": "PLaMo2", "lfm2": "LFM2", "minimax_m1": "MiniMax-M1"}
SUPPORTED_FAMILIES = ("Qwen3-Next / Qwen3.5 / Qwen3.6 (qwen3_next, qwen3_5*)", "Nemotron-H (nemotron_h)",
                      f"dense attention ({', '.join(_DENSE_TYPES)})")


def _family_of(f: _Fields, model_type: str) -> str:
    """The family a config is read as: by its ``model_type``, never another
    family's; by its fields only where it names none."""
    if model_type.startswith("nemotron_h"):
        return "nemotron-h"
    if model_type.startswith(("qwen3_next", "qwen3_5")):
        return "qwen3-next"
    if model_type in _DENSE_TYPES:
        return "dense"
    if model_type:
        known = f" ({_NOT_YET[model_type]})" if model_type in _NOT_YET else ""
        raise ConfigError(f"{f.where}: model_type: {model_type!r}{known} is not a supported architecture yet; "
                          f"supported: {'; '.join(SUPPORTED_FAMILIES)}")
    if f.has("hybrid_override_pattern") or f.has("layers_block_type"):
        return "nemotron-h"
    if f.has("full_attention_interval") or f.has("linear_num_value_heads") or (
            f.has("layer_types") and isinstance(f.config.get("layer_types"), list)
            and "linear_attention" in f.config["layer_types"]):
        return "qwen3-next"
    return "dense"


_FAMILY_BUILDERS = {"nemotron-h": _nemotron_h, "qwen3-next": _qwen3_next, "dense": _dense}
