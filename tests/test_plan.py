"""depgraph plan: deployments searched, scored by goodput under SLOs, ranked per GPU."""

from __future__ import annotations

import json

import pytest

import depgraph as dg
from depgraph.cli import main
from depgraph.sweeps.plan import BOUNDS, candidates

KW = dict(gpu="h200", gpus=16, qps=3, prompt_tokens=2048, out_tokens=64, slo_ttft_s=1.0, slo_tpot_s=0.03,
          num_prompts=40, tps=(4, 8), max_num_seqs=(32,), max_candidates=12)


def test_candidates_stay_within_the_budget_and_shard_the_model():
    cs = candidates("qwen3.6-35b-a3b", gpu="h200", gpus=12, tps=(1, 2, 3, 4, 8), max_num_seqs=(64,),
                    max_candidates=1000)
    assert all(c["gpus"] <= 12 for c in cs)
    assert {c["tp"] for c in cs if c["handoff"] is None} == {1, 2, 4, 8}  # 3 does not divide its heads
    # disaggregated: a TP per side, every pair where one divides the other (vLLM's connectors need it)
    pairs = {(c["prefill_tp"], c["decode_tp"]) for c in cs if c["handoff"] is not None}
    assert (2, 8) in pairs and (8, 1) in pairs and (2, 2) in pairs and not any(3 in p for p in pairs)
    assert all(c["gpus"] == int(c["deployment"].split("P")[0]) * c["prefill_tp"]
               + int(c["deployment"].split("P")[1][:-1]) * c["decode_tp"] for c in cs if c["handoff"])
    assert all((c["tp"] is None) == (c["prefill_tp"] != c["decode_tp"]) for c in cs)
    kinds = [c["handoff"] is None for c in cs]
    assert kinds == sorted(kinds, reverse=True)  # colocated first
    assert {"colocated:3", "2P1D", "1P2D"} <= {c["deployment"] for c in cs}
    with pytest.raises(dg.ConfigError, match=r"tps: none of 16 shards qwen3-32b within 8 GPUs"):
        candidates("qwen3-32b", gpu="h200", gpus=8, tps=(16,))


def test_a_plan_ranks_what_meets_the_targets_first_and_says_what_bounds_each():
    rows = dg.plan("qwen3-32b", **KW, workers=1)
    assert len(rows) == 12
    meets = [r["meets_slos"] for r in rows]
    assert meets == sorted(meets, reverse=True)  # every candidate meeting the targets before any that does not
    first = [r for r in rows if r["meets_slos"]]
    assert [r["gpus"] for r in first] == sorted(r["gpus"] for r in first)  # fewest GPUs first
    rest = [r["goodput_rps"] for r in rows if not r["meets_slos"]]
    assert rest == sorted(rest, reverse=True)  # then the closest to the offered rate
    for r in rows:
        assert 0 <= r["goodput_rps"] <= KW["qps"] and r["bound"] in BOUNDS
        assert r["goodput_rps"] <= r["capacity_rps"] * (1 + 1e-12)
        assert r["goodput_per_gpu"] == pytest.approx(r["goodput_rps"] / r["gpus"])
        assert (r["bound"] == "meets SLOs") == r["meets_slos"]
        assert not r["meets_slos"] or r["goodput_rps"] == KW["qps"]
    assert rows == dg.plan("qwen3-32b", **KW, workers=2)  # the same whatever the worker count


def test_a_missed_target_gives_the_rate_that_would_meet_it():
    rows = dg.plan("qwen3-32b", **{**KW, "slo_ttft_s": 0.05, "max_candidates": 3, "tps": (8,)}, workers=1)
    missed = [r for r in rows if not r["meets_slos"]]
    assert missed and all(r["goodput_rps"] < KW["qps"] for r in missed)
    r = max(missed, key=lambda r: r["goodput_rps"])
    assert r["goodput_rps"] > 0
    kw = dict(qps=r["goodput_rps"], prompt_tokens=2048, out_tokens=64, num_prompts=40, max_num_seqs=32, seed=0,
              slo_ttft_s=0.05, slo_tpot_s=0.03, deployment=r["deployment"], gpu="h200", prefill_tp=r["prefill_tp"],
              decode_tp=r["decode_tp"])
    if r["handoff"]:
        kw["handoff"] = r["handoff"]
    s = dg.loadtest("qwen3-32b", **kw, until_steady=True, max_prompts=80).summary  # as the bisection ran it
    assert s["slo_attainment"] >= 0.9 and s["steady_state"] is not False  # the bisection's rate meets it


