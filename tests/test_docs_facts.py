"""The facts the docs quote are what the catalog files say and what depgraph computes now.

``docs/model-facts.md``: every config field of a model's table against its catalog file, every derived
quantity against depgraph's own code, at the precision the doc writes it. ``docs/calibration.md``,
"Every constant and its source": every numeric default of :class:`~depgraph.CostModel` and
:class:`~depgraph.serving.simulator.LoadModel` has a row there, and each value a row gives for a field,
module constant or keyword default is the code's.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import re
from pathlib import Path

import pytest

import depgraph as dg
from depgraph.serving.simulator import LoadModel

DOCS = Path(__file__).parents[1] / "docs"
FACTS = (DOCS / "model-facts.md").read_text(encoding="utf-8")
CALIBRATION = (DOCS / "calibration.md").read_text(encoding="utf-8")
CONSTANTS_HEADING = "## Every constant and its source"

# Fields of a catalog file that describe the checkpoint's bookkeeping, not its shape: left out of the doc.
BOOKKEEPING = {"architectures", "bos_token_id", "eos_token_id", "pad_token_id", "initializer_range",
               "transformers_version", "use_cache", "attention_dropout", "output_router_logits",
               "router_aux_loss_coef", "rms_norm_eps", "rope_theta", "num_logits_to_keep", "swiglu_limit",
               "attention_bias", "mamba_conv_bias", "mamba_proj_bias", "mamba_chunk_size", "mamba_hidden_act",
               "rope_scaling.beta_fast", "rope_scaling.beta_slow", "rope_scaling.truncate"}


# ------------------------------------------------------------------ parsing


def _tables(text: str) -> list[tuple[str, list[str], list[list[str]]]]:
    """Every Markdown table as ``(the ## heading above it, header cells, body rows)``."""
    out, heading, lines, k = [], "", text.splitlines(), 0
    while k < len(lines):
        line = lines[k]
        if line.startswith("## "):
            heading = line[3:].strip().strip("`")
        if line.startswith("|") and k + 1 < len(lines) and re.match(r"^\|[\s:|-]+\|$", lines[k + 1]):
            header = _cells(line)
            rows, k = [], k + 2
            while k < len(lines) and lines[k].startswith("|"):
                rows.append(_cells(lines[k]))
                k += 1
            out.append((heading, header, rows))
            continue
        k += 1
    return out


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _plain(cell: str) -> str:
    return cell.replace("`", "").strip()


_NUMBER = re.compile(r"^[-+]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?")


def _number(cell: str) -> tuple[float, int] | None:
    """The number a cell starts with and its decimals (``None`` when it starts with none)."""
    m = _NUMBER.match(_plain(cell))
    if not m:
        return None
    text = m.group(0).replace(",", "")
    decimals = len(text.split(".")[1].split("e")[0].split("E")[0]) if "." in text and "e" not in text.lower() else -1
    return float(text), decimals


def _agrees(cell: str, value) -> bool:
    """A doc cell against a computed value: numbers at the doc's precision (whole numbers exactly),
    index lists as written ("3, 7, 11" or "0-39"), text exactly."""
    if value is None:
        return _plain(cell) == "none"
    if isinstance(value, bool):
        return _plain(cell) == str(value).lower()
    if isinstance(value, list):
        return _indices(cell) == value
    if isinstance(value, (int, float)):
        got = _number(cell)
        if got is None:
            return False
        number, decimals = got
        if decimals > 0:
            return round(float(value), decimals) == pytest.approx(number, abs=1e-9)
        return number == pytest.approx(float(value), rel=1e-12, abs=0)
    return _plain(cell) == str(value)


def _indices(cell: str) -> list[int]:
    out: list[int] = []
    for part in _plain(cell).split(","):
        part = part.strip()
        if "-" in part:
            a, b = part.split("-")
            out.extend(range(int(a), int(b) + 1))
        elif part:
            out.append(int(part))
    return out


# ----------------------------------------------------------- the quantities


def _one(values, what: str):
    values = set(values)
    assert len(values) == 1, f"{what}: the layers disagree ({sorted(values)})"
    return values.pop()


def _attention(m):
    return [layer for layer in m.layers if layer.kv_bytes_per_token]


def _recurrent(m):
    return [layer for layer in m.layers if layer.ssm_bytes]


def _moe(m):
    return [layer for layer in m.layers if layer.num_experts]


def _handoff(tokens: int, component: str):
    def value(m):
        b = dg.handoff_bytes(m, prompt_tokens=tokens)
        return sum(b.values()) if component == "total" else b[component]
    return value


def _recurrent_share(tokens: int):
    def value(m):
        b = dg.handoff_bytes(m, prompt_tokens=tokens)
        return 100 * (b["ssm"] + b["conv"]) / sum(b.values())
    return value


#: Each quantity the doc may give, and how depgraph computes it.
QUANTITIES = {
    "family": lambda m: m.family,
    "layers": lambda m: m.num_layers,
    "layer_kinds": lambda m: ", ".join(f"{kind} {n}" for kind, n in m.count_kinds().items()),
    "attention_layers": lambda m: [layer.index for layer in _attention(m)],
    "sliding_window_layers": lambda m: [layer.index for layer in m.layers if layer.kv_window_tokens],
    "sliding_window_tokens": lambda m: _one((l.kv_window_tokens for l in m.layers if l.kv_window_tokens), "window"),
    "moe_layers": lambda m: [layer.index for layer in _moe(m)],
    "query_heads": lambda m: _one((l.query_heads for l in _attention(m)), "query heads"),
    "kv_heads": lambda m: _one((l.kv_heads for l in _attention(m)), "KV heads"),
    "head_dim": lambda m: _one((l.attention_width // l.query_heads for l in _attention(m)), "head_dim"),
    "kv_bytes_per_token_per_layer": lambda m: _one((l.kv_bytes_per_token for l in _attention(m)), "KV"),
    "kv_bytes_per_token": lambda m: m.kv_bytes_per_token,
    "dtype_bytes": lambda m: m.dtype_bytes,
    "ssm_dtype_bytes": lambda m: m.ssm_dtype_bytes,
    "max_model_len": lambda m: m.max_position_embeddings,
    "recurrent_mixer": lambda m: _one((l.mixer for l in _recurrent(m)), "mixer"),
    "recurrent_state_elems_per_layer": lambda m: _one((l.recurrent_state_elems for l in _recurrent(m)), "state"),
    "ssm_bytes_per_layer": lambda m: _one((l.ssm_bytes for l in _recurrent(m)), "ssm bytes"),
    "conv_bytes_per_layer": lambda m: _one((l.conv_bytes for l in _recurrent(m)), "conv bytes"),
    "ssm_bytes_per_request": lambda m: dg.handoff_bytes(m, prompt_tokens=1)["ssm"],
    "conv_bytes_per_request": lambda m: dg.handoff_bytes(m, prompt_tokens=1)["conv"],
    "experts": lambda m: _one((l.num_experts for l in _moe(m)), "experts"),
    "experts_per_token": lambda m: _one((l.experts_per_token for l in _moe(m)), "top-k"),
    "expert_params": lambda m: _one((l.expert_params for l in _moe(m)), "expert params"),
    "moe_layer_dense_params": lambda m: _one((l.ffn_dense_params for l in _moe(m)), "shared expert and router"),
    "active_params": lambda m: m.active_params,
    "total_params": lambda m: m.total_params,
    "embedding_params": lambda m: m.embedding_params,
    "lm_head_params": lambda m: m.lm_head_params,
    "projection_gflop_per_token": lambda m: 2 * m.active_params / 1e9,
    "linear_gflop_per_token": lambda m: dg.CostModel().step_cost(m).flops_per_token / 1e9,
    **{f"handoff_{c}_bytes_{k}": _handoff(n, c) for k, n in (("1k", 1024), ("32k", 32768))
       for c in ("kv", "ssm", "conv", "total")},
    "recurrent_share_1k_pct": _recurrent_share(1024),
    "recurrent_share_32k_pct": _recurrent_share(32768),
}


def _check_shape(cell: str, factors_of_first: int, product: int, what: str) -> None:
    dims = [int(d.replace(",", "")) for d in _plain(cell).split(" x ")]
    assert dims[0] == factors_of_first and _product(dims) == product, f"{what}: {cell}"


def _product(dims: list[int]) -> int:
    out = 1
    for d in dims:
        out *= d
    return out


def _check_state_shape(m, cell: str) -> None:
    """``heads x ... `` whose product is the layer's state elements (the first factor is what TP splits)."""
    layer = _recurrent(m)[0]
    _check_shape(cell, layer.state_heads, layer.recurrent_state_elems, "state_shape")


def _check_conv_shape(m, cell: str) -> None:
    """``rows x channels``: the channels the conv tail has, rows x channels x dtype its bytes."""
    layer = _recurrent(m)[0]
    rows, channels = (int(d.replace(",", "")) for d in _plain(cell).split(" x "))
    assert channels == layer.conv_channels and rows * channels * m.dtype_bytes == layer.conv_bytes, cell


SHAPES = {"state_shape": _check_state_shape, "conv_shape": _check_conv_shape}

#: The quantities every model's table must give, and those that hybrids, MoE and windowed models add.
REQUIRED = ["family", "layers", "layer_kinds", "attention_layers", "query_heads", "kv_heads", "head_dim",
            "kv_bytes_per_token_per_layer", "kv_bytes_per_token", "dtype_bytes", "max_model_len", "active_params",
            "total_params", "embedding_params", "lm_head_params", "projection_gflop_per_token",
            "linear_gflop_per_token", "handoff_kv_bytes_1k", "handoff_total_bytes_1k", "handoff_kv_bytes_32k",
            "handoff_total_bytes_32k"]
REQUIRED_RECURRENT = ["recurrent_mixer", "state_shape", "recurrent_state_elems_per_layer", "ssm_dtype_bytes",
                      "ssm_bytes_per_layer", "conv_shape", "conv_bytes_per_layer", "ssm_bytes_per_request",
                      "conv_bytes_per_request", "handoff_ssm_bytes_1k", "handoff_conv_bytes_1k",
                      "handoff_ssm_bytes_32k", "handoff_conv_bytes_32k", "recurrent_share_1k_pct",
                      "recurrent_share_32k_pct"]
REQUIRED_MOE = ["moe_layers", "experts", "experts_per_token", "expert_params", "moe_layer_dense_params"]
REQUIRED_WINDOW = ["sliding_window_layers", "sliding_window_tokens"]


# ------------------------------------------------------------ model facts

TABLES = _tables(FACTS)
MODELS = sorted(dg.catalog())


def _model_table(model: str, first: str) -> dict[str, str]:
    found = [rows for heading, header, rows in TABLES if heading == model and header[0] == first]
    assert len(found) == 1, f"docs/model-facts.md: expected one '| {first} |' table under '## {model}'"
    return {_plain(r[0]): r[1] for r in found[0]}


def _config_fields(config: dict, prefix: str = "") -> dict[str, object]:
    """The catalog file's scalar fields (nested objects flattened with dots; lists and nulls left out)."""
    out: dict[str, object] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            out.update(_config_fields(value, f"{prefix}{key}."))
        elif value is not None and not isinstance(value, list):
            out[f"{prefix}{key}"] = value
    return out


@pytest.mark.parametrize("model", MODELS)
def test_config_fields_are_the_catalog_files(model):
    rows = _model_table(model, "field")
    fields = _config_fields(json.loads(Path(dg.catalog()[model]).read_text(encoding="utf-8")))
    for name, cell in rows.items():
        assert name in fields, f"{model}: {name} is not a field of its catalog file"
        assert _agrees(cell, fields[name]), f"{model}: {name} is {fields[name]!r} in the catalog, {cell} in the doc"
    missing = [k for k in fields if k not in rows and k.rsplit(".", 1)[-1] not in BOOKKEEPING and k not in BOOKKEEPING]
    assert not missing, f"{model}: catalog fields missing from docs/model-facts.md: {missing}"


@pytest.mark.parametrize("model", MODELS)
def test_derived_quantities_are_depgraphs(model):
    rows = _model_table(model, "quantity")
    m = dg.load_model(model)
    for name, cell in rows.items():
        if name in SHAPES:
            SHAPES[name](m, cell)
            continue
        assert name in QUANTITIES, f"{model}: unknown quantity {name} (add it to QUANTITIES in this test)"
        value = QUANTITIES[name](m)
        assert _agrees(cell, value), f"{model}: {name} is {value!r} in depgraph, {cell} in the doc"
    required = list(REQUIRED)
    required += REQUIRED_RECURRENT if m.is_hybrid else []
    required += REQUIRED_MOE if any(layer.num_experts for layer in m.layers) else []
    required += REQUIRED_WINDOW if m.has_sliding_window else []
    missing = [q for q in required if q not in rows]
    assert not missing, f"{model}: docs/model-facts.md leaves out {missing}"


def test_summary_table_is_depgraphs():
    [(header, rows)] = [(h, r) for _, h, r in TABLES if h[0] == "model"]
    assert sorted(_plain(r[0]) for r in rows) == MODELS
    for row in rows:
        m = dg.load_model(_plain(row[0]))
        for name, cell in zip(header[1:], row[1:]):
            value = QUANTITIES[_plain(name)](m)
            assert _agrees(cell, value), f"{m.name}: {name} is {value!r} in depgraph, {cell} in the summary"


def test_the_flops_per_token_calibration_md_quotes():
    # docs/calibration.md, "The choices", prefill row: 4.88 / 5.75 / 62.4 GFLOP per token (the projections)
    quoted = re.search(r"gives ([\d.]+) / ([\d.]+) / ([\d.]+) GFLOP per token", CALIBRATION)
    assert quoted and "[model-facts.md](model-facts.md)" in CALIBRATION
    for model, text in zip(("qwen3.6-35b-a3b", "nemotron-3-nano-30b-a3b", "qwen3-32b"), quoted.groups()):
        decimals = len(text.split(".")[1])
        assert round(2 * dg.load_model(model).active_params / 1e9, decimals) == float(text)


# ------------------------------------------------- calibration.md's constants


def _constants_rows() -> list[list[str]]:
    start = CALIBRATION.index(CONSTANTS_HEADING)
    end = CALIBRATION.find("\n## ", start + len(CONSTANTS_HEADING))
    section = CALIBRATION[start:end if end >= 0 else None]
    tables = [(h, r) for _, h, r in _tables(section)]
    assert tables, f"docs/calibration.md: no table under '{CONSTANTS_HEADING}'"
    header, rows = tables[0]
    assert [_plain(c) for c in header[:4]] == ["constant", "value", "where", "source"], header
    return [row for row in rows if any(cell for cell in row[1:])]  # a row with one cell names a group


CONSTANT_ROWS = _constants_rows()
CATEGORIES = ("study input", "datasheet", "vLLM rule", "fit", "choice/assumption")


def _spans(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def _numeric(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@pytest.mark.parametrize("cls", [dg.CostModel, LoadModel], ids=lambda c: c.__name__)
def test_every_numeric_default_is_documented(cls):
    numeric = [f.name for f in dataclasses.fields(cls) if _numeric(f.default)]
    documented = {name for row in CONSTANT_ROWS if cls.__name__ in row[2] for name in _spans(row[0])}
    missing = [name for name in numeric if name not in documented]
    assert not missing, (f"{cls.__name__} fields with a numeric default and no row in docs/calibration.md, "
                         f"'{CONSTANTS_HEADING}' (constant `{missing[0]}`, where `{cls.__name__}`, its value, "
                         f"source and why): {missing}")


def _code_default(module, owners: list[str], name: str):
    """The default the code gives ``name``: a module constant, a dataclass field of an owner, or a keyword
    of an owner function (``None`` for none of them)."""
    if hasattr(module, name) and not callable(getattr(module, name)):
        return getattr(module, name), True
    for owner in owners:
        obj = getattr(module, owner.rstrip("()").rsplit(".", 1)[-1], None)
        if obj is None:
            continue
        if dataclasses.is_dataclass(obj):
            for f in dataclasses.fields(obj):
                if f.name == name:
                    return f.default, True
        elif callable(obj):
            p = inspect.signature(obj).parameters.get(name)
            if p is not None and p.default is not inspect.Parameter.empty:
                return p.default, True
    return None, False


@pytest.mark.parametrize("row", CONSTANT_ROWS, ids=lambda r: _plain(r[0])[:40])
def test_each_documented_value_is_the_codes(row):
    constant, value, where, source = row[:4]
    assert any(source.startswith(c) for c in CATEGORIES), f"source should start with one of {CATEGORIES}: {source}"
    paths = re.findall(r"depgraph/[\w/]+\.py", where)
    for path in paths:
        module = importlib.import_module(path[:-3].replace("/", "."))
        owners = [s for s in _spans(where) if not s.endswith(".py")]
        for name in _spans(constant):
            default, found = _code_default(module, owners, name)
            if found and _numeric(default):
                got = _number(value)
                assert got is not None, f"{name}: the value cell should start with the code's value {default!r}"
                assert got[0] == pytest.approx(float(default), rel=1e-12), f"{name}: code {default!r}, doc {value}"
