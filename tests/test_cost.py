"""The cost model: prefill FLOPs and time, decode bytes and operators, validation."""

import json
import math
from importlib import resources

import pytest
from hypothesis import given
from hypothesis import strategies as st

import depgraph as dg

MODELS = ("qwen3.6-35b-a3b", "nemotron-3-nano-30b-a3b", "qwen3-32b")


def layers_of(kind: str):
    """The first layer of ``kind`` in each catalog model that has one."""
    out = []
    for name in MODELS:
        model = dg.load_model(name)
        layer = next((layer for layer in model.layers if layer.kind == kind), None)
        if layer is not None:
            out.append(pytest.param(model, layer, id=f"{name}-L{layer.index}"))
    return out


ATTENTION = layers_of("attention")
RECURRENT = layers_of("gdn") + layers_of("mamba2")
MOE = [p for p in layers_of("attention") + layers_of("gdn") + layers_of("moe") if p.values[1].num_experts]
ALL_LAYERS = [pytest.param(m, layer, id=f"{m.name}-L{layer.index}") for m in map(dg.load_model, MODELS) for layer in m.layers]
prompts = st.integers(1, 200_000)


def test_defaults():
    cm = dg.CostModel()
    assert cm.gpu == dg.load_gpu("h100-sxm")  # a real GPU by default
    # by default the GPU's values fitted to measured operator profiles (data/fitted.json), read there directly
    fitted = json.loads((resources.files("depgraph.specs") / "data" / "fitted.json").read_text())["fits"]["h100-sxm"]
    values = fitted["values"]
    assert cm.fit is not None and cm.fit.dataset == fitted["dataset"]
    assert (cm.prefill_mfu, cm.conv_share, cm.activation_hop_s, cm.decode_hbm_efficiency) == (
        values["mfu"], 0.10, 0.05e-3, values["hbm_efficiency"]) == (0.644917, 0.10, 0.05e-3, 0.852134)
    assert (cm.attention_efficiency, cm.kv_efficiency, cm.layer_overhead_s, cm.prefill_overhead_s,
            cm.attention_fixed_s, cm.allreduce_latency_s, cm.allreduce_hop_latency_s, cm.allreduce_efficiency) == (
        values["attention_mfu"], values["kv_hbm_efficiency"], values["decode_layer_overhead_s"],
        values["prefill_layer_overhead_s"], values["attention_floor_s"], values["collective_latency_s"],
        values["collective_hop_latency_s"], values["collective_efficiency"])
    assert cm.replace(mfu=1.0).prefill_mfu == 1.0 and cm.prefill_mfu == 0.644917  # a new value, the old one untouched
    assert cm.describe() == ("h100-sxm, prefill MFU 0.645, decode HBM efficiency 0.852, attention 0.165, "
                             f"KV reads 0.909, 34.1 us a layer ({cm.fit.describe()})")
    assert cm.fit.describe() == f"fitted to {fitted['dataset']}"
    assert cm.as_dict() == {"gpu": "h100-sxm", "link": "ib-ndr", "mfu": 0.644917, "hbm_efficiency": 0.852134,
                            "attention_mfu": 0.165374, "kv_hbm_efficiency": 0.908903,
                            "decode_layer_overhead_s": 3.40529e-05, "collective_latency_s": 2.36451e-05,
                            "collective_hop_latency_s": 4.20509e-07, "attention_floor_s": 1.66547e-05,
                            "prefill_layer_overhead_s": 6.91984e-05, "collective_efficiency": 1.54919,
                            "fitted_to": cm.fit.describe(), "prefill_tp": 1, "decode_tp": 1, "prefill_pp": 1,
                            "decode_pp": 1, "expert_routing": "uniform", "attention_flops_per_key": 4.0,
                            "token_edge": False}
    # fitted_defaults=False: the plain constants (MFU 0.6, HBM efficiency 0.8, no fixed costs, 10 us all-reduce at 0.8)
    plain = dg.CostModel(fitted_defaults=False)
    assert plain.fit is None
    assert (plain.prefill_mfu, plain.conv_share, plain.activation_hop_s, plain.decode_hbm_efficiency) == (0.6, 0.10, 0.05e-3, 0.8)
    assert (plain.attention_efficiency, plain.kv_efficiency, plain.layer_overhead_s, plain.prefill_overhead_s,
            plain.attention_fixed_s, plain.allreduce_latency_s, plain.allreduce_hop_latency_s,
            plain.allreduce_efficiency) == (0.6, 0.8, 0.0, 0.0, 0.0, 10e-6, 0.0, 0.8)
    assert plain.replace(mfu=1.0).prefill_mfu == 1.0 and plain.prefill_mfu == 0.6
    assert plain.describe() == "h100-sxm, prefill MFU 0.6, decode HBM efficiency 0.8"
    assert plain.as_dict() == {"gpu": "h100-sxm", "link": "ib-ndr", "mfu": 0.6, "hbm_efficiency": 0.8, "prefill_tp": 1,
                               "decode_tp": 1, "prefill_pp": 1, "decode_pp": 1, "expert_routing": "uniform",
                               "attention_flops_per_key": 4.0, "token_edge": False}
    assert dg.CostModel(gpu="H100").gpu.name == "h100-sxm"
    study = dg.CostModel(gpu="study-effective")  # the calibration device carries its own efficiency, and has no fit
    assert study.fit is None and study.prefill_mfu == 0.6
    assert study.decode_hbm_efficiency == 1.0 and study.decode_bytes_per_s == 3.35e12 / 4
    assert study.replace(gpu="h200").decode_hbm_efficiency == 0.852134  # a GPU's efficiency does not stick (h200: h100's fit)
    assert study.replace(gpu="h200", fitted_defaults=False).decode_hbm_efficiency == 0.8
    assert dg.CostModel(gpu="h200", hbm_efficiency=0.7).decode_bytes_per_s == 4.8e12 * 0.7  # the field wins
    # a non-default assumption is named wherever the cost model is described
    assert dg.CostModel(expert_routing="zipf:0.5", token_edge=True).describe().endswith(
        ", expert routing zipf:0.5, token edge")
    assert dg.CostModel(expert_routing="zipf:0.5", token_edge=True, fitted_defaults=False).describe() == (
        "h100-sxm, prefill MFU 0.6, decode HBM efficiency 0.8, expert routing zipf:0.5, token edge")
    assert cm.link == dg.load_link("ib-ndr") and dg.CostModel(link="25g").link.name == "25g"
    with pytest.raises(dg.ConfigError, match=r"hbm_efficiency: expected a finite number > 0 and <= 1"):
        dg.CostModel(hbm_efficiency=1.5)