def test_a_plan_tries_a_tp_per_side_and_runs_each_side_at_its_own():
    """A 1P1D of a TP-2 prefill server and a TP-8 decode server is the load test with those sides."""
    rows = dg.plan("qwen3-32b", **{**KW, "tps": (2, 8), "max_candidates": 40, "gpus": 10}, workers=1,
                   colocated=False)
    mixed = [r for r in rows if r["deployment"] == "1P1D" and (r["prefill_tp"], r["decode_tp"]) == (2, 8)]
    assert len(mixed) == 1 and mixed[0]["gpus"] == 10 and mixed[0]["tp"] is None
    r = dg.loadtest("qwen3-32b", handoff="push", deployment="1P1D", qps=3, prompt_tokens=2048, out_tokens=64,
                    num_prompts=40, max_num_seqs=32, seed=0, slo_ttft_s=1.0, slo_tpot_s=0.03, gpu="h200",
                    prefill_tp=2, decode_tp=8)
    assert mixed[0]["slo_attainment"] == r.summary["slo_attainment"]
    assert mixed[0]["ttft_p90_s"] == r.summary["ttft_p90_s"]


def test_the_plan_command(capsys, tmp_path):
    argv = ["plan", "qwen3-32b", "--gpu", "h200", "--gpus", "16", "--qps", "3", "--prompt-tokens", "2048",
            "--out-tokens", "64", "--slo-ttft-ms", "1000", "--slo-tpot-ms", "30", "--num-prompts", "40", "--tps",
            "8", "--max-num-seqs", "32", "--workers", "1"]
    assert main(argv + ["--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert isinstance(rows, list) and {"deployment", "gpus", "goodput_rps", "goodput_per_gpu", "meets_slos", "bound",
                                       "gpu", "assumptions", "loadtest"} <= set(rows[0])
    assert main(argv + ["--plot", str(tmp_path / "p.png")]) == 0
    out = capsys.readouterr().out
    assert "rank  deployment" in out and (tmp_path / "p.png").stat().st_size > 0
    for bad, message in ((["--slo-ttft-ms", "0"], "--slo-ttft-ms: expected a number > 0"),
                         (["--only", "both"], "--only: expected one of colocated, disaggregated"),
                         (["--plot", "p.txt"], "--plot: expected a file ending in .png")):
        assert main(argv + bad) == 2
        assert message in capsys.readouterr().err


def test_scenarios_declare_deployments_and_traffic(tmp_path):
    from depgraph.sweeps.scenario import expand_scenario, load_scenario, parse_scenario

    sc = load_scenario("workloads/deployments.toml")
    variants = {p["variant"].split(",")[0] for p in expand_scenario(sc)}
    assert variants == {"colocated", "1P1D", "2P1D", "1P2D"}
    head = ('name = "t"\n[grid]\nmodels = ["qwen3-32b"]\nprompt_tokens = [1024]\nlinks = ["ib-ndr"]\nmfus = [0.4]\n'
            'timings = ["handoff"]\n[[workloads]]\nworkload = "loadtest"\nqps = 1\nnum_prompts = 20\n')
    with pytest.raises(dg.ConfigError, match=r"workloads\[0\]\.deployment: expected colocated, colocated:N"):
        parse_scenario(head + 'deployment = "3x"\nhandoff = "push"\n')
    with pytest.raises(dg.ConfigError, match=r"workloads\[0\]\.handoff: a colocated deployment has no handoff"):
        parse_scenario(head + 'deployment = "colocated"\nhandoff = "push"\n')
    with pytest.raises(dg.ConfigError, match=r"workloads\[0\]\.handoff: missing \(required"):
        parse_scenario(head + 'deployment = "2P1D"\n')
    scenario = parse_scenario(head + 'deployment = "colocated:2"\nburstiness = 0.5\nslo_ttft_s = 0.5\n')
    rows = dg.sweep(scenario, workers=1, progress=False)
    # two colocated servers at the default TP (LoadModel's 1, vLLM's): 2 GPUs
    assert rows.tp.tolist() == [1] and rows.gpus.tolist() == [2] and 0 <= rows.goodput_rps[0] <= rows.throughput_rps[0]



def test_over_the_cap_both_kinds_keep_a_share():
    cs = candidates("qwen3-32b", gpu="h200", gpus=256, tps=(8,), max_num_seqs=(32,), max_candidates=10)
    kinds = [c["handoff"] is None for c in cs]
    assert kinds.count(True) == 5 and kinds.count(False) == 5
    assert {c["deployment"] for c in cs} >= {"colocated", "1P1D"}
    few = candidates("qwen3-32b", gpu="h200", gpus=16, tps=(8,), max_num_seqs=(32, 32), max_candidates=100)
    assert [c["deployment"] for c in few] == ["colocated", "colocated:2", "1P1D"]  # duplicates folded


def test_only_memory_errors_make_a_candidate_memory_bound():
    from depgraph.sweeps.plan import evaluate

    point = {"model": "qwen3-32b", "gpu": "h200",
             "candidate": {"deployment": "colocated", "tp": 8, "handoff": None, "max_num_seqs": 32, "gpus": 8},
             "traffic": dict(qps=2.0, prompt_tokens=2048, out_tokens=16, num_prompts=10, slo_ttft_s=1.0,
                             slo_tpot_s=1.0, attainment=0.9, seed=0)}
    (row,) = evaluate(point)
    assert row["bound"] == "meets SLOs"
    with pytest.raises(dg.ConfigError, match=r"qps: 1e-07 req/s"):
        evaluate({**point, "traffic": {**point["traffic"], "qps": 1e-7}})
    huge = {**point, "traffic": {**point["traffic"], "prompt_tokens": 38_000, "out_tokens": 2000},
            "candidate": {**point["candidate"], "tp": 1, "gpus": 1}, "gpu": "a100-80g"}
    (row,) = evaluate(huge)
    assert row["bound"] == "memory-bound" and row["goodput_rps"] == 0


@pytest.mark.parametrize("kwargs, field", [
    (dict(deployment="colocated", tp=1, gpu="l40s"), "tp"),                              # weights alone
    (dict(deployment="colocated", prompt_tokens=40_000, tp=1, gpu="a100-80g"), "prompt_tokens"),  # one request
    (dict(deployment="1P1D", handoff="push", tp=1, gpu="l40s"), "decode_tp"),            # weights, decode side
    (dict(deployment="1P1D", handoff="push", kv_pool_bytes=1), "kv_pool_bytes"),         # a what-if pool
])
def test_memory_errors_have_their_own_type(kwargs, field):
    """The planner tells a memory-bound candidate by the error's type (MemoryFitError, a ConfigError),
    not by its words."""
    run = dict(qps=1.0, prompt_tokens=2048, out_tokens=16, num_prompts=4, max_num_seqs=4)
    with pytest.raises(dg.MemoryFitError, match=rf"^{field}: "):
        dg.loadtest("qwen3-32b", **{**run, **kwargs})
    with pytest.raises(dg.ConfigError) as info:  # any other refusal stays a plain ConfigError
        dg.loadtest("qwen3-32b", **{**run, "qps": -1.0})
    assert not isinstance(info.value, dg.MemoryFitError)


def test_the_cap_count_and_an_odd_cap():
    every = candidates("qwen3-32b", gpu="h200", gpus=512, max_candidates=None)
    assert len(every) > 1000  # more than MAX_CANDIDATES: the note counts them all
    assert [c["handoff"] for c in candidates("qwen3-32b", gpu="h200", gpus=64, max_candidates=1)] == [None]


def test_the_machines_memory_budget_is_not_a_deployments_memory(monkeypatch):
    from depgraph.sweeps.plan import evaluate

    monkeypatch.setenv("DEPGRAPH_MEMORY_BUDGET", "0.002")
    point = {"model": "qwen3-32b", "gpu": "h200",
             "candidate": {"deployment": "1P1D", "tp": 8, "handoff": "push", "max_num_seqs": 64, "gpus": 16},
             "traffic": dict(qps=2.0, prompt_tokens=2048, out_tokens=64, num_prompts=200, slo_ttft_s=1.0,
                             slo_tpot_s=0.05, attainment=0.9, seed=0)}
    with pytest.raises(dg.ConfigError, match=r"memory budget"):
        evaluate(point)


def test_a_plan_counts_the_candidates_its_cap_left_out():
    """plan() says how many candidates the grid holds before max_candidates (the command's note reads it,
    instead of asking candidates() a second time)."""
    rows = dg.plan("qwen3-32b", gpu="h200", gpus=16, qps=2, prompt_tokens=1024, out_tokens=16, slo_ttft_s=2.0,
                   slo_tpot_s=0.1, num_prompts=10, max_candidates=2, workers=1)
    every = candidates("qwen3-32b", gpu="h200", gpus=16, max_candidates=None)
    assert len(rows) == 2 and rows.candidates_total == len(every) > 2 and isinstance(rows, list)


def test_the_plan_figure_draws_what_meets_the_targets_on_top():
    """plan.png: candidates that meet the targets are filled, outlined and drawn over those that miss; where
    a colocated and a disaggregated candidate share a point each kind moves to its side so neither hides the
    other; a point of several candidates says how many; the title names the GPU, link and prefill MFU."""
    from matplotlib.colors import to_hex

    from depgraph.serving.plots import plot_plan

    a = {"gpu": "h200", "link": "25g", "prefill_mfu": 0.4}
    rows = [{"deployment": "colocated", "gpus": 4, "goodput_rps": 8.0, "meets_slos": True, "bound": "meets SLOs",
             "assumptions": a},
            {"deployment": "colocated:2", "gpus": 4, "goodput_rps": 8.0, "meets_slos": True, "bound": "meets SLOs",
             "assumptions": a},
            {"deployment": "1P1D", "gpus": 4, "goodput_rps": 8.0, "meets_slos": True, "bound": "meets SLOs",
             "assumptions": a},
            {"deployment": "2P1D", "gpus": 6, "goodput_rps": 7.0, "meets_slos": False, "bound": "TTFT-bound",
             "assumptions": a},
            {"deployment": "colocated", "gpus": 2, "goodput_rps": 5.0, "meets_slos": False, "bound": "TTFT-bound",
             "assumptions": a}]
    fig = plot_plan(rows, title="a plan")
    ax = fig.axes[0]
    met = [c for c in ax.collections if c.get_label().endswith("(filled, on top)")]
    missed = [c for c in ax.collections if "misses" in c.get_label()]
    assert len(met) == 2 and len(missed) == 2
    assert min(c.get_zorder() for c in met) > max(c.get_zorder() for c in missed)
    assert min(c.get_zorder() for c in met) > max(line.get_zorder() for line in ax.lines)  # over the front too
    assert all(to_hex(c.get_edgecolor()[0]) == "#000000" for c in met if len(c.get_offsets()))
    xs = {c.get_label().split(",")[0]: sorted({float(x) for x, _ in c.get_offsets()}) for c in met}
    assert xs["colocated"][0] < 4 < xs["disaggregated"][0]  # the shared point: one each side
    assert any(t.get_text() == "×2" for t in ax.texts)  # two colocated candidates there
    assert fig._suptitle.get_text() == "a plan\nGPU h200, link 25g, prefill MFU 0.4"
