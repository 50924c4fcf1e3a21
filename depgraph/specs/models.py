"""Model catalog and Hugging Face ``config.json`` loader.

A :class:`ModelSpec` is derived entirely from config fields
(:mod:`depgraph.specs.families` reads each architecture family): the kind of
every layer, the bytes each handoff component occupies (``kv`` per prompt
token, or per token of its window, ``ssm`` and ``conv`` per request) and the
parameter counts the cost model needs. ``depgraph models`` lists the catalog
and the supported families; every catalog config names its source in
``data/models/SOURCES.md``.

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

from importlib import resources
from pathlib import Path
from typing import Any

from .._files import read_limited
from .._validate import parse_json, positive_int
from ..errors import ConfigError
from .families import SUPPORTED_FAMILIES, UNSUPPORTED_ARCHITECTURES, model_from_config
from .modelspec import COMPONENTS, MIXERS, LayerSpec, ModelSpec, sharded_handoff_bytes, whole_handoff_bytes

__all__ = [
    "LayerSpec",
    "ModelSpec",
    "COMPONENTS",
    "MIXERS",
    "SUPPORTED_FAMILIES",
    "UNSUPPORTED_ARCHITECTURES",
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


# ---------------------------------------------------------------- catalog


def catalog() -> dict[str, str]:
    """Catalog names mapped to the config file shipped for each."""
    root = resources.files("depgraph.specs") / "data" / "models"
    return {p.name[: -len(".json")]: str(p) for p in sorted(root.iterdir(), key=lambda p: p.name) if p.name.endswith(".json")}


def load_model(name_or_path: str | Path, *, kv_dtype: str | None = None, ssm_dtype: str | None = None) -> ModelSpec:
    """Load a catalog model by name (case-insensitive) or a ``config.json`` path.

    Parameters
    ----------
    name_or_path
        ``"qwen3.6-35b-a3b"``, ``"nemotron-3-nano-30b-a3b"``, ``"qwen3-32b"``
        or the path of a Hugging Face ``config.json`` (or of a folder holding one).
    kv_dtype
        Store the KV cache in this dtype instead of the model dtype
        (``"fp8"``, ``"bfloat16"``, ...; vLLM's ``--kv-cache-dtype``).
    ssm_dtype
        Store the recurrent (temporal) state in this dtype instead of the
        family's default (vLLM's ``--mamba-ssm-cache-dtype``); the conv tail
        stays in the model dtype.

    >>> import depgraph as dg
    >>> dg.load_model("NEMOTRON-3-NANO-30B-A3B").count_kinds()
    {'mamba2': 23, 'moe': 23, 'attention': 6}
    >>> dg.load_model("qwen3-32b", kv_dtype="fp8").kv_bytes_per_token
    131072
    >>> dg.load_model("nemotron-3-nano-30b-a3b", ssm_dtype="bfloat16").ssm_dtype_bytes  # float32 by default
    2
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
    if ssm_dtype is not None:
        model = model.with_ssm_dtype(ssm_dtype)
    return model


def _as_model(model: Any, kv_dtype: str | None, ssm_dtype: str | None) -> ModelSpec:
    """``model`` (a :class:`ModelSpec`, a catalog name or a ``config.json`` path) as a ModelSpec, its
    KV cache and recurrent state in ``kv_dtype`` / ``ssm_dtype`` where given."""
    return load_model(model, kv_dtype=kv_dtype, ssm_dtype=ssm_dtype)


def handoff_bytes(model: ModelSpec | str, *, prompt_tokens: int, tp: int = 1, spec_tokens: int = 0,
                  kv_dtype: str | None = None, ssm_dtype: str | None = None) -> dict[str, int]:
    """Bytes of each handoff component for one request of ``prompt_tokens``,
    summed over the ``tp`` decode ranks (KV-head replication and group
    padding included; :func:`handoff_bytes_per_rank` gives one rank's).
    ``spec_tokens`` speculative tokens per step add that many rows to every
    conv tail, as vLLM sizes it for speculative decoding. ``model`` is a
    :class:`ModelSpec`, a catalog name or a ``config.json`` path;
    ``kv_dtype`` and ``ssm_dtype`` store the KV cache and the recurrent state
    in another dtype, as :func:`~depgraph.load_model` does.

    >>> import depgraph as dg
    >>> dg.handoff_bytes(dg.load_model("qwen3-32b"), prompt_tokens=1)["kv"]
    262144
    >>> dg.handoff_bytes("qwen3.6-35b-a3b", prompt_tokens=1024, tp=8)["kv"]  # 2 KV heads, 8 ranks
    83886080
    >>> dg.handoff_bytes("qwen3-32b", prompt_tokens=1, kv_dtype="fp8")["kv"]
    131072
    """
    model = _as_model(model, kv_dtype, ssm_dtype)
    if positive_int("tp", tp, upper=1024) != 1:
        return sharded_handoff_bytes(model, prompt_tokens, tp, spec_tokens)[1]
    return whole_handoff_bytes(model, prompt_tokens, spec_tokens)


def handoff_bytes_per_rank(model: ModelSpec | str, *, prompt_tokens: int, tp: int = 1, spec_tokens: int = 0,
                           kv_dtype: str | None = None, ssm_dtype: str | None = None) -> dict[str, int]:
    """One decode rank's share of :func:`handoff_bytes` at tensor-parallel size ``tp`` (the same arguments)."""
    return sharded_handoff_bytes(_as_model(model, kv_dtype, ssm_dtype), prompt_tokens, tp, spec_tokens)[0]


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