# ------------------------------------------------------------------ prefill


@pytest.mark.parametrize("name", MODELS)
def test_prefill_time_scales_as_one_over_mfu(name):
    model = dg.load_model(name)
    # the plain constants: no fixed per-layer cost, which would not scale with the MFU
    full, quarter = dg.CostModel(mfu=1.0, fitted_defaults=False), dg.CostModel(mfu=0.25, fitted_defaults=False)
    for layer in model.layers:
        # Exact: scaling a divisor by a power of two commutes with rounding.
        assert quarter.prefill_layer_s(layer, 4096) == 4 * full.prefill_layer_s(layer, 4096)
        assert quarter.prefill_layer_flops(layer, 4096) == full.prefill_layer_flops(layer, 4096)


@given(st.floats(0.001, 1.0), prompts)
def test_prefill_time_times_mfu_is_constant(mfu, prompt_tokens):
    model = dg.load_model("qwen3.6-35b-a3b")
    # the plain constants: no fixed per-layer cost, which would not scale with the MFU
    full, partial = dg.CostModel(mfu=1.0, fitted_defaults=False), dg.CostModel(mfu=mfu, fitted_defaults=False)
    for layer in model.layers[:4]:  # both kinds of layer
        # 1e-15 relative: three roundings (mfu x peak, the division, x mfu), ~1.1e-16 each.
        assert partial.prefill_layer_s(layer, prompt_tokens) * mfu == pytest.approx(
            full.prefill_layer_s(layer, prompt_tokens), rel=1e-15)
    # 1e-12 relative: a sum of 40 such layers.
    assert partial.prefill_s(model, prompt_tokens) * mfu == pytest.approx(full.prefill_s(model, prompt_tokens), rel=1e-12)


@pytest.mark.parametrize("model, layer", ATTENTION)
@given(prompt_tokens=prompts)
def test_doubling_the_prompt_more_than_doubles_attention_flops(model, layer, prompt_tokens):
    cm = dg.CostModel()
    one, two = cm.prefill_layer_flops(layer, prompt_tokens), cm.prefill_layer_flops(layer, 2 * prompt_tokens)
    assert two > 2 * one
    # Exact: every term is an integer below 2**53, so float arithmetic does not round.
    assert two < 2**53
    s = prompt_tokens
    assert two - 2 * one == 4 * s * s * layer.attention_width  # 2(2s)^2 w - 2(2 s^2 w): the quadratic term


