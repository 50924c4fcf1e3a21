"""Model catalog and config loading."""

import json

import pytest

import depgraph as dg


# Figure 3 of the handoff study, to the byte: these are exact products of the
# config fields (see ../shared/reference/model-facts.md), so the tolerance is 0.
@pytest.mark.parametrize(
    "name, tokens, total_bytes, recurrent_share",
    [
        ("qwen3.6-35b-a3b", 1024, 85_360_640, 0.75),
        ("qwen3.6-35b-a3b", 32768, 735_477_760, 0.09),
        ("nemotron-3-nano-30b-a3b", 1024, 55_373_824, 0.89),
        ("nemotron-3-nano-30b-a3b", 32768, 250_408_960, 0.20),
    ],
)
def test_figure3_bytes(name, tokens, total_bytes, recurrent_share):
    b = dg.handoff_bytes(dg.load_model(name), prompt_tokens=tokens)
    assert sum(b.values()) == total_bytes
    # The study rounds the share to whole percent.
    assert (b["ssm"] + b["conv"]) / total_bytes == pytest.approx(recurrent_share, abs=0.005)


def test_study_rounded_totals_in_mb():
    q = dg.load_model("qwen3.6-35b-a3b")
    n = dg.load_model("nemotron-3-nano-30b-a3b")
    assert round(sum(dg.handoff_bytes(q, prompt_tokens=1024).values()) / 1e6, 2) == 85.36
    assert round(sum(dg.handoff_bytes(q, prompt_tokens=32768).values()) / 1e6, 1) == 735.5
    assert round(sum(dg.handoff_bytes(n, prompt_tokens=1024).values()) / 1e6, 2) == 55.37
    assert round(sum(dg.handoff_bytes(n, prompt_tokens=32768).values()) / 1e6, 1) == 250.4


def test_qwen3_32b_kv_per_token():
    m = dg.load_model("qwen3-32b")
    assert m.kv_bytes_per_token == 262_144
    assert dg.handoff_bytes(m, prompt_tokens=1) == {"kv": 262_144, "ssm": 0, "conv": 0}


@pytest.mark.parametrize(
    "name, per_layer",
    [
        ("qwen3.6-35b-a3b", {"attention": (2048, 0, 0), "gdn": (0, 2_097_152, 49_152)}),
        ("nemotron-3-nano-30b-a3b", {"attention": (1024, 0, 0), "mamba2": (0, 2_097_152, 36_864), "moe": (0, 0, 0)}),
    ],
)
def test_layer_state_sizes(name, per_layer):
    for layer in dg.load_model(name).layers:
        assert (layer.kv_bytes_per_token, layer.ssm_bytes, layer.conv_bytes) == per_layer[layer.kind]


def test_layouts():
    q = dg.load_model("QWEN3.6-35B-A3B")
    assert [l.index for l in q.layers if l.kind == "attention"] == [3, 7, 11, 15, 19, 23, 27, 31, 35, 39]
    n = dg.load_model("nemotron-3-nano-30b-a3b")
    assert n.count_kinds() == {"mamba2": 23, "moe": 23, "attention": 6}


# model-facts.md: about 2.44 B, 2.88 B and 31.2 B active non-embedding parameters.
@pytest.mark.parametrize("name, active_b", [("qwen3.6-35b-a3b", 2.44), ("nemotron-3-nano-30b-a3b", 2.88), ("qwen3-32b", 31.2)])
def test_active_params_from_config(name, active_b):
    assert dg.load_model(name).active_params / 1e9 == pytest.approx(active_b, rel=0.01)


def test_layer_types_and_interval_agree(tmp_path):
    base = json.loads(open(dg.catalog()["qwen3.6-35b-a3b"]).read())
    text = dict(base["text_config"])
    text.pop("full_attention_interval")
    text["layer_types"] = ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(40)]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(text))  # not nested this time
    a = dg.load_model(path)
    b = dg.load_model("qwen3.6-35b-a3b")
    assert [l.kind for l in a.layers] == [l.kind for l in b.layers]
    assert dg.handoff_bytes(a, prompt_tokens=77) == dg.handoff_bytes(b, prompt_tokens=77)
    assert dg.load_model(tmp_path).name == tmp_path.name  # a folder holding config.json


