"""``depgraph profile``: the shapes it times hold the parameters the cost model charges; its CSV is read
back strictly; a profile the cost model itself generated is fitted back to the values that made it; and,
where PyTorch is installed, the same code runs on the CPU (the smoke test) into a file calibrate and
validate read."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

import depgraph as dg
from depgraph.cli import main
from depgraph.errors import ConfigError
from depgraph.profiler import GRIDS, TORCH_MISSING, Point, layer_shapes, plan_profile, representative_layers
from depgraph.specs.cost import CostModel
from depgraph.specs.fitted import gpu_fit
from depgraph.specs.profile_fit import (PROFILE_COLUMNS, PROFILE_FORMAT, compare_profile, fit_profile,
                                        read_profile_csv)

CATALOG = ["qwen3-32b", "qwen3.6-35b-a3b", "granite-4.0-h-tiny", "nemotron-3-nano-30b-a3b", "falcon-h1-7b-instruct",
           "gpt-oss-20b", "jamba-mini-1.5", "mistral-7b-v0.1"]
try:
    import torch  # noqa: F401
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False
#: run.sh sets it where it installed PyTorch: the smoke test must then run, not skip
REQUIRE_TORCH = os.environ.get("DEPGRAPH_REQUIRE_TORCH") == "1"
needs_torch = pytest.mark.skipif(not HAVE_TORCH and not REQUIRE_TORCH,
                                 reason="PyTorch not installed (pip install 'depgraph[profile]')")


def tiny_hybrid(tmp_path: Path) -> Path:
    """A Qwen3.6-shaped config (Gated DeltaNet and attention layers, experts and a shared expert), tiny."""
    from importlib import resources

    cfg = json.loads((resources.files("depgraph.specs") / "data" / "models" / "qwen3.6-35b-a3b.json").read_text())
    cfg["text_config"].update(hidden_size=64, head_dim=16, num_attention_heads=4, num_key_value_heads=2,
                              linear_key_head_dim=16, linear_value_head_dim=16, linear_num_key_heads=2,
                              linear_num_value_heads=4, moe_intermediate_size=32, shared_expert_intermediate_size=32,
                              num_experts=8, num_experts_per_tok=2, num_hidden_layers=4, vocab_size=1000)
    path = tmp_path / "tiny-hybrid" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps(cfg))
    return path


# ------------------------------------------------------------------ shapes and the plan


@pytest.mark.parametrize("tp", [1, 2, 4, 8])
@pytest.mark.parametrize("name", CATALOG)
def test_the_timed_gemms_hold_the_parameters_the_cost_model_charges(name, tp):
    """Each representative layer's GEMM weights on one of ``tp`` ranks, times ``tp``, add up to the
    layer's parameters as depgraph parses them and the cost model charges them (the mixer's, the dense
    MLP's, the router's and every expert's), within what norms, biases, the convolution's few weights and
    rounding a share up leave out."""
    m = dg.load_model(name)
    reps = representative_layers(m)
    if any(layer.query_heads % tp for layer in reps):
        pytest.skip(f"{name} cannot run at TP {tp}")
    for layer in reps:
        s = layer_shapes(m, layer, tp)
        h = s.hidden
        mixer = h * s.attn_in + s.attn_out * h + h * s.rec_in + s.rec_heads * s.rec_dv * h
        assert mixer * tp == pytest.approx(layer.mixer_params, rel=0.02), (name, layer.index, "mixer")
        assert (3 * h * s.ffn_inter + h * s.router) * tp == pytest.approx(layer.ffn_dense_params, rel=0.01,
                                                                          abs=h * 3 * tp)
        assert 3 * h * s.expert_inter * tp == pytest.approx(layer.expert_params, rel=0.01, abs=h * 3 * tp)
        if layer.recurrent_state_elems:  # the reference's state is the rank's share, element for element
            assert s.rec_heads * s.rec_dk * s.rec_dv * tp == layer.recurrent_state_elems
            assert s.conv_channels * (s.conv_kernel - 1) * m.dtype_bytes * tp == pytest.approx(layer.conv_bytes,
                                                                                               rel=0.01)
        if layer.attention_width:
            assert s.q_heads * s.head_dim * tp == layer.attention_width
            assert s.kv_heads == max(1, layer.kv_heads // tp)  # fewer KV heads than ranks: replicated


def test_a_rank_holds_its_share_and_replicates_too_few_kv_heads():
    m = dg.load_model("qwen3-32b")  # 64 query heads, 8 KV heads
    one, four, sixteen = (layer_shapes(m, m.layers[0], tp) for tp in (1, 4, 16))
    assert (four.q_heads, four.kv_heads, four.ffn_inter * 4) == (16, 2, one.ffn_inter)
    assert (sixteen.q_heads, sixteen.kv_heads) == (4, 1)  # 8 KV heads over 16 ranks: one each, replicated
    with pytest.raises(ConfigError, match="query heads"):
        layer_shapes(m, m.layers[0], 3)


def test_the_plan_covers_each_kind_of_layer_and_says_what_it_skips():
    m = dg.load_model("gpt-oss-20b")  # alternate sliding-window (128 tokens) and full-attention layers
    plan = plan_profile(m, grid="quick", ranks=2)
    kinds = {(p.shapes.index, bool(p.shapes.window)) for p in plan.points if p.shapes is not None}
    assert kinds == {(0, True), (1, False)}
    g = GRIDS["quick"]
    attn = [p for p in plan.points if p.operator == "attention"]
    assert len(attn) == len(g["tokens"]) + len(g["batches"]) * len(g["contexts"])  # the full layer's only
    assert {p.shapes.index for p in attn} == {1} and "past its window of 128 tokens" in plan.skipped[0]
    windowed = plan_profile(m, tokens=[64, 512], contexts=[100, 1000], batches=[1])
    assert {(p.phase, p.tokens, p.context) for p in windowed.points
            if p.operator == "attention" and p.shapes.index == 0} == {("prefill", 64, 0), ("decode", 1, 100)}
    mistral = plan_profile(dg.load_model("mistral-7b-v0.1"))  # every layer windowed (4,096): timed within it
    assert len([p for p in mistral.points if p.operator == "attention"]) == 4 + 5 * 2
    assert [p.nbytes for p in plan.points if p.operator == "all_reduce"] == \
        [n * m.hidden_size * 2 for n in g["allreduce_tokens"]]
    hybrid = plan_profile(dg.load_model("qwen3.6-35b-a3b"))
    assert {p.shapes.kind for p in hybrid.points} == {"gdn", "attention"}
    assert plan.warmup == g["warmup"] and plan.repeats == g["repeats"]


@pytest.mark.parametrize("kwargs, match", [
    (dict(tokens=[0]), "--tokens"), (dict(batches=[]), "--batch"), (dict(contexts=[2_000_000]), "--context"),
    (dict(ranks=1), "--ranks"), (dict(tp=0), "--tp"), (dict(grid="huge"), "grid"), (dict(repeats=0), "--repeats"),
    (dict(tokens=[300_000]), "context"),
])
def test_the_plan_refuses_bad_grids(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        plan_profile(dg.load_model("qwen3-32b"), **kwargs)


# ------------------------------------------------------------------ the file, read back strictly


def synthetic_profile(path: Path, model: str, cost: CostModel, *, tp: int = 1, ranks: int = 0,
                      noise: float = 0.0) -> Path:
    """A profile of ``model`` whose every time is ``cost``'s own prediction (times ``1 + noise x N(0,1)``):
    the file ``depgraph profile`` writes, made without PyTorch."""
    from depgraph.profiler.measure import profile_text

    m = dg.load_model(model)
    plan = plan_profile(m, tp=tp, ranks=ranks)
    rng = np.random.default_rng(7)
    rows = []
    for p in plan.points:
        if p.operator == "all_reduce":
            t = cost.allreduce_s(p.nbytes, p.ranks)
        else:
            layer = m.layers[p.shapes.index]
            prefill = p.phase == "prefill"
            parts = cost.operator_parts_s(m, layer, prefill_tokens=p.tokens if prefill else 0,
                                          context_tokens=() if prefill else [p.context] * p.tokens, tp=p.shapes.tp)
            t = parts["attention" if p.operator == "attention" else "projections"]
        t *= 1 + noise * rng.standard_normal()
        rows.append(dict(operator=p.operator, phase=p.phase, layer=p.shapes.index if p.shapes else 0,
                         layer_kind=p.shapes.kind if p.shapes else "", tp=p.shapes.tp if p.shapes else tp,
                         tokens=p.tokens,
                         context_tokens=p.context, bytes=p.nbytes, ranks=p.ranks, median_s=t, p10_s=t, p90_s=t,
                         repeats=25))
    path.write_text(profile_text(plan, rows, {"device": "cuda:0", "gpu": "synthetic"}, model_ref=model,
                                 skipped=list(plan.skipped), wall_s=0.0, command="test"))
    return path


#: Values unlike any GPU's shipped fit, to be found again.
TRUTH = dict(mfu=0.5, attention_mfu=0.3, hbm_efficiency=0.7, kv_hbm_efficiency=0.6, decode_layer_overhead_s=20e-6,
             prefill_layer_overhead_s=50e-6, attention_floor_s=8e-6, collective_latency_s=15e-6,
             collective_hop_latency_s=1e-6, collective_efficiency=0.9)


@pytest.mark.parametrize("model, tp, gpu", [("qwen3-32b", 1, "h100-sxm"), ("qwen3-32b", 4, "h100-sxm"),
                                            ("qwen3.6-35b-a3b", 1, "h100-sxm"), ("granite-4.0-h-tiny", 2, "h100-sxm"),
                                            ("qwen3-32b", 1, "l40s")])
def test_a_profile_the_cost_model_made_is_fitted_back_to_the_values_that_made_it(tmp_path, model, tp, gpu):
    """The round trip through the file: every fitted value found again to 0.5%, every regime predicted to
    0.5%, held out too; the intervals hold the truth. On an L40S a batch of 256 is still memory-bound: the
    smaller shares of the layer pin its fixed cost apart from its reads."""
    path = synthetic_profile(tmp_path / "p.csv", model, CostModel(gpu=gpu, **TRUTH), tp=tp, ranks=8)
    fit = fit_profile(path, gpu, bootstrap=20)
    assert set(fit.fitted) == set(TRUTH)
    for name, value in TRUTH.items():
        assert fit.values[name] == pytest.approx(value, rel=5e-3, abs=1e-9), name
        lo, hi = fit.intervals[name]
        assert lo * (1 - 5e-3) - 1e-9 <= value <= hi * (1 + 5e-3) + 1e-9, name
    for regime, s in fit.stats.items():
        assert s["median_abs_error"] < 5e-3, regime
    assert fit.held_out and all(s["median_abs_error"] < 5e-3 for s in fit.held_out.values())
    assert fit.meta["gpu"] == "synthetic" and fit.meta["model"] == model


def test_a_noisy_profile_gives_intervals_that_widen_with_the_noise(tmp_path):
    truth = CostModel(gpu="h100-sxm", **TRUTH)
    quiet = fit_profile(synthetic_profile(tmp_path / "a.csv", "qwen3-32b", truth, noise=0.01), "h100-sxm",
                        bootstrap=40)
    loud = fit_profile(synthetic_profile(tmp_path / "b.csv", "qwen3-32b", truth, noise=0.10), "h100-sxm",
                       bootstrap=40)
    width = (lambda f, k: f.intervals[k][1] - f.intervals[k][0])
    assert width(loud, "mfu") > width(quiet, "mfu") > 0
    assert quiet.values["mfu"] == pytest.approx(0.5, rel=0.02)
    again = fit_profile(tmp_path / "b.csv", "h100-sxm", bootstrap=40)
    assert again.intervals == loud.intervals  # seeded: the same file, the same intervals


def test_recurrent_rows_are_compared_but_never_fitted(tmp_path):
    """A recurrent layer's projections (a PyTorch reference of its recurrence) made 10x slower move no
    fitted value: they are reported in their own regimes."""
    truth = CostModel(gpu="h100-sxm", **TRUTH)
    path = synthetic_profile(tmp_path / "p.csv", "qwen3.6-35b-a3b", truth)
    lines = path.read_text().splitlines()
    out = []
    for line in lines:
        f = line.split(",")
        if len(f) == len(PROFILE_COLUMNS) and f[3] == "gdn":
            f[9:12] = [f"{float(x) * 10:.6e}" for x in f[9:12]]  # the median and its percentiles
        out.append(",".join(f))
    path.write_text("\n".join(out) + "\n")
    fit = fit_profile(path, "h100-sxm", bootstrap=0)
    assert fit.values["mfu"] == pytest.approx(0.5, rel=5e-3) and not fit.intervals
    assert fit.stats["recurrent-decode"]["median_error"] == pytest.approx(-0.9, abs=0.01)
    points, stats = compare_profile(path, CostModel(gpu="h100-sxm", **TRUTH))
    assert stats["prefill"]["median_abs_error"] < 1e-5 and "recurrent-prefill" in stats
    assert set(points["regime"]) >= {"prefill", "decode", "attention-prefill", "attention-decode",
                                     "recurrent-prefill", "recurrent-decode"}


def _file(tmp_path, body: str, head: str = PROFILE_FORMAT + "\n# model = qwen3-32b\n# device = cuda:0\n") -> Path:
    path = tmp_path / "p.csv"
    path.write_text(head + ",".join(PROFILE_COLUMNS) + "\n" + body)
    return path


GOOD = "projections,prefill,0,attention,1,512,0,0,0,1e-3,1e-3,1e-3,5\n"


@pytest.mark.parametrize("body, head, match", [
    (GOOD, "# depgraph profile 9\n# model = qwen3-32b\n# device = x\n", "line 1: expected"),
    (GOOD, PROFILE_FORMAT + "\n# device = cuda:0\n", "model: missing"),
    (GOOD, PROFILE_FORMAT + "\n# model qwen3-32b\n", "line 2: expected '# key = value'"),
    ("projections,prefill,0,attention,1,512,0,0,0,1e-3,1e-3,1e-3\n", None, "line 5: expected 13 fields"),
    ("softmax,prefill,0,attention,1,512,0,0,0,1e-3,1e-3,1e-3,5\n", None, "line 5: operator"),
    ("projections,later,0,attention,1,512,0,0,0,1e-3,1e-3,1e-3,5\n", None, "phase"),
    ("projections,prefill,64,attention,1,512,0,0,0,1e-3,1e-3,1e-3,5\n", None, "layer: expected a whole number from 0 to 63"),
    ("projections,prefill,0,attention,1,512,0,0,0,nan,1e-3,1e-3,5\n", None, "median_s: expected a number from 1e-09"),
    ("projections,prefill,0,attention,1,512,0,0,0,0,0,0,5\n", None, "median_s: expected a number from 1e-09"),
    ("projections,prefill,0,attention,1,512,0,0,0,1e-320,0,0,5\n", None, "median_s: expected a number from 1e-09"),
    ("projections,prefill,0,attention,1,512,0,0,0,1e9,0,0,5\n", None, "median_s: expected a number from 1e-09 to 3600"),
    ("projections,prefill,0,attention,1,1.5,0,0,0,1e-3,1e-3,1e-3,5\n", None, "tokens: expected a whole"),
    ("projections,prefill,0,attention,1,5_12,0,0,0,1e-3,1e-3,1e-3,5\n", None, "tokens: expected a whole"),
    ("projections,decode,0,attention,1,100000,0,0,0,1e-3,1e-3,1e-3,5\n", None, "tokens: expected a whole number from 1 to 65536"),
    ("projections,prefill,0,attention,99999,512,0,0,0,1e-3,1e-3,1e-3,5\n", None, "tp: expected a whole number from 1 to 1024"),
    ("projections,prefill,0,attention,1,512,0,0,0,1e-3,abc,1e-3,5\n", None, "p10_s"),
    ("projections,prefill,0,attention,1,512,0,0,0,1e-3,1e-3,1e-3,five\n", None, "repeats"),
    ("projections,prefill,0,gdn,1,512,0,0,0,1e-3,1e-3,1e-3,5\n", None, "layer_kind: qwen3-32b's layer 0 is 'attention'"),
    ("all_reduce,,0,,1,1,0,128,1,1e-5,1e-5,1e-5,5\n", None, "ranks: expected a whole number from 2 to 1024"),
    ("all_reduce,,0,,1,1,0,1e300,2,1e-5,1e-5,1e-5,5\n", None, "bytes: expected a number from 1 to 1e\\+12"),
    (GOOD, PROFILE_FORMAT + "\n# model = /no/such/config.json\n# device = cuda:0\n", "p.csv: model: .*must exist"),
    ("", None, "no rows"),
])
def test_a_bad_profile_is_refused_by_line_and_field(tmp_path, body, head, match):
    path = _file(tmp_path, body, head) if head else _file(tmp_path, body)
    with pytest.raises(ConfigError, match=match):
        read_profile_csv(path)


def test_an_attention_row_of_a_layer_without_attention_is_refused(tmp_path):
    head = PROFILE_FORMAT + "\n# model = qwen3.6-35b-a3b\n# device = cuda:0\n"  # layer 0: Gated DeltaNet
    path = _file(tmp_path, "attention,decode,0,gdn,1,4,512,0,0,1e-4,1e-4,1e-4,5\n", head)
    with pytest.raises(ConfigError, match="layer 0 has no attention"):
        read_profile_csv(path)


def test_calibrate_and_validate_take_a_profile_file(tmp_path, capsys):
    """calibrate --profile FILE prints the fit with intervals and writes a --hardware file; validate
    --profile then reports the error of the cost model in force, at the shipped fit and at the user's."""
    path = synthetic_profile(tmp_path / "p.csv", "qwen3-32b", CostModel(gpu="h100-sxm", **TRUTH), ranks=8)
    out = tmp_path / "mine.toml"
    assert main(["calibrate", "--profile", str(path), "--gpu", "h100-sxm", "--bootstrap", "20", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "interval (20 bootstrap refits, 5-95%)" in text and "measured on: gpu synthetic" in text
    assert main(["validate", "--profile", str(path), "--gpu", "h100-sxm", "--json"]) == 0
    shipped = json.loads(capsys.readouterr().out)
    assert shipped["regimes"]["prefill"]["median_abs_error"] > 0.1  # TRUTH is not the H100's fit
    assert main(["--hardware", str(out), "validate", "--profile", str(path), "--gpu", "h100-sxm",
                 "--points-csv", str(tmp_path / "pts.csv")]) == 0
    text = capsys.readouterr().out
    assert "fitted to profiles in" in text
    for line in text.splitlines()[2:]:
        assert line.split()[2] == "0.0%", line  # every regime's median error at the user's own fit
    assert (tmp_path / "pts.csv").read_text().startswith("regime,")
    assert main(["validate", "--profile", str(path)]) == 2
    assert main(["validate", "--gpu", "h100-sxm"]) == 2


def test_profile_refuses_bad_input_before_it_needs_pytorch(tmp_path, capsys):
    assert main(["profile", "qwen3-32b", "-o", str(tmp_path / "p.json")]) == 2
    with pytest.raises(SystemExit) as exc:
        main(["profile", "qwen3-32b", "--tokens", "512,x", "-o", str(tmp_path / "p.csv")])
    assert exc.value.code == 2 and "--tokens: expected whole numbers" in capsys.readouterr().err
    assert main(["profile", "no-such-model", "-o", str(tmp_path / "p.csv")]) == 2


def test_without_pytorch_profile_says_how_to_install_it_in_one_line(tmp_path, capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError
    assert main(["profile", "qwen3-32b", "-o", str(tmp_path / "p.csv")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and TORCH_MISSING in err and "depgraph[profile]" in err
    assert not (tmp_path / "p.csv").exists()


# ------------------------------------------------------------------ with PyTorch: the CPU smoke test


@needs_torch
def test_without_a_gpu_profile_refuses_in_one_line(tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert main(["profile", "qwen3-32b", "-o", str(tmp_path / "p.csv")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no CUDA GPU" in err and "--device cpu" in err


@needs_torch
def test_the_cpu_smoke_test_profiles_a_hybrid_into_a_file_calibrate_reads(tmp_path, capsys):
    """The same operators on the CPU at the smoke test's tiny sizes, a Gated DeltaNet + attention model
    with experts, and an all-reduce over two gloo ranks: every planned point timed, the metadata written,
    and calibrate and validate read the file."""
    config = tiny_hybrid(tmp_path)
    out = tmp_path / "tiny.csv"
    assert main(["profile", str(config), "--device", "cpu", "--ranks", "2", "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert "profile: [1/" in captured.err and f"wrote {out}" in captured.out
    prof = read_profile_csv(out)
    plan = plan_profile(dg.load_model(config), grid="cpu", ranks=2)
    assert len(prof.rows) + len(prof.allreduce) == len(plan.points)
    assert set(prof.rows["regime"]) == {"prefill", "decode", "attention-prefill", "attention-decode",
                                        "recurrent-prefill", "recurrent-decode"}
    assert (prof.rows["measured_s"] > 0).all() and len(prof.allreduce) == len(GRIDS["cpu"]["allreduce_tokens"])
    import torch

    assert prof.meta["torch"] == torch.__version__ and prof.meta["device"] == "cpu"
    assert prof.meta["model"] == str(config.resolve()) and prof.meta["gpu"] == "none (cpu)"
    assert float(prof.meta["wall_s"]) > 0 and int(prof.meta["repeats"]) == GRIDS["cpu"]["repeats"]
    assert main(["calibrate", "--profile", str(out), "--gpu", "h100-sxm", "--bootstrap", "10"]) == 0
    assert "a CPU smoke test" in capsys.readouterr().out
    assert main(["validate", "--profile", str(out), "--gpu", "h100-sxm"]) == 0


@needs_torch
def test_the_reference_recurrence_matches_a_token_by_token_one():
    """The chunked prefill recurrence (Mamba-2's scalar decay) gives what stepping the state one token at
    a time gives: the reference computes what it says it does."""
    import torch

    from depgraph.profiler.measure import _Layer

    m = dg.load_model("granite-4.0-h-tiny")
    s = layer_shapes(m, m.layers[0], 1)
    s = type(s)(**{**{k: getattr(s, k) for k in s.__slots__}, "rec_heads": 2, "rec_dk": 4, "rec_dv": 3,
                   "conv_channels": 5, "dtype_bytes": 4, "state_dtype_bytes": 4, "hidden": 8, "rec_in": 8,
                   "ffn_inter": 0, "experts": 0})
    layer = _Layer(torch, s, "cpu", torch.Generator().manual_seed(1))
    n = 150  # three chunks, the last one short
    g = torch.Generator().manual_seed(2)
    x = torch.randn(1, 5, n, generator=g)
    q, k, v = torch.randn(2, n, 4, generator=g), torch.randn(2, n, 4, generator=g), torch.randn(2, n, 3, generator=g)
    a = -torch.rand(2, n, generator=g) * 0.2
    y = layer.recurrent_prefill((x, q, k, v, a))
    state = torch.zeros(2, 4, 3)
    for t in range(n):
        state = state * torch.exp(a[:, t])[:, None, None] + k[:, t, :, None] * v[:, t, None, :]
        expect = torch.einsum("hkv,hk->hv", state, q[:, t])
        assert torch.allclose(y[:, t], expect, rtol=1e-4, atol=1e-4), t


def test_point_descriptions_name_the_layer_and_the_work():
    s = layer_shapes(dg.load_model("qwen3-32b"), dg.load_model("qwen3-32b").layers[0], 1)
    assert Point("attention", "decode", s, 64, 8192).describe() == \
        "layer 0 (attention) attention, decode of 64 requests over 8,192 tokens"
    assert math.isclose(s.weight_bytes(), 2 * (94371840 + 393216000), rel_tol=0.02)


def test_the_shipped_fits_intervals_are_what_docs_validation_says():
    """docs/validation.md's table of the shipped fits and their intervals, recomputed: each value and each
    bound at the four significant figures the doc writes."""
    from depgraph.specs.profile_fit import shipped_root

    doc = (Path(__file__).parents[1] / "docs" / "validation.md").read_text(encoding="utf-8")
    table = doc.split("| field | A100 80 GB | 5-95% | H100 SXM | 5-95% |")[1].split("\n\n")[0]
    rows = {}
    for line in table.strip().splitlines()[1:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0].strip("`")] = cells[1:]
    fits = {}
    for column, (gpu, folders) in enumerate((("a100-80g", ("compute/a100", "network/a100_dgx")),
                                              ("h100-sxm", ("compute/h100", "network/h100_dgx")))):
        for folder in folders:
            f = fit_profile(shipped_root() / folder, gpu, bootstrap=200)
            for name in f.fitted:
                fits[(name, column)] = (f.values[name], *f.intervals[name])
    checked = 0
    for name, cells in rows.items():
        for column in (0, 1):
            value, span = cells[2 * column], cells[2 * column + 1]
            if (name, column) not in fits:
                assert value.startswith("(the A100"), (name, column)
                continue
            scale = 1e6 if name.endswith("_s") else 1.0
            numbers = [float(x) for x in value.replace("µs", "").split()] + \
                [float(x) for x in span.replace("µs", "").split(" to ")]
            for shown, actual in zip(numbers, fits[(name, column)]):
                assert float(f"{actual * scale:.4g}") == pytest.approx(shown, abs=1e-9), (name, column)
            checked += 1
    assert checked == 17


def test_one_rank_count_fits_no_hop_latency(tmp_path):
    """All-reduces over one rank count cannot tell a launch from the ring's steps: the hop latency is held
    at the GPU's value in force (not fitted) and the launch fitted with it, exact at that count."""
    truth = CostModel(gpu="h100-sxm", **TRUTH)
    fit = fit_profile(synthetic_profile(tmp_path / "p.csv", "qwen3-32b", truth, ranks=2), "h100-sxm", bootstrap=20)
    shipped_hop = gpu_fit("h100-sxm").values["collective_hop_latency_s"]
    assert "collective_hop_latency_s" not in fit.fitted and fit.values["collective_hop_latency_s"] == shipped_hop
    assert fit.values["collective_latency_s"] == pytest.approx(15e-6 + 2 * (1e-6 - shipped_hop), rel=5e-3)
    lo, hi = fit.intervals["collective_latency_s"]
    assert lo <= fit.values["collective_latency_s"] <= hi
    assert fit.stats["all-reduce"]["median_abs_error"] < 5e-3


def test_terms_the_rows_cannot_pin_are_kept_not_fitted(tmp_path):
    """A dense layer's memory-bound decode rows at one share read the same weights at every batch: its fixed
    cost and its read efficiency cannot be told apart, so neither is fitted (nor, with no prefill rows,
    the GEMM MFU or the prefill fixed cost); they stay at the GPU's shipped fit and the attention terms
    are still fitted."""
    truth = CostModel(gpu="h100-sxm", **TRUTH)
    path = synthetic_profile(tmp_path / "p.csv", "qwen3-32b", truth)
    keep = []
    for line in path.read_text().splitlines():
        f = line.split(",")
        if len(f) == len(PROFILE_COLUMNS) and f[0] == "projections" and (f[1] == "prefill" or f[4] != "1"
                                                                          or f[5] == "256"):
            continue
        keep.append(line)
    path.write_text("\n".join(keep) + "\n")
    fit = fit_profile(path, "h100-sxm", bootstrap=10)
    assert set(fit.fitted) == {"attention_mfu", "kv_hbm_efficiency", "attention_floor_s"}
    shipped = gpu_fit("h100-sxm").values
    for name in ("mfu", "hbm_efficiency", "decode_layer_overhead_s", "prefill_layer_overhead_s"):
        assert fit.values[name] == shipped[name] and name not in fit.intervals
    assert fit.values["attention_mfu"] == pytest.approx(0.3, rel=5e-3)


@needs_torch
def test_a_failing_all_reduce_is_one_line_exit_1_and_writes_nothing(tmp_path, capsys, monkeypatch):
    """A rank that cannot start (gloo given no network interface) ends the command in one line, at once
    (the all-reduces run first), with no traceback and no file."""
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "no-such-interface")
    out = tmp_path / "p.csv"
    assert main(["profile", str(tiny_hybrid(tmp_path)), "--device", "cpu", "--ranks", "2", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.splitlines()[-1].startswith(
        "depgraph: error: depgraph profile: the all-reduce over 2 ranks failed (rank ")
    assert not out.exists()


def test_profile_refuses_what_it_can_before_timing(tmp_path, capsys):
    (tmp_path / "d.csv").mkdir()
    assert main(["profile", "qwen3-32b", "-o", str(tmp_path / "d.csv")]) == 2
    assert main(["profile", "qwen3-32b", "-o", str(tmp_path / "no" / "p.csv")]) == 2
    assert "does not exist" in capsys.readouterr().err
    # a TP the cost model refuses, said before PyTorch is looked for
    assert main(["profile", "falcon-h1-7b-instruct", "--device", "cpu", "--tp", "3", "-o", str(tmp_path / "p.csv")]) == 2
    assert "num_key_value_heads" in capsys.readouterr().err


def test_the_run_time_docs_profiling_estimates_is_what_the_plans_hold():
    """docs/profiling.md's budget estimate: each plan's timings, and the cost model's own kernel time over
    every warm-up and repeat, on an H100 with 8 GPUs visible."""
    doc = (Path(__file__).parents[1] / "docs" / "profiling.md").read_text(encoding="utf-8")
    cost = CostModel()
    seconds = []
    for name, shown in (("qwen3-32b", 58), ("qwen3.6-35b-a3b", 67), ("gpt-oss-20b", 82),
                        ("nemotron-3-nano-30b-a3b", 91)):
        m = dg.load_model(name)
        plan = plan_profile(m, ranks=8)
        assert len(plan.points) == shown and f"{shown} " in doc
        assert len([p for p in plan.points if p.operator == "all_reduce"]) == 15
        assert 31 <= len(plan_profile(m, grid="quick", ranks=8).points) <= 50
        total = 0.0
        for p in plan.points:
            if p.operator == "all_reduce":
                total += cost.allreduce_s(p.nbytes, p.ranks)
                continue
            prefill = p.phase == "prefill"
            parts = cost.operator_parts_s(m, m.layers[p.shapes.index], prefill_tokens=p.tokens if prefill else 0,
                                          context_tokens=() if prefill else [p.context] * p.tokens, tp=p.shapes.tp)
            total += parts["attention" if p.operator == "attention" else "projections"]
        seconds.append(total * (plan.warmup + plan.repeats))
    assert round(min(seconds), 2) == 0.40 and round(max(seconds), 2) == 0.73
    assert "0.40 to 0.73 s on an H100" in doc


def _rows_only(path: Path, keep) -> Path:
    lines = path.read_text().splitlines()
    path.write_text("\n".join(line for line in lines if len(line.split(",")) != len(PROFILE_COLUMNS)
                              or line.startswith("operator,") or keep(line.split(","))) + "\n")
    return path


def test_an_interval_needs_points_to_spare_and_resamples_that_pin_the_term(tmp_path):
    """Two prompt lengths fix the GEMM MFU and the prefill fixed cost exactly (resamples of them pin them
    half the time); three all-reduces over 2, 4 and 8 GPUs fix the three all-reduce terms exactly: no
    interval for any of them, and why, rather than a width of zero around a noisy value."""
    truth = CostModel(gpu="h100-sxm", **TRUTH)
    path = synthetic_profile(tmp_path / "p.csv", "qwen3-32b", truth, ranks=8, noise=0.03)
    _rows_only(path, lambda f: (f[0] != "projections" or f[1] != "prefill" or f[5] in ("512", "4096"))
               and (f[0] != "all_reduce" or f[5] == "128"))
    fit = fit_profile(path, "h100-sxm", bootstrap=100)
    for name in ("mfu", "prefill_layer_overhead_s"):
        assert name in fit.fitted and name not in fit.intervals and "resamples" in fit.no_interval[name]
    for name in ("collective_latency_s", "collective_hop_latency_s", "collective_efficiency"):
        assert fit.no_interval[name] == "3 points for 3 terms"
    assert "attention_mfu" in fit.intervals  # 4 prompts and 15 decode points: to spare


def test_a_fit_on_a_gpu_without_a_shipped_one_writes_a_file_that_reproduces_it(tmp_path, capsys):
    """On a GPU with no shipped fit every field is written (the plain constants for the terms the rows
    do not pin), so the --hardware file gives the errors calibrate reported."""
    truth = CostModel(gpu="mi300x", **TRUTH)
    path = _rows_only(synthetic_profile(tmp_path / "p.csv", "qwen3-32b", truth),
                      lambda f: f[1] == "decode" and f[4] == "1" and f[5] != "256")
    out = tmp_path / "mi.toml"
    assert main(["calibrate", "--profile", str(path), "--gpu", "mi300x", "--bootstrap", "0", "-o", str(out),
                 "--json"]) == 0
    fit = json.loads(capsys.readouterr().out)
    assert "hbm_efficiency" not in fit["fitted"] and fit["values"]["hbm_efficiency"] == 0.8  # the plain constant
    assert main(["--hardware", str(out), "validate", "--profile", str(path), "--gpu", "mi300x", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)["regimes"]
    for regime, stats in fit["errors"].items():
        assert again[regime]["median_abs_error"] == pytest.approx(stats["median_abs_error"], abs=1e-6), regime
    assert "kept: the value in force on this GPU" in out.read_text()


def test_a_cycle_between_memory_and_compute_bound_rows_fits_only_what_every_state_pins(tmp_path):
    """Decode rows at one share only, every one memory-bound at the truth: the fixed cost and the read
    efficiency cannot be told apart, whichever way the alternation between assignments turns."""
    truth = CostModel(gpu="h100-sxm", **{**TRUTH, "hbm_efficiency": 0.55})
    path = _rows_only(synthetic_profile(tmp_path / "p.csv", "qwen3-32b", truth),
                      lambda f: f[0] != "projections" or f[4] == "1")
    fit = fit_profile(path, "h100-sxm", bootstrap=0)
    assert "decode_layer_overhead_s" not in fit.fitted and "hbm_efficiency" not in fit.fitted
    assert fit.values["mfu"] == pytest.approx(0.5, rel=5e-3)


@pytest.mark.parametrize("body, match", [
    ("projections,decode,0,attention,7,4,0,0,0,1e-3,1e-3,1e-3,5\n", "line 5: tp: .*7"),
    ("projections,prefill,0,attention,3,512,0,0,0,1e-3,1e-3,1e-3,5\n", "line 5: tp: .*3"),
    ("projections,prefill,0,attention,1,512,0,0,0,1e-3,2e-3,3e-3,5\n", "line 5: median_s: expected p10_s <="),
])
def test_a_row_the_cost_model_cannot_read_is_refused_by_line(tmp_path, body, match):
    with pytest.raises(ConfigError, match=match):
        read_profile_csv(_file(tmp_path, body))


def test_an_unwritable_output_folder_is_refused_before_timing(tmp_path, capsys, monkeypatch):
    import tempfile

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "TemporaryFile", refuse)
    assert main(["profile", "qwen3-32b", "--device", "cpu", "-o", str(tmp_path / "p.csv")]) == 1
    assert "its folder cannot be written to (Permission denied)" in capsys.readouterr().err