@pytest.mark.parametrize("model, layer", RECURRENT + layers_of("moe"))
@given(prompt_tokens=prompts)
def test_doubling_the_prompt_exactly_doubles_linear_layers(model, layer, prompt_tokens):
    cm = dg.CostModel(fitted_defaults=False)  # the plain constants: no fixed per-layer cost, which does not double
    one = cm.prefill_layer_flops(layer, prompt_tokens)
    assert layer.attention_width == 0
    assert one == (2 * layer.active_params + 4 * layer.recurrent_state_elems) * prompt_tokens  # exact, as above
    assert cm.prefill_layer_flops(layer, 2 * prompt_tokens) == 2 * one
    assert cm.prefill_layer_s(layer, 2 * prompt_tokens) == 2 * cm.prefill_layer_s(layer, prompt_tokens)


def test_gdn_layer_has_a_recurrent_term():
    layer = dg.load_model("qwen3.6-35b-a3b").layers[0]
    assert layer.kind == "gdn" and layer.recurrent_state_elems > 0
    with_term = dg.CostModel().prefill_layer_flops(layer, 1000)
    without = dg.CostModel(recurrent_flops_per_state_elem=0.0).prefill_layer_flops(layer, 1000)
    assert with_term - without == 4.0 * layer.recurrent_state_elems * 1000


# ------------------------------------------------------------------- decode


@pytest.mark.parametrize("model, layer", MOE)
@given(tokens=st.integers(1, 5000))
def test_a_batch_touches_between_k_and_all_experts(model, layer, tokens):
    k, e = layer.experts_per_token, layer.num_experts
    d = dg.CostModel().distinct_experts(layer, tokens)
    # 1e-12 relative below k: 1 - (1 - k/E) is k/E only up to rounding.
    assert k * (1 - 1e-12) <= d <= e
    assert d >= dg.CostModel().distinct_experts(layer, tokens - 1)  # monotone in tokens
    cm = dg.CostModel()
    state = layer.kv_bytes_per_token * 7 * tokens + tokens * (layer.ssm_bytes + layer.conv_bytes)
    weights = cm.decode_layer_bytes(model, layer, [7] * tokens) - state
    # 1e-12 relative: the weight bytes and the state bytes are summed before we take them apart.
    assert weights <= layer.total_params * model.dtype_bytes * (1 + 1e-12)


@pytest.mark.parametrize("model, layer", MOE)
def test_expert_count_limits(model, layer):
    d = dg.CostModel().distinct_experts
    assert d(layer, 0) == 0.0
    # 1e-12 relative: as above.
    assert d(layer, 1) == pytest.approx(layer.experts_per_token, rel=1e-12)
    assert d(layer, 1_000_000) == layer.num_experts  # (1 - k/E)**1e6 underflows to zero
    assert d(layer, 2) < 2 * layer.experts_per_token  # two tokens may share experts


def test_dense_layer_touches_no_routed_experts():
    layer = dg.load_model("qwen3-32b").layers[0]
    assert dg.CostModel().distinct_experts(layer, 64) == 0.0


@pytest.mark.parametrize("model, layer", RECURRENT)
@given(conv_share=st.floats(0.001, 1.0), context=st.integers(1, 100_000))
def test_recurrent_decode_splits_into_conv_and_ssm(model, layer, conv_share, context):
    cm = dg.CostModel(conv_share=conv_share)
    total = cm.decode_layer_s(model, layer, context)
    ops = cm.decode_operators(model, layer, context)
    assert [(op, reads) for op, reads, _ in ops] == [("conv", ("conv",)), ("ssm", ("ssm",))]
    conv, ssm = ops[0][2], ops[1][2]
    # 1e-15 relative: one or two roundings of ~1.1e-16 each.
    assert conv / total == pytest.approx(conv_share, rel=1e-15)
    if conv_share < 1.0:
        # 1e-15 absolute: ssm = total - conv carries a few ulps of total, however small ssm is.
        assert ssm / total == pytest.approx(1.0 - conv_share, rel=0, abs=1e-15)
    assert conv + ssm == pytest.approx(total, rel=1e-15)
    assert conv >= 0 and ssm >= 0


@pytest.mark.parametrize("model, layer", ALL_LAYERS)
def test_decode_operators_sum_to_the_layer(model, layer):
    cm = dg.CostModel()
    ops = cm.decode_operators(model, layer, 2048)
    total = cm.decode_layer_s(model, layer, 2048)
    # 1e-15 relative: as above.
    assert sum(d for _, _, d in ops) == pytest.approx(total, rel=1e-15)
    if layer.ssm_bytes:
        assert [op for op, _, _ in ops] == ["conv", "ssm"]
    elif layer.kv_bytes_per_token:
        assert ops == [("attn", ("kv",), total)]
    else:
        assert ops == [("ffn", (), total)]
    for _, reads, _ in ops:
        assert set(reads) <= set(layer.components)