def test_dense_head_dim_default_and_ssm_dtype(tmp_path):
    cfg = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
           "num_hidden_layers": 32, "intermediate_size": 14336, "vocab_size": 128256, "torch_dtype": "bfloat16"}
    m = dg.model_from_config(cfg)
    assert m.kv_bytes_per_token == 32 * 2 * 8 * 128 * 2

    q = json.loads(open(dg.catalog()["qwen3.6-35b-a3b"]).read())
    q["text_config"].pop("mamba_ssm_dtype")
    assert dg.model_from_config(q).layers[0].ssm_bytes == 1_048_576  # the model dtype (bf16) when absent, as vLLM
    q["text_config"]["mamba_ssm_dtype"] = "float32"
    assert dg.model_from_config(q).layers[0].ssm_bytes == 2_097_152


def test_kv_dtype_override_changes_only_kv():
    a = dg.load_model("qwen3.6-35b-a3b")
    b = dg.load_model("qwen3.6-35b-a3b", kv_dtype="fp8")
    ba, bb = dg.handoff_bytes(a, prompt_tokens=1000), dg.handoff_bytes(b, prompt_tokens=1000)
    assert bb["kv"] * 2 == ba["kv"] and bb["ssm"] == ba["ssm"] and bb["conv"] == ba["conv"]


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda c: c.pop("num_hidden_layers"), "num_hidden_layers: missing"),
        (lambda c: c.update(num_hidden_layers=-3), "num_hidden_layers: expected an integer >= 1"),
        (lambda c: c.update(hybrid_override_pattern="MEX"), "hybrid_override_pattern"),
        (lambda c: c.update(hybrid_override_pattern="M" * 51 + "Q"), "hybrid_override_pattern[51]"),
        (lambda c: c.update(mamba_ssm_cache_dtype="float7"), "mamba_ssm_cache_dtype: expected a dtype"),
        (lambda c: c.update(num_experts_per_tok=500), "num_experts_per_tok: expected at most"),
        (lambda c: c.update(hidden_size="big"), "hidden_size: expected an integer"),
    ],
)
def test_bad_nemotron_configs_name_the_field(mutate, message):
    cfg = json.loads(open(dg.catalog()["nemotron-3-nano-30b-a3b"]).read())
    mutate(cfg)
    with pytest.raises(dg.ConfigError) as err:
        dg.model_from_config(cfg, source="cfg.json")
    assert message in str(err.value)
    assert "cfg.json" in str(err.value)


