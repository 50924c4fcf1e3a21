"""Every config family, held against an independent re-derivation of vLLM's sizing.

The functions below restate vLLM's rules from its source (vLLM 0.33;
docs/calibration.md, "Handoff bytes, rule by rule", cites each function),
working on the raw config dict, not on depgraph's LayerSpec: the KV heads a
rank holds (``ModelConfig.get_num_kv_heads``), the sliding-window tokens a
layer keeps (``SlidingWindowManager``), and ``MambaStateShapeCalculator``'s
mamba1 / mamba2 / gated-delta-net shapes with their dtypes
(``MambaStateDtypeCalculator`` and the Nemotron-H / Qwen3.5 config hooks).
depgraph's bytes must equal them exactly at TP 1, 2, 4 and 8, prompts 1 to 1M.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import depgraph as dg

DTYPE = {"bfloat16": 2, "float16": 2, "float32": 4}


def _text(cfg: dict) -> dict:
    return cfg.get("text_config", cfg)


def _dtype(cfg: dict) -> int:
    t = _text(cfg)
    name = t.get("torch_dtype") or t.get("dtype") or cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16"
    return min(DTYPE[name], 2)  # _resolve_auto_dtype: a float32 checkpoint is served in 16 bits


def _kinds(cfg: dict) -> list[tuple[str, int]]:
    """(mixer, sliding window or 0) of every layer, by the family's own layout rule."""
    t = _text(cfg)
    n, mt = t["num_hidden_layers"], t.get("model_type") or cfg.get("model_type")
    if mt.startswith(("qwen3_5", "qwen3_next")):
        return [("attention" if x == "full_attention" else "gdn", 0) for x in t["layer_types"]] if "layer_types" in t \
            else [("attention" if (i + 1) % t.get("full_attention_interval", 4) == 0 else "gdn", 0) for i in range(n)]
    if mt == "nemotron_h":
        return [({"M": "mamba2", "*": "attention"}.get(c, "none"), 0) for c in t["hybrid_override_pattern"]]
    if mt == "jamba":
        return [("attention" if i % t["attn_layer_period"] == t["attn_layer_offset"] else "mamba1", 0) for i in range(n)]
    if mt == "falcon_h1":
        return [("parallel", 0)] * n
    if mt == "granitemoehybrid":
        return [("attention" if x in ("attention", "full_attention") else "mamba2", 0) for x in t["layer_types"]]
    if mt == "bamba":
        return [("attention" if i in t["attn_layer_indices"] else "mamba2", 0) for i in range(n)]
    if mt == "gpt_oss":  # vLLM: even layers sliding (gpt_oss.py), as the published layer_types say
        return [("attention", t["sliding_window"] if i % 2 == 0 else 0) for i in range(n)]
    if mt == "mistral":
        return [("attention", t.get("sliding_window") or 0)] * n
    return [("attention", 0)] * n


