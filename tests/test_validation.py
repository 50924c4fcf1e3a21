"""depgraph at its defaults against measurements on real GPUs (docs/validation.md): each target, at the
tolerance the page states, met or missed as the page says; the shipped defaults are what the profiles give."""

import json
import math

import pytest

import depgraph as dg
from depgraph.specs import profile_fit
from depgraph.specs.fitted import FITTED_FIELDS, gpu_fit
from depgraph.studies.validation import TARGETS, measured_root, operator_table, allreduce_table, serving_table


@pytest.fixture(scope="module")
def operators():
    return {r.regime + "/" + r.gpu: r for gpu in ("a100-80g", "h100-sxm") for r in operator_table(gpu)}


@pytest.fixture(scope="module")
def allreduce():
    return {r.gpu: r for gpu in ("a100-80g", "h100-sxm") for r in allreduce_table(gpu)}


@pytest.fixture(scope="module")
def serving():
    return {r.regime: r for r in serving_table()}


# the verdicts docs/validation.md reports, each checked at its stated tolerance
@pytest.mark.parametrize("key, verdict", [
    ("prefill/a100-80g", "met"), ("layer-prefill/a100-80g", "met"), ("layer-decode/a100-80g", "met"),
    ("prefill/h100-sxm", "met"), ("decode/a100-80g", "missed"), ("decode/h100-sxm", "missed"),
])
def test_operator_targets(operators, key, verdict):
    r = operators[key]
    assert r.target == TARGETS[r.regime] == {"median_abs_error": 0.10, "p90_abs_error": 0.20}
    assert r.verdict == verdict
    assert r.stats["median_abs_error"] <= 0.10  # every operator regime meets its median
    if verdict == "missed":  # by its 90th percentile only, at the roofline's knee (the page's reason)
        assert 0.20 < r.stats["p90_abs_error"] < 0.25
        worst = r.points.assign(err=r.points.predicted_s / r.points.measured_s - 1).nsmallest(10, "err")
        assert worst.tokens.between(64, 256).all() and (worst.err < 0).all()


def test_each_profiled_model_left_out_is_predicted_as_well(operators):
    for key in ("prefill/a100-80g", "layer-decode/a100-80g", "prefill/h100-sxm"):
        s = operators[key].stats
        assert s["held_out_median_abs_error"] <= 0.10 and s["held_out_p90_abs_error"] <= 0.20, key


def test_allreduce_target(allreduce):
    for gpu, r in allreduce.items():
        assert r.verdict == "met" and r.stats["median_abs_error"] <= 0.20, gpu
        assert r.points.ranks.isin([2, 4, 8]).all() and r.points.bytes.between(8192, 4096 * 8192 * 2).all()


def test_the_defaults_beat_the_plain_constants_on_every_regime(operators, allreduce):
    """What the fit bought: the plain constants (no fit) miss by more on every regime with a target."""
    for r in [*operators.values(), *allreduce.values()]:
        if not r.target:
            continue
        plain = dg.CostModel(gpu=r.gpu, fitted_defaults=False)
        if r.regime == "all-reduce":
            pred = profile_fit.predict_allreduce(r.points, plain)
        else:
            rows = profile_fit.operator_rows(profile_fit.read_profile_dir(
                measured_root() / "vidur" / r.dataset.removeprefix("vidur/")))
            rows = rows[rows.regime == r.regime]
            pred = profile_fit.predict_rows(rows, plain)
        before = profile_fit.error_stats(pred, r.points.measured_s.to_numpy())
        assert before["median_abs_error"] > r.stats["median_abs_error"], r.regime


def test_serving_targets(serving):
    tpot, ttft, tput = serving["serving TPOT p50"], serving["serving TTFT mean"], serving["serving throughput"]
    assert tpot.verdict == "met" and tpot.stats["max_abs_error"] <= 0.20
    assert tput.verdict == "met" and tput.stats["max_abs_error"] <= 0.15
    # TTFT: the three Poisson runs within 35%; the burst (its prompts in the prefix cache) missed
    err = ttft.points.predicted_s / ttft.points.measured_s - 1
    finite = ttft.points.rate_rps.map(math.isfinite)
    assert (err[finite].abs() <= 0.35).all() and ttft.verdict == "missed" and (err[~finite] > 1).all()


def test_the_shipped_defaults_are_what_the_profiles_give():
    path = measured_root().parent / "fitted.json"
    shipped = json.loads(path.read_text(encoding="utf-8"))
    assert shipped == json.loads(json.dumps(profile_fit.shipped_fits()))
    assert profile_fit.main(["--check"]) == 0
    for gpu, entry in shipped["fits"].items():
        assert set(entry["values"]) == set(FITTED_FIELDS) and entry["dataset"].startswith("Vidur's profiles"), gpu