def test_unknown_model_and_bad_json(tmp_path):
    with pytest.raises(dg.ConfigError, match="neither a catalog model"):
        dg.load_model("llama-9000")
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(dg.ConfigError, match="not valid JSON"):
        dg.load_model(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(dg.ConfigError, match="JSON object"):
        dg.load_model(bad)
    bad.write_text('{"hidden_size": 8}')
    with pytest.raises(dg.ConfigError, match="num_hidden_layers: missing"):
        dg.load_model(bad)


# ------------------------------------------------------------ config families as transformers saves them (issue 14)

import copy  # noqa: E402
import re  # noqa: E402
from pathlib import Path  # noqa: E402
import json as _json  # noqa: E402


def _catalog_config(name: str) -> dict:
    return _json.loads(Path(dg.catalog()[name]).read_text())


def test_an_architecture_depgraph_does_not_read_is_refused_by_name():
    cfg = _catalog_config("qwen3.6-35b-a3b")["text_config"]
    for model_type, named in (("zamba2", "Zamba2"), ("lfm2", "LFM2"), ("somebody_new", "")):
        with pytest.raises(dg.ConfigError, match=rf"model_type: '{model_type}'{re.escape(f' ({named})') if named else ''} "
                                                  r"is not a supported architecture; supported: Qwen3-Next.*; Jamba.*"
                                                  r"Falcon-H1.*Granite-4.0-H.*Bamba.*gpt_oss"):
            dg.model_from_config({**cfg, "model_type": model_type})


def test_nemotron_h_from_layers_block_type_is_the_same_model():
    cfg = _catalog_config("nemotron-3-nano-30b-a3b")
    words = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
    saved = {k: v for k, v in cfg.items() if k != "hybrid_override_pattern"}
    saved["layers_block_type"] = [words[c] for c in cfg["hybrid_override_pattern"]]
    a, b = dg.model_from_config(cfg), dg.model_from_config(saved)
    assert a.layers == b.layers and dg.handoff_bytes(a, prompt_tokens=1024) == dg.handoff_bytes(b, prompt_tokens=1024)
    saved["layers_block_type"][3] = "conv"
    with pytest.raises(dg.ConfigError, match=r"layers_block_type\[3\]: expected one of mamba, attention, mlp, moe"):
        dg.model_from_config(saved)


def test_defaults_as_transformers_applies_them():
    nemotron = _catalog_config("nemotron-3-nano-30b-a3b")
    assert nemotron["n_groups"] == 8
    without = {k: v for k, v in nemotron.items() if k != "n_groups"}  # transformers' default is 8, not 1
    assert dg.handoff_bytes(dg.model_from_config(without), prompt_tokens=1024)["conv"] == \
        dg.handoff_bytes(dg.load_model("nemotron-3-nano-30b-a3b"), prompt_tokens=1024)["conv"]
    qwen = _catalog_config("qwen3.6-35b-a3b")
    assert qwen["text_config"]["full_attention_interval"] == 4
    no_interval = copy.deepcopy(qwen)
    del no_interval["text_config"]["full_attention_interval"]  # transformers and vLLM default to 4
    assert dg.model_from_config(no_interval).layers == dg.load_model("qwen3.6-35b-a3b").layers


def test_attention_head_dim_and_an_outer_dtype_are_read():
    cfg = {k: v for k, v in _catalog_config("nemotron-3-nano-30b-a3b").items() if k != "head_dim"}
    cfg["attention_head_dim"] = 128  # Nemotron-H's name; hidden_size / heads would give another width
    assert dg.model_from_config(cfg).layers == dg.load_model("nemotron-3-nano-30b-a3b").layers
    qwen = _catalog_config("qwen3.6-35b-a3b")
    del qwen["text_config"]["dtype"]
    qwen["dtype"] = "float128"  # read (and refused) from the outer config when text_config has none
    with pytest.raises(dg.ConfigError, match=r"config: dtype: expected a dtype"):
        dg.model_from_config(qwen)


def test_a_dense_config_with_layer_types_reads_as_dense():
    cfg = _catalog_config("qwen3-32b")
    cfg["layer_types"] = ["full_attention"] * cfg["num_hidden_layers"]
    m = dg.model_from_config(cfg)
    assert m.family == "dense" and m.layers == dg.load_model("qwen3-32b").layers
    cfg["layer_types"][1] = "sliding_attention"
    # Qwen3 without use_sliding_window: transformers drops the window, vLLM serves full attention
    assert dg.model_from_config(cfg).layers == dg.load_model("qwen3-32b").layers
    cfg["model_type"] = "llama"  # vLLM's Llama windows layer by layer
    with pytest.raises(dg.ConfigError, match=r"sliding_window: missing \(a required integer"):
        dg.model_from_config(cfg)
    cfg["sliding_window"] = 4096
    m = dg.model_from_config(cfg)
    assert [layer.kv_window_tokens for layer in m.layers[:3]] == [0, 4096, 0]
    cfg["layer_types"][2] = "chunked_attention"
    with pytest.raises(dg.ConfigError, match=r"layer_types\[2\]: expected one of full_attention, sliding_attention; "
                                              r"got 'chunked_attention'"):
        dg.model_from_config(cfg)


def test_qwen3_next_state_in_the_model_dtype_unless_the_config_says_otherwise():
    """Qwen3-Next-80B-A3B's public shape: 48 layers, every fourth full attention, 32 value heads of 128 x 128.
    vLLM's gated_delta_net_state_dtype keeps the state in the model dtype (bf16) under --mamba-ssm-cache-dtype auto;
    Qwen3-Next has no config hook (a mamba_ssm_dtype field is not read), Qwen3.5/3.6 do (mamba_ssm_dtype)."""
    cfg = {"model_type": "qwen3_next", "num_hidden_layers": 48, "full_attention_interval": 4, "hidden_size": 2048,
           "vocab_size": 151936, "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
           "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
           "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "intermediate_size": 5120,
           "torch_dtype": "bfloat16"}
    assert dg.handoff_bytes(dg.model_from_config(cfg), prompt_tokens=1024)["ssm"] == 37_748_736  # 36 x 32 x 128^2 x 2 B
    assert dg.handoff_bytes(dg.model_from_config({**cfg, "mamba_ssm_dtype": "float32"}), prompt_tokens=1024)["ssm"] \
        == 37_748_736
    qwen35 = {**cfg, "model_type": "qwen3_5_moe_text", "mamba_ssm_dtype": "float32"}
    assert dg.handoff_bytes(dg.model_from_config(qwen35), prompt_tokens=1024)["ssm"] == 75_497_472
    flag = dg.model_from_config(cfg).with_ssm_dtype("float32")  # the engine flag, --ssm-dtype
    assert dg.handoff_bytes(flag, prompt_tokens=1024)["ssm"] == 75_497_472


def test_a_prompt_longer_than_the_context_is_refused_with_the_limit():
    cfg = {**_catalog_config("qwen3-32b"), "max_position_embeddings": 40_960}
    m = dg.model_from_config(cfg, name="qwen3-32b-ctx")
    assert m.max_position_embeddings == 40_960 and dg.handoff_bytes(m, prompt_tokens=40_960)["kv"] > 0
    limit = r"longer than qwen3-32b-ctx's context of 40,960 tokens \(max_position_embeddings, RoPE-scaled as vLLM"
    with pytest.raises(dg.ConfigError, match=rf"^prompt_tokens: a prompt of 40,961 tokens is {limit}"):
        dg.single_request(m, prompt_tokens=40_961, link="25g")
    with pytest.raises(dg.ConfigError, match=rf"^prompt_tokens: a prompt plus its output of 41,000 tokens is {limit}"):
        dg.loadtest(m, handoff="push", qps=1, prompt_tokens=40_000, out_tokens=1_000, num_prompts=2)
    from depgraph.serving.capacity import plan
    with pytest.raises(dg.ConfigError, match=rf"^out_tokens: a prompt plus its output of 41,000 tokens is {limit}"):
        plan(m, qps=1, prompt_tokens=40_000, out_tokens=1_000, tpot_s=0.01, max_num_seqs=8)
    assert dg.load_model("nemotron-3-nano-30b-a3b").max_position_embeddings is None  # its catalog file does not say
    with pytest.raises(dg.ConfigError, match=r"a prompt of 10,000,000 tokens is longer than qwen3.6-35b-a3b's context "
                                             r"of 262,144 tokens"):
        dg.single_request("qwen3.6-35b-a3b", prompt_tokens=10_000_000, link="25g")


# ------------------------------------------------------------ tensor parallelism (vLLM's sharding rules)

from depgraph.specs.models import handoff_bytes_per_rank  # noqa: E402


@pytest.mark.parametrize("name", ["qwen3.6-35b-a3b", "nemotron-3-nano-30b-a3b", "qwen3-32b"])
@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_bytes_over_the_decode_ranks(name, tp):
    m = dg.load_model(name)
    one = dg.handoff_bytes(m, prompt_tokens=1024)
    total, rank = dg.handoff_bytes(m, prompt_tokens=1024, tp=tp), handoff_bytes_per_rank(m, prompt_tokens=1024, tp=tp)
    assert list(total) == list(one) == ["kv", "ssm", "conv"]
    assert total["ssm"] == one["ssm"] and total["conv"] == one["conv"]  # split by heads / channels, none repeated
    assert all(rank[c] * tp == total[c] for c in total)
    kv_heads = max(layer.kv_heads for layer in m.layers)  # 2 (both hybrids) or 8 (Qwen3-32B)
    assert total["kv"] == one["kv"] * max(1, tp // kv_heads)  # KV heads replicated once ranks outnumber them
    assert all(total[c] >= one[c] for c in one)  # TP never reduces the bytes held


def test_a_single_mamba2_group_is_padded_to_one_per_rank():
    cfg = {**_catalog_config("nemotron-3-nano-30b-a3b"), "n_groups": 1}
    m = dg.model_from_config(cfg)
    state, kernel = cfg["ssm_state_size"], cfg["conv_kernel"]
    mamba = sum(layer.mixer == "mamba2" for layer in m.layers)
    one, four = dg.handoff_bytes(m, prompt_tokens=16), dg.handoff_bytes(m, prompt_tokens=16, tp=4)
    assert four["conv"] - one["conv"] == mamba * 3 * 2 * state * (kernel - 1) * 2  # 3 extra groups, bf16


@pytest.mark.parametrize("changes, tp, message", [
    ({}, 3, r"does not divide num_attention_heads \(64\)"),
    ({"num_attention_heads": 48}, 12, r"neither divides nor is a multiple of num_key_value_heads \(8\)"),
])
def test_a_tp_vllm_cannot_shard_is_refused(changes, tp, message):
    m = dg.model_from_config({**_catalog_config("qwen3-32b"), **changes})
    with pytest.raises(dg.ConfigError, match=rf"^tp: {tp} {message} of layer 0; vLLM"):
        dg.handoff_bytes(m, prompt_tokens=16, tp=tp)


def test_bytes_command_with_tp(capsys):
    from depgraph.cli import main

    assert main(["bytes", "qwen3.6-35b-a3b", "--prompt-tokens", "1024", "--tp", "8", "--json"]) == 0
    out = _json.loads(capsys.readouterr().out)
    assert out["kv_bytes"] == 4 * 20_971_520 and out["tp"] == 8 and out["per_rank"]["kv_bytes"] == 10_485_760
    assert main(["bytes", "qwen3.6-35b-a3b", "--prompt-tokens", "1024", "--tp", "3"]) == 2
    assert capsys.readouterr().err.startswith("depgraph: error: tp: 3 does not divide")