def test_decode_is_memory_bound():
    model = dg.load_model("qwen3-32b")
    layer = model.layers[0]
    cm = dg.CostModel(fitted_defaults=False)  # the plain constants: one HBM efficiency (0.8), no fixed costs
    nbytes = cm.decode_layer_bytes(model, layer, [1000])
    assert nbytes == layer.total_params * 2 + layer.kv_bytes_per_token * 1000
    assert cm.decode_layer_s(model, layer, 1000) == nbytes / (cm.gpu.hbm_bytes_per_s * 0.8)
    assert cm.replace(decode_layer_overhead_s=1e-6).decode_layer_s(model, layer, 1000) == \
        1e-6 + nbytes / (cm.gpu.hbm_bytes_per_s * 0.8)
    # the fitted defaults: the layer's fixed cost, weights at the HBM efficiency, KV at the KV reads' own
    fit = dg.CostModel()
    kv = layer.kv_bytes_per_token * 1000
    assert fit.decode_layer_kv_bytes(layer, [1000]) == kv
    assert fit.decode_layer_s(model, layer, 1000) == pytest.approx(
        fit.layer_overhead_s + fit.attention_fixed_s + (nbytes - kv) / (fit.gpu.hbm_bytes_per_s * 0.852134)
        + kv / (fit.gpu.hbm_bytes_per_s * 0.908903), rel=1e-15)


def test_transfer_time():
    assert dg.CostModel.transfer_s("25g", 3.125e9) == 1.0
    assert dg.CostModel.transfer_s(dg.Link("slow", 8.0, latency_s=0.5), 1e9) == 1.5


# --------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "params, field",
    [
        ({"mfu": 0}, "mfu"),
        ({"mfu": 0.0}, "mfu"),
        ({"mfu": 1.5}, "mfu"),
        ({"mfu": float("nan")}, "mfu"),
        ({"mfu": float("inf")}, "mfu"),
        ({"mfu": -0.4}, "mfu"),
        ({"mfu": "0.4"}, "mfu"),
        ({"mfu": True}, "mfu"),
        ({"attention_mfu": 1.5}, "attention_mfu"),
        ({"kv_hbm_efficiency": 0}, "kv_hbm_efficiency"),
        ({"collective_efficiency": 2.5}, "collective_efficiency"),
        ({"attention_floor_s": -1e-6}, "attention_floor_s"),
        ({"fitted_defaults": "yes"}, "fitted_defaults"),
        ({"conv_share": -0.1}, "conv_share"),
        ({"conv_share": 0}, "conv_share"),
        ({"conv_share": 1.01}, "conv_share"),
        ({"hbm_efficiency": 0}, "hbm_efficiency"),
        ({"activation_hop_s": -1e-3}, "activation_hop_s"),
        ({"decode_layer_overhead_s": float("nan")}, "decode_layer_overhead_s"),
        ({"recurrent_flops_per_state_elem": -4.0}, "recurrent_flops_per_state_elem"),
        ({"gpu": "tpu-v9"}, "gpu"),
        ({"gpu": 3}, "gpu"),
    ],
)
def test_bad_parameters_name_the_field(params, field):
    with pytest.raises(dg.ConfigError) as err:
        dg.CostModel(**params)
    message = str(err.value)
    assert message.startswith(f"{field}: expected ")
    value = next(iter(params.values()))
    if field != "gpu" and isinstance(value, (int, float)) and not isinstance(value, bool):
        value = float(value)  # numeric fields report the float they were read as
    assert message.endswith(f"got {value!r}")  # and the value given
    if field == "gpu":
        assert "h100-sxm" in message and "study-effective" in message  # lists what is allowed


def test_replace_validates_too():
    with pytest.raises(dg.ConfigError, match="^mfu: "):
        dg.CostModel().replace(mfu=2.0)
    with pytest.raises(dg.ConfigError, match="^mfu: "):
        dg.single_request("qwen3-32b", prompt_tokens=16, link="25g", mfu=0.0)


@pytest.mark.parametrize("mfu", [1e-9, 0.5, 1.0])
def test_edge_values_are_accepted(mfu):
    assert math.isfinite(dg.CostModel(mfu=mfu, conv_share=1.0, activation_hop_s=0.0).prefill_s(dg.load_model("qwen3-32b"), 8))