def test_every_default_names_its_dataset():
    cost = dg.CostModel()
    assert cost.fit.gpu == "h100-sxm" and "vidur/compute/h100" in cost.fit.dataset
    assert "fitted to Vidur's profiles" in cost.describe()
    assert gpu_fit("h200").borrowed_from == "h100-sxm" and gpu_fit("mi300x") is None
    assert "collective_efficiency" not in gpu_fit("h100-pcie").values  # its all-reduce runs over PCIe
    plain = dg.CostModel(gpu="h100-sxm", fitted_defaults=False)
    assert (plain.prefill_mfu, plain.decode_hbm_efficiency, plain.layer_overhead_s) == (0.6, 0.8, 0.0)


def test_a_given_mfu_moves_attention_by_the_fitted_ratio():
    fit = gpu_fit("a100-80g").values
    cost = dg.CostModel(gpu="a100-80g", mfu=0.4)
    assert cost.attention_efficiency == pytest.approx(0.4 * fit["attention_mfu"] / fit["mfu"], rel=1e-12)
    assert dg.CostModel(gpu="a100-80g").attention_efficiency == fit["attention_mfu"]


def test_a_profile_folder_is_read_with_bounds_and_one_line_errors(tmp_path):
    with pytest.raises(dg.ConfigError, match="not a directory"):
        profile_fit.read_profile_dir(tmp_path / "missing")
    with pytest.raises(dg.ConfigError, match="no mlp.csv"):
        profile_fit.read_profile_dir(tmp_path)
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "mlp.csv").write_text("n_head,n_kv_head\n1,1\n")
    with pytest.raises(dg.ConfigError, match=r"mlp.csv: n_embd: column missing"):
        profile_fit.read_profile_dir(tmp_path)
    src = measured_root() / "vidur" / "compute" / "h100" / "meta-llama" / "Llama-2-7b-hf" / "mlp.csv"
    text = src.read_text().splitlines()
    cols = text[0].split(",")
    bad = text[1].split(",")
    bad[cols.index("time_stats.mlp_up_proj.median")] = "-1"
    (tmp_path / "m" / "mlp.csv").write_text("\n".join([text[0], ",".join(bad)]) + "\n")
    with pytest.raises(dg.ConfigError, match=r"time_stats.mlp_up_proj.median: row 2: expected a time >= 0"):
        profile_fit.read_profile_dir(tmp_path)


def test_the_validate_command(capsys, tmp_path):
    from depgraph.cli import main

    assert main(["validate", "--no-serving", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    regimes = {(r["regime"], r["gpu"]): r for r in out["regimes"]}
    assert regimes[("layer-decode", "a100-80g")]["verdict"] == "met"
    assert main(["validate", "--no-serving", "--plot", str(tmp_path / "v.png"),
                 "--points-csv", str(tmp_path / "p.csv")]) == 0
    text = capsys.readouterr().out
    assert "layer-decode" in text and "in-sample" in text and (tmp_path / "v.png").stat().st_size > 10_000
    assert main(["validate", "--plot", str(tmp_path / "v.gif")]) == 2


def test_calibrate_profile_fits_a_users_profiles_and_every_command_takes_them(tmp_path, capsys):
    """A user's Vidur-format profiles (here: the shipped A100 ones, with one GEMM made 30% slower) give
    their own fit, and the --hardware file it writes carries it to every command."""
    import shutil

    from depgraph.cli import main

    src = measured_root() / "vidur" / "compute" / "a100"
    mine = tmp_path / "profiles"
    shutil.copytree(src, mine)
    for f in mine.rglob("mlp.csv"):
        import pandas as pd

        frame = pd.read_csv(f)
        frame["time_stats.mlp_up_proj.median"] *= 1.3
        frame.to_csv(f, index=False)
    out = tmp_path / "a100.toml"
    assert main(["calibrate", "--profile", str(mine), "--gpu", "a100-80g", "-o", str(out), "--json"]) == 0
    fit = json.loads(capsys.readouterr().out)
    shipped = gpu_fit("a100-80g").values
    assert fit["values"]["mfu"] < shipped["mfu"] and fit["values"]["hbm_efficiency"] < shipped["hbm_efficiency"]
    assert fit["errors"]["prefill"]["median_abs_error"] < fit["errors_at_shipped_defaults"]["prefill"]["median_abs_error"]
    assert main(["--hardware", str(out), "ttft", "qwen3-32b", "--gpu", "a100-80g", "--prompt-tokens", "1024",
                 "--json"]) == 0
    theirs = json.loads(capsys.readouterr().out)
    assert main(["ttft", "qwen3-32b", "--gpu", "a100-80g", "--prompt-tokens", "1024", "--json"]) == 0
    ours = json.loads(capsys.readouterr().out)
    assert theirs["ttft_s"] > ours["ttft_s"] and theirs["mfu"] < ours["mfu"]  # a slower GEMM, a slower prefill
    assert main(["calibrate", "qwen3-32b", "--profile", str(mine), "--gpu", "a100-80g"]) == 2
    assert main(["calibrate", "--gpu", "a100-80g"]) == 2


def test_memory_target():
    from depgraph.studies.validation import memory_table

    (r,) = memory_table()
    assert r.verdict == "met" and r.stats["max_abs_error"] <= 0.05 and r.stats["n"] >= 10