def _kv_rank(cfg: dict, prompt: int, tp: int, window: int) -> int:
    t = _text(cfg)
    heads = t["num_attention_heads"]
    kv_heads = t.get("num_key_value_heads", heads)
    mt = t.get("model_type") or cfg.get("model_type")
    if mt == "granitemoehybrid":  # GraniteMoeHybridAttention: hidden_size // num_attention_heads, whatever head_dim says
        head_dim = t["hidden_size"] // heads
    else:
        head_dim = t.get("head_dim") or t.get("attention_head_dim") or t["hidden_size"] // heads
    tokens = min(prompt, window - 1) if window else prompt  # SlidingWindowManager keeps window - 1
    return 2 * max(1, kv_heads // tp) * head_dim * tokens * _dtype(cfg)  # get_num_kv_heads


def _ssm_dtype(cfg: dict) -> int:
    t = _text(cfg)
    mt = t.get("model_type") or cfg["model_type"]
    if mt == "nemotron_h":  # NemotronHForCausalLMConfig: the config's mamba_ssm_cache_dtype, else float32
        return DTYPE[t.get("mamba_ssm_cache_dtype", "float32")]
    if mt.startswith("qwen3_5"):  # Qwen3_5ForConditionalGenerationConfig: the config's mamba_ssm_dtype
        return DTYPE[t.get("mamba_ssm_dtype", "bfloat16")] if "mamba_ssm_dtype" in t else _dtype(cfg)
    return _dtype(cfg)  # mamba_ssm_cache_dtype "auto": the conv dtype, the model's


def _mamba2_shape(tp, inner, groups, heads, head_dim, state, kernel, spec):
    groups += 0 if groups % tp == 0 else tp - groups  # extra_groups_for_head_shards
    conv_dim = inner + 2 * groups * state
    return (kernel - 1 + spec) * (conv_dim // tp), (heads // tp) * head_dim * state


def _state_rank(cfg: dict, kind: str, tp: int, spec: int) -> tuple[int, int]:
    """(conv elements, ssm elements) one rank holds for one recurrent layer."""
    t = _text(cfg)
    mt = t.get("model_type") or cfg["model_type"]
    if kind == "gdn":
        kh, vh = t["linear_num_key_heads"], t["linear_num_value_heads"]
        kd, vd = t["linear_key_head_dim"], t["linear_value_head_dim"]
        conv_dim = 2 * kh * kd + vh * vd
        return (t.get("linear_conv_kernel_dim", 4) - 1 + spec) * (conv_dim // tp), (vh // tp) * vd * kd
    if kind == "mamba1":  # mamba1_state_shape: no num_spec
        inner = t["mamba_expand"] * t["hidden_size"]
        return (t["mamba_d_conv"] - 1) * (inner // tp), (inner // tp) * t["mamba_d_state"]
    if mt == "nemotron_h":
        h, d = t["mamba_num_heads"], t["mamba_head_dim"]
        return _mamba2_shape(tp, h * d, t.get("n_groups", 8), h, d, t["ssm_state_size"], t.get("conv_kernel", 4), spec)
    inner = (t.get("mamba_d_ssm") if mt == "falcon_h1" else None) or t.get("mamba_expand", 2) * t["hidden_size"]
    heads = t.get("mamba_n_heads", 128)
    d_head = t.get("mamba_d_head", "auto")
    d_head = inner // heads if d_head == "auto" else d_head
    return _mamba2_shape(tp, inner, t.get("mamba_n_groups", 1), heads, d_head, t.get("mamba_d_state", 256),
                         t.get("mamba_d_conv", 4), 0 if mt == "bamba" else spec)  # Bamba's hook had no num_spec


def vllm_bytes(cfg: dict, prompt: int, tp: int, spec: int = 0) -> dict[str, int]:
    """Bytes over all ``tp`` ranks as vLLM allocates them for one request."""
    out = {"kv": 0, "ssm": 0, "conv": 0}
    for kind, window in _kinds(cfg):
        if kind in ("attention", "parallel"):
            out["kv"] += tp * _kv_rank(cfg, prompt, tp, window)
        if kind in ("gdn", "mamba1", "mamba2", "parallel"):
            conv, ssm = _state_rank(cfg, "mamba2" if kind == "parallel" else kind, tp, spec)
            out["conv"] += tp * conv * _dtype(cfg)
            out["ssm"] += tp * ssm * _ssm_dtype(cfg)
    return out


def _catalog(name: str) -> dict:
    return json.loads(Path(dg.catalog()[name]).read_text())


#: Bamba-9B as published (model_type, 32 layers, 32 heads, hidden 4,096, d_state 128, attention at 9, 18, 27),
#: with the remaining fields at transformers' BambaConfig defaults.
BAMBA_9B = {"model_type": "bamba", "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
            "hidden_size": 4096, "intermediate_size": 14336, "vocab_size": 128256, "mamba_d_state": 128,
            "mamba_n_heads": 128, "mamba_n_groups": 1, "mamba_d_conv": 4, "mamba_expand": 2,
            "attn_layer_indices": [9, 18, 27], "max_position_embeddings": 262144, "torch_dtype": "bfloat16"}

FAMILIES = {name: _catalog(name) for name in dg.catalog()} | {"bamba-9b": BAMBA_9B}
PROMPTS = (1, 127, 128, 129, 1000, 4096, 32_768, 262_144, 1_000_000)


@pytest.mark.parametrize("name", sorted(FAMILIES))
@pytest.mark.parametrize("tp", (1, 2, 4, 8))
def test_bytes_equal_vllms_allocation(name, tp):
    cfg = FAMILIES[name]
    model = dg.model_from_config(cfg, name=name)
    heads = _text(cfg)["num_attention_heads"]
    for prompt in PROMPTS:
        if model.max_position_embeddings and prompt > model.max_position_embeddings:
            with pytest.raises(dg.ConfigError, match=r"prompt_tokens: .* longer than .* context"):
                dg.handoff_bytes(model, prompt_tokens=prompt, tp=tp)
            continue
        if heads % tp:  # vLLM refuses it too (attention heads split whole)
            with pytest.raises(dg.ConfigError, match=rf"tp: {tp} does not divide num_attention_heads \({heads}\)"):
                dg.handoff_bytes(model, prompt_tokens=prompt, tp=tp)
            continue
        for spec in (0, 3):
            want = vllm_bytes(cfg, prompt, tp, spec)
            assert dg.handoff_bytes(model, prompt_tokens=prompt, tp=tp, spec_tokens=spec) == want, (name, prompt, tp)
            rank = dg.handoff_bytes_per_rank(model, prompt_tokens=prompt, tp=tp, spec_tokens=spec)
            assert {c: v * tp for c, v in rank.items()} == want


def test_every_family_is_covered():
    assert {dg.model_from_config(cfg).family for cfg in FAMILIES.values()} == {
        "qwen3-next", "nemotron-h", "jamba", "falcon-h1", "granite-h", "bamba", "dense"}


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_ttft_runs_on_every_family(name):
    """Prefill and decode costs for every family: a single request schedules, and its parts add up."""
    model = dg.model_from_config(FAMILIES[name], name=name)
    G = dg.single_request(model, prompt_tokens=1024, link="100g")
    S = dg.schedule(G, policy="layer")
    assert 0 < S.ttft_s < 10
    sends = sum(G.nodes[n].get("bytes", 0) for n in G if G.nodes[n]["kind"] == "send")
    assert sends == sum(dg.handoff_bytes(model, prompt_tokens=1024).values())
    assert all(G.nodes[n]["duration_s"] > 0 for n in G if G.nodes[n]["kind"] in ("prefill", "decode"))


# ------------------------------------------------------------ the table of the closing note, pinned


@pytest.mark.parametrize("name, tokens, tp, kv, ssm, conv", [
    ("jamba-mini-1.5", 1024, 1, 16_777_216, 7_340_032, 1_376_256),
    ("jamba-mini-1.5", 32_768, 8, 536_870_912, 7_340_032, 1_376_256),
    ("gpt-oss-20b", 1024, 1, 28_286_976, 0, 0),  # 12 full layers x 1,024 + 12 windowed x 127 tokens
    ("gpt-oss-20b", 32_768, 8, 808_427_520, 0, 0),  # 8 KV heads over 8 ranks: no replication
    ("granite-4.0-h-tiny", 1024, 1, 8_388_608, 28_311_552, 718_848),
    ("granite-4.0-h-tiny", 32_768, 4, 268_435_456, 28_311_552, 884_736),  # 1 group padded to 4
    ("falcon-h1-7b-instruct", 1024, 1, 46_137_344, 69_206_016, 946_176),
    ("falcon-h1-7b-instruct", 32_768, 2, 1_476_395_008, 69_206_016, 1_081_344),  # 1 group padded to 2
])
def test_family_table(name, tokens, tp, kv, ssm, conv):
    assert dg.handoff_bytes(dg.load_model(name), prompt_tokens=tokens, tp=tp) == {"kv": kv, "ssm": ssm, "conv": conv}


# ------------------------------------------------------------ properties


hybrid_names = sorted(FAMILIES)


@settings(max_examples=200, deadline=None)
@given(name=st.sampled_from(hybrid_names), tp=st.sampled_from((1, 2, 4, 8)),
       prompt=st.integers(1, 1_000_000), extra=st.integers(1, 100_000))
def test_properties(name, tp, prompt, extra):
    model = dg.model_from_config(FAMILIES[name], name=name)
    if model.max_position_embeddings and prompt + extra + 1 > model.max_position_embeddings:
        return
    if _text(FAMILIES[name])["num_attention_heads"] % tp:
        return
    a = dg.handoff_bytes(model, prompt_tokens=prompt, tp=tp)
    b = dg.handoff_bytes(model, prompt_tokens=prompt + extra, tp=tp)
    assert a["ssm"] == b["ssm"] and a["conv"] == b["conv"]  # recurrent state: constant in the prompt
    windows = [layer.kv_window_tokens - 1 for layer in model.layers if layer.kv_window_tokens]
    one = dg.handoff_bytes(model, prompt_tokens=1, tp=tp)["kv"]
    kv = lambda p: dg.handoff_bytes(model, prompt_tokens=p, tp=tp)["kv"]  # noqa: E731
    if not windows:  # full attention: KV linear in the prompt
        assert a["kv"] == one * prompt and b["kv"] - a["kv"] == one * extra
    else:  # sliding windows: each token adds no more KV than the one before (concave), affine past every window
        assert kv(prompt + 1) - a["kv"] >= kv(prompt + extra + 1) - b["kv"] >= 0
        if prompt >= max(windows):
            assert b["kv"] - a["kv"] == extra * (kv(prompt + 1) - a["kv"])
        if prompt + extra <= min(windows):
            assert b["kv"] - a["kv"] == extra * one
    # TP never reduces the total (replication and padding only add)
    t1 = dg.handoff_bytes(model, prompt_tokens=prompt)
    assert all(a[c] >= t1[c] for c in a)


def test_sliding_window_caps_and_the_full_layers_grow():
    m = dg.load_model("gpt-oss-20b")
    full = [layer for layer in m.layers if not layer.kv_window_tokens]
    sliding = [layer for layer in m.layers if layer.kv_window_tokens]
    assert len(full) == len(sliding) == 12 and {layer.kv_window_tokens for layer in sliding} == {128}
    assert all(layer.component_bytes("kv", 10_000) == layer.component_bytes("kv", 127) for layer in sliding)
    assert all(layer.component_bytes("kv", 10_000) == 10_000 * layer.kv_bytes_per_token for layer in full)
    assert m.kv_bytes(1) == dg.handoff_bytes(m, prompt_tokens=1)["kv"]


def test_sliding_windows_as_vllm_applies_them():
    m = dg.load_model("mistral-7b-v0.1")  # no layer_types: the engine's window on every layer
    assert {layer.kv_window_tokens for layer in m.layers} == {4096}
    assert dg.handoff_bytes(m, prompt_tokens=32_768)["kv"] == 32 * 2 * 8 * 128 * 2 * 4095
    gpt = _catalog("gpt-oss-20b")  # vLLM's gpt-oss windows every even layer, with or without layer_types
    bare = {k: v for k, v in gpt.items() if k != "layer_types"}
    assert dg.model_from_config(bare).layers == dg.load_model("gpt-oss-20b").layers
    qwen2 = {"model_type": "qwen2", "num_hidden_layers": 28, "hidden_size": 3584, "num_attention_heads": 28,
             "num_key_value_heads": 4, "intermediate_size": 18944, "vocab_size": 152064, "sliding_window": 32768,
             "max_window_layers": 28, "use_sliding_window": False, "torch_dtype": "bfloat16"}
    assert not dg.model_from_config(qwen2).has_sliding_window  # Qwen2.5-7B: use_sliding_window false
    on = {**qwen2, "use_sliding_window": True}
    assert not dg.model_from_config(on).has_sliding_window  # max_window_layers = every layer: none windowed
    every = dg.model_from_config({**on, "max_window_layers": 0})
    assert {layer.kv_window_tokens for layer in every.layers} == {32768}
    with pytest.raises(dg.ConfigError, match=r"max_window_layers: 20 windows some but not all of the 28 layers"):
        dg.model_from_config({**on, "max_window_layers": 20})
    mixed = {**qwen2, "layer_types": ["sliding_attention"] * 14 + ["full_attention"] * 14}
    assert not dg.model_from_config(mixed).has_sliding_window  # Qwen2 passes no per-layer window
    llama = {**qwen2, "model_type": "llama", "layer_types": mixed["layer_types"]}
    assert [layer.kv_window_tokens for layer in dg.model_from_config(llama).layers] == [32768] * 14 + [0] * 14


def test_a_float32_checkpoint_is_served_in_16_bits():
    cfg = {**_catalog("qwen3-32b"), "torch_dtype": "float32"}
    assert dg.handoff_bytes(dg.model_from_config(cfg), prompt_tokens=10) == \
        dg.handoff_bytes(dg.load_model("qwen3-32b"), prompt_tokens=10)


def test_granite_and_bamba_read_only_what_vllm_reads():
    granite = _catalog("granite-4.0-h-tiny")
    base = dg.model_from_config(granite)
    assert dg.model_from_config({**granite, "mamba_d_ssm": 999, "head_dim": 64}).layers == base.layers
    falcon = _catalog("falcon-h1-7b-instruct")
    assert dg.model_from_config({**falcon, "mamba_d_ssm": 4608}).layers != dg.load_model("falcon-h1-7b-instruct").layers


def test_state_dtypes_follow_vllms_hooks_and_the_override():
    q = dg.load_model("qwen3.6-35b-a3b")  # Qwen3.5/3.6: the config's mamba_ssm_dtype (float32)
    assert q.ssm_dtype_bytes == 4
    nemo = dg.load_model("nemotron-3-nano-30b-a3b")  # Nemotron-H: mamba_ssm_cache_dtype, else float32
    assert nemo.ssm_dtype_bytes == 4
    cfg = _catalog("nemotron-3-nano-30b-a3b")
    del cfg["mamba_ssm_cache_dtype"]
    assert dg.model_from_config(cfg).ssm_dtype_bytes == 4
    for name in ("jamba-mini-1.5", "granite-4.0-h-tiny", "falcon-h1-7b-instruct"):  # "auto": the model dtype
        assert dg.load_model(name).ssm_dtype_bytes == 2
    jamba = _catalog("jamba-mini-1.5")
    assert dg.model_from_config({**jamba, "mamba_ssm_cache_dtype": "float32"}).ssm_dtype_bytes == 2  # vLLM reads no such field
    qn = copy.deepcopy(_catalog("qwen3.6-35b-a3b"))
    qn["text_config"]["model_type"] = "qwen3_next"
    qn["model_type"] = "qwen3_next"
    assert dg.model_from_config(qn).ssm_dtype_bytes == 2  # Qwen3-Next has no hook: the model dtype
    over = dg.load_model("granite-4.0-h-tiny", ssm_dtype="float32")
    base = dg.load_model("granite-4.0-h-tiny")
    assert dg.handoff_bytes(over, prompt_tokens=10)["ssm"] == 2 * dg.handoff_bytes(base, prompt_tokens=10)["ssm"]
    assert dg.handoff_bytes(over, prompt_tokens=10)["conv"] == dg.handoff_bytes(base, prompt_tokens=10)["conv"]
    with pytest.raises(dg.ConfigError, match=r"ssm_dtype: expected a dtype"):
        dg.load_model("granite-4.0-h-tiny", ssm_dtype="float128")


def test_speculative_rows_only_where_vllm_adds_them():
    for name, grows in (("qwen3.6-35b-a3b", True), ("nemotron-3-nano-30b-a3b", True), ("granite-4.0-h-tiny", True),
                        ("falcon-h1-7b-instruct", True), ("jamba-mini-1.5", False)):
        m = dg.load_model(name)
        plain, spec = (dg.handoff_bytes(m, prompt_tokens=100, spec_tokens=k)["conv"] for k in (0, 2))
        assert (spec == plain * 5 // 3) if grows else (spec == plain), name  # kernel 4: 3 rows, then 5
    with pytest.raises(dg.ConfigError, match=r"spec_tokens: expected an integer >= 0 and <= 64"):
        dg.handoff_bytes(dg.load_model("jamba-mini-1.5"), prompt_tokens=10, spec_tokens=65)


def test_context_as_vllm_derives_max_model_len():
    """_get_and_verify_max_len: max_position_embeddings times the RoPE factor, except for the types whose
    max_position_embeddings already states the scaled length (YaRN, LongRoPE, Llama 3, ...)."""
    assert dg.load_model("gpt-oss-20b").max_position_embeddings == 131_072  # YaRN: no factor on top
    cfg = _catalog("qwen3-32b")
    yarn = {**cfg, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}
    assert dg.model_from_config(yarn).max_position_embeddings == 40_960
    dyn = {**cfg, "rope_scaling": {"type": "dynamic", "factor": 2.0}}
    assert dg.model_from_config(dyn).max_position_embeddings == 81_920
    llama3 = {**cfg, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}
    assert dg.model_from_config(llama3).max_position_embeddings == 40_960
    params = {**cfg, "rope_parameters": {"rope_type": "linear", "factor": 4.0}}  # transformers 5's name wins
    assert dg.model_from_config({**params, "rope_scaling": {"type": "linear", "factor": 2.0}}).max_position_embeddings \
        == 163_840
    nested = {**cfg, "rope_parameters": {"full_attention": {"rope_type": "linear", "factor": 2.0},
                                         "sliding_attention": {"rope_type": "default"}}}
    assert dg.model_from_config(nested).max_position_embeddings == 81_920
    assert dg.model_from_config({**cfg, "rope_scaling": {"rope_type": "linear", "factor": None}}) \
        .max_position_embeddings == 40_960  # a null factor counts as 1, as vLLM falls back
    for bad, message in ((("rope_scaling", {"rope_type": "linear", "factor": "x"}), r"rope_scaling.factor: expected a number > 0"),
                         (("rope_scaling", {"rope_type": "linear", "factor": 1e308}), r"rope_scaling.factor: .*<= 1e\+06"),
                         (("rope_scaling", "yarn"), r"rope_scaling: expected an object \(or null\), got 'yarn'"),
                         (("rope_scaling", {"rope_type": ["yarn"]}), r"rope_scaling.rope_type: expected a string")):
        with pytest.raises(dg.ConfigError, match=message):
            dg.model_from_config({**cfg, bad[0]: bad[1]})
    with pytest.raises(dg.ConfigError, match=r"prompt_tokens: a prompt of 81,921 tokens is longer than"):
        dg.handoff_bytes(dg.model_from_config(dyn), prompt_tokens=81_921)


# ------------------------------------------------------------ malformed variants: one line each


def _broken(name: str, path: tuple, value) -> dict:
    cfg = copy.deepcopy(FAMILIES[name])
    node = cfg
    for key in path[:-1]:
        node = node[key]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return cfg


@pytest.mark.parametrize("name, path, value, message", [
    ("jamba-mini-1.5", ("attn_layer_offset",), 8, r"attn_layer_offset: expected less than its period \(8\), got 8"),
    ("jamba-mini-1.5", ("mamba_d_conv",), 1, r"mamba_d_conv: expected an integer >= 2, got 1"),
    ("jamba-mini-1.5", ("num_experts_per_tok",), 17, r"num_experts_per_tok: expected at most num_experts \(16\)"),
    ("jamba-mini-1.5", ("mamba_dt_rank",), "wide", r"mamba_dt_rank: expected an integer >= 1"),
    ("falcon-h1-7b-instruct", ("mamba_n_groups",), 5, r"mamba_n_groups: expected a divisor of mamba_n_heads \(24\)"),
    ("falcon-h1-7b-instruct", ("mamba_d_state",), -1, r"mamba_d_state: expected an integer >= 1"),
    ("granite-4.0-h-tiny", ("layer_types", 3), "conv", r"layer_types\[3\]: expected one of mamba, attention, "
                                                        r"linear_attention, full_attention; got 'conv'"),
    ("granite-4.0-h-tiny", ("layer_types",), ["mamba"], r"layer_types: expected a list of 40 entries"),
    ("granite-4.0-h-tiny", ("mamba_n_heads",), 7, r"mamba_n_heads: expected a divisor of the Mamba inner width"),
    ("bamba-9b", ("attn_layer_indices",), [9, 40], r"attn_layer_indices\[1\]: expected an integer >= 0 and <= 31"),
    ("bamba-9b", ("attn_layer_indices",), "9", r"attn_layer_indices: expected a list of layer indices"),
    ("gpt-oss-20b", ("sliding_window",), KeyError, r"sliding_window: missing \(a required integer: gpt-oss"),
    ("gpt-oss-20b", ("layer_types", 0), "global", r"layer_types\[0\]: expected one of full_attention, sliding_attention"),
    ("mistral-7b-v0.1", ("sliding_window",), 0.5, r"sliding_window: expected an integer >= 1"),
    ("nemotron-3-nano-30b-a3b", ("hybrid_override_pattern",), KeyError, r"hybrid_override_pattern: missing"),
    ("nemotron-3-nano-30b-a3b", ("mamba_head_dim",), 1_000_000, r"layer 0: ssm bytes would be 3.28e\+10, beyond 1e\+10; check"),
    ("qwen3-32b", ("rope_scaling",), {"rope_type": "dynamic", "factor": 1e308}, r"rope_scaling.factor: expected"),
])
def test_malformed_variants_give_one_line(name, path, value, message):
    with pytest.raises(dg.ConfigError, match=message) as e:
        dg.model_from_config(_broken(name, path, value), source=f"{name}.json")
    assert "\n" not in str(e.value) and str(e.value).startswith(f"{name}.json: ")


def test_jamba_layout():
    m = dg.load_model("jamba-mini-1.5")
    assert [layer.index for layer in m.layers if layer.mixer == "attention"] == [4, 12, 20, 28]
    assert [layer.index for layer in m.layers if layer.ffn == "moe"] == list(range(1, 32, 2))
    assert math.isclose(m.total_params + m.embedding_params + m.lm_head_params, 51.6e9, rel_tol=0.01)  # "52B"


def test_the_docs_table_is_what_depgraph_computes():
    """docs/models.md's side-by-side table, row by row, against handoff_bytes now."""
    text = (Path(__file__).parents[1] / "docs" / "models.md").read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| ") and line.count("|") == 9
            and line.split("|")[3].strip().replace(",", "").isdigit()]
    assert len(rows) == 4 * (len(dg.catalog()) + 1)
    for line in rows:
        name, _family, prompt, tp, kv, ssm, conv, _total = (c.strip() for c in line.strip("|").split("|"))
        model = dg.model_from_config(BAMBA_9B) if name.startswith("bamba") else dg.load_model(name)
        got = dg.handoff_bytes(model, prompt_tokens=int(prompt.replace(",", "")), tp=int(tp.split()[0]))
        assert [got["kv"], got["ssm"], got["conv"]] == [int(v.replace(",", "")) for v in (kv, ssm, conv)], line


def test_layers_block_type_entries_must_be_words():
    cfg = _catalog("nemotron-3-nano-30b-a3b")
    words = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
    saved = {k: v for k, v in cfg.items() if k != "hybrid_override_pattern"}
    saved["layers_block_type"] = [words[c] for c in cfg["hybrid_override_pattern"]]
    saved["layers_block_type"][0] = ["mamba"]
    with pytest.raises(dg.ConfigError, match=r"layers_block_type\[0\]: expected one of mamba, attention, mlp, moe"):
        dg.model_from_config(saved)


@pytest.mark.parametrize("keep_layers", [True, False])
def test_nemotron_h_in_the_transformers_5_form_loads_as_the_older_form(keep_layers):
    # transformers 5 saves NemotronHConfig with layers_block_type (one word a layer) instead of
    # hybrid_override_pattern, and num_hidden_layers only as a property (the list's length), so not in the file
    cfg = _catalog("nemotron-3-nano-30b-a3b")
    words = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
    new = {k: v for k, v in cfg.items() if k != "hybrid_override_pattern" and (keep_layers or k != "num_hidden_layers")}
    new["layers_block_type"] = [words[c] for c in cfg["hybrid_override_pattern"]]
    old, same = dg.model_from_config(cfg, name="n"), dg.model_from_config(new, name="n")
    assert same == old and same.num_layers == 52 and same.count_kinds() == {"mamba2": 23, "moe": 23, "attention": 6}
    assert dg.handoff_bytes(same, prompt_tokens=1024) == dg.handoff_bytes(old, prompt_tokens=1024)


def test_nemotron_h_layer_count_and_list_must_agree():
    cfg = _catalog("nemotron-3-nano-30b-a3b")
    words = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
    new = {k: v for k, v in cfg.items() if k != "hybrid_override_pattern"}
    new["layers_block_type"] = [words[c] for c in cfg["hybrid_override_pattern"]][:-1]
    with pytest.raises(dg.ConfigError, match=r"layers_block_type: expected 52 entries \(num_hidden_layers\), got 51"):
        dg.model_from_config(new)
    del new["num_hidden_layers"]
    new["layers_block_type"] = []
    with pytest.raises(dg.ConfigError, match=r"layers_block_type: expected 1 to 10,000 layers, got 0"):
        dg.model_from_config(new)
